// Undo on steerable's page: each turn that changed files gets a row naming them, with a button
// that takes them back (POST /undo with the turn's id), and redo for what was just undone.
// A refusal (files changed since) names the files and offers to overwrite them.
"use strict";

function smallButton(text, onclick) {
  const b = el("button", "btn btn-small", text);
  b.type = "button";
  b.onclick = async () => { b.disabled = true; try { await onclick(); } finally { b.disabled = false; } };
  return b;
}

function sessionPath(sid, tail) { return "/v1/sessions/" + encodeURIComponent(sid) + "/" + tail; }

async function refreshChanges() {
  const sid = state.sid;
  if (!sid || state.undoOff) return;
  const r = await api("GET", sessionPath(sid, "changes"));
  if (r.status === 404 && r.data && /undo is off/.test(r.data.error || "")) {
    state.undoOff = true;
    $("stop-undo").hidden = true;
    return;
  }
  if (r.status !== 200 || sid !== state.sid) return;
  for (const step of r.data.steps) changesRow(step, r.data.redo_turns.includes(step.turn_id));
}

// The turn's box: live (by turn id) or from history (by the index of its first message).
function boxFor(step) {
  const live = state.turns.get(step.turn_id);
  if (live && !live.parent) return live.box;
  if (step.message_index === null) return null;
  return log().querySelector('.turn[data-start="' + step.message_index + '"]');
}

function changesRow(step, redoable) {
  const box = boxFor(step);
  if (!box) return;
  let row = box.querySelector(":scope > .changes");
  if (!row) { row = el("div", "changes"); row.dataset.turn = step.turn_id; }
  row.textContent = "";
  row.classList.toggle("undone", step.undone);
  const shown = step.files.slice(0, 6).join(", ") + (step.files.length > 6 ? ", …" : "");
  const what = (step.undone ? "undone: " : "changed ") + step.files.length + " path(s): ";
  row.appendChild(el("span", "changes-text", what + shown));
  if (!step.undone) row.appendChild(smallButton("Undo", () => undoTurn(step.turn_id, row, false)));
  else if (redoable) row.appendChild(smallButton("Redo", () => redoTurns(row, false)));
  box.appendChild(row);
}

async function undoTurn(turnId, row, force) {
  const body = force ? { turn_id: turnId, force: true } : { turn_id: turnId };
  answered(await api("POST", sessionPath(state.sid, "undo"), body), row, "Undo anyway",
    () => undoTurn(turnId, row, true));
}

async function redoTurns(row, force) {
  answered(await api("POST", sessionPath(state.sid, "redo"), force ? { force: true } : {}), row,
    "Redo anyway", () => redoTurns(row, true));
}

function answered(r, row, forceText, forceAgain) {
  const old = row.querySelector(".changes-conflict");
  if (old) old.remove();
  if (r.status === 200) { refreshChanges(); return; }
  const box = el("div", "changes-conflict");
  box.appendChild(el("span", null, (r.data && r.data.error) || "failed (HTTP " + r.status + ")"));
  if (r.status === 409 && r.data && r.data.conflicts) box.appendChild(smallButton(forceText, forceAgain));
  row.appendChild(box);
}
