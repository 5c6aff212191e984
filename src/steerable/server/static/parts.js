// Attachments on steerable's page: the paperclip button picks images, PDFs or text files; each
// shows as a chip (a thumbnail for an image) that can be removed; Send posts them with the text
// as content parts ({"type": "image" | "file", "media_type", "name", "data": base64}). A send
// that fails (a busy session takes no attachments: they start a turn of their own) keeps them.
"use strict";

const MAX_ATTACHMENT = 20 * 1000 * 1000;  // as the server's limit per file
const attached = [];

function readAsDataUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function sizeLabel(size) {
  if (size < 1000) return size + " B";
  if (size < 1000000) return (size / 1000).toFixed(1) + " KB";
  return (size / 1000000).toFixed(1) + " MB";
}

async function addFiles(files) {
  for (const file of files) {
    if (file.size > MAX_ATTACHMENT) {
      note("cannot attach " + file.name + ": " + sizeLabel(file.size) + " is over the " +
           sizeLabel(MAX_ATTACHMENT) + " limit for an attachment", "err");
      continue;
    }
    const url = await readAsDataUrl(file);
    const type = file.type || "application/octet-stream";
    attached.push({ name: file.name, media_type: type, size: file.size, url,
                    data: url.slice(url.indexOf(",") + 1) });
  }
  showAttached();
}

function showAttached() {
  const box = $("attached");
  box.textContent = "";
  box.hidden = attached.length === 0;
  attached.forEach((a, index) => {
    const chip = el("span", "chip");
    chip.dataset.name = a.name;
    if (a.media_type.startsWith("image/")) {
      const img = el("img", "thumb");
      img.src = a.url;
      img.alt = a.name;
      chip.appendChild(img);
    }
    chip.appendChild(el("span", "chip-name", a.name + " · " + sizeLabel(a.size)));
    const drop = el("button", "chip-drop", "×");
    drop.type = "button";
    drop.title = "Remove " + a.name;
    drop.onclick = () => { attached.splice(index, 1); showAttached(); };
    chip.appendChild(drop);
    box.appendChild(chip);
  });
}

// The content parts for the next message, or null without attachments.
function attachedParts() {
  if (attached.length === 0) return null;
  return attached.map((a) => ({
    type: a.media_type.startsWith("image/") ? "image" : "file",
    media_type: a.media_type, name: a.name, data: a.data,
  }));
}

// The message was taken: the attachments went with it.
function clearAttached() { attached.length = 0; showAttached(); }

// A user message from history with parts: its text, and a chip per image or file.
function partChips(box, parts) {
  for (const p of parts || []) {
    if (p.type === "text") continue;
    const label = p.name || p.url || p.media_type;
    box.appendChild(el("span", "chip", (p.type === "image" ? "image: " : "file: ") + label +
                       (p.size !== undefined ? " · " + sizeLabel(p.size) : "")));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const picker = $("attach-file");
  $("attach").onclick = () => picker.click();
  picker.addEventListener("change", async () => {
    await addFiles(Array.from(picker.files));
    picker.value = "";
    $("input").focus();
  });
});
