// A tool call the model is writing, on steerable's page: while its arguments stream in
// (TOOL_CALL_DELTA), a live line in the turn says "writing write notes.md … 1.2 KB, 40 lines";
// the call's own card replaces it once the model's reply is complete.
// (sizeLabel comes from parts.js, loaded before this file.)
"use strict";

const MAIN_ARG = /"(?:path|file_path|command|pattern|url|query)"\s*:\s*"((?:[^"\\]|\\.){1,80})/;

function writingOf() {
  if (!state.writing) state.writing = new Map();
  return state.writing;
}

function writingDelta(ev, t) {
  const key = ev.turn_id + "#" + ev.call_index;
  let w = writingOf().get(key);
  if (!w) {
    w = { name: "", size: 0, lines: 0, head: "", last: "", started: Date.now(),
          node: append(t.box, el("div", "writing")) };
    writingOf().set(key, w);
  }
  const piece = ev.arguments_delta;
  w.name = ev.tool_name || w.name;
  w.size += piece.length;
  // Escaped newlines ("\n" in the JSON text) are the file's lines; one may be cut in two.
  const joined = w.last + piece;
  w.lines += (joined.match(/\\n/g) || []).length - (w.last.match(/\\n/g) || []).length;
  w.last = piece.slice(-1);
  if (w.head.length < 400) w.head += piece.slice(0, 400 - w.head.length);
  const found = w.head.match(MAIN_ARG);
  const target = found ? " " + found[1] : "";
  const lines = w.lines ? ", " + w.lines + (w.lines === 1 ? " line" : " lines") : "";
  const seconds = Math.round((Date.now() - w.started) / 1000);
  w.node.textContent = "writing " + (w.name || "a tool call") + target + " … " +
    sizeLabel(w.size) + lines + (seconds ? " (" + seconds + "s)" : "");
}

// The reply is complete (or starts over): the calls are no longer being written.
function writingDone(turnId) {
  for (const [key, w] of Array.from(writingOf())) {
    if (key.startsWith(turnId + "#")) { w.node.remove(); writingOf().delete(key); }
  }
}
