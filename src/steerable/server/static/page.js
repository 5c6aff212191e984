// The page's manners: following the newest output, a tool's streamed output as it was
// written, turn statuses after a reload, Esc to interrupt (as Ctrl+C in the CLI), and the
// session list behind a button when the window is narrow.
"use strict";

// -- following the conversation ------------------------------------------------------------
// The log follows new content unless the person scrolled up to read: that choice is taken
// from their own scrolling, not re-guessed at each append (a tool's output box that grew in
// between would otherwise look like a scroll away, and the final answer would stay unseen).
state.stick = true;
document.addEventListener("DOMContentLoaded", () => {
  $("log").addEventListener("scroll", () => { state.stick = nearBottom(); });
});

// A tool's streamed output: bash sends its output as it arrives, newlines included, so the
// chunks are joined as they are; other progress notes are lines of their own.
function addProgress(pre, ev) {
  const raw = ev.data && ev.data.stream === "output";
  const sep = !raw && pre.textContent && !pre.textContent.endsWith("\n") ? "\n" : "";
  pre.textContent += sep + ev.text;
  pre.scrollTop = pre.scrollHeight;
  scroll();
}

// -- turn statuses from the saved session --------------------------------------------------
// ``turns``: where each saved turn starts among ``messages`` and how it ended. The status line
// goes after the turn's last box (a steered turn has several user messages, so several boxes).
function markTurns(turns, count) {
  const boxes = Array.from(log().querySelectorAll(".turn[data-start]"));
  turns.forEach((t, i) => {
    const end = i + 1 < turns.length ? turns[i + 1].start : count;
    const mine = boxes.filter((b) => Number(b.dataset.start) >= t.start && Number(b.dataset.start) < end);
    if (!mine.length || t.status === "appended") return;
    const calls = t.iterations + (t.iterations === 1 ? " call" : " calls");
    const line = el("div", "turn-end" + (t.status === "completed" ? "" : " bad"), t.status + " · " + calls);
    line.dataset.turn = t.turn_id;
    mine[mine.length - 1].appendChild(line);
  });
}

// -- Esc: interrupt, as Ctrl+C does in the CLI -----------------------------------------------
// The first press lets the turn sum up; a second one within 2 s, or on the same turn, stops it
// at once (nothing of the turn is saved).
const ESC_AGAIN = 2000;
const esc = { at: 0, turn: null };

function pressEscape() {
  if ($("app").classList.contains("show-sessions")) { toggleSessions(false); return; }
  const turn = state.running.values().next().value;
  if (turn === undefined) return;
  const again = Date.now() - esc.at <= ESC_AGAIN || esc.turn === turn;
  esc.at = Date.now();
  if (again) {
    esc.at = 0;
    control("interrupt", "hard");
    return;
  }
  esc.turn = turn;
  control("interrupt", "graceful");
  note("Esc again within 2 s to stop at once", "esc-hint");
}

// -- the session list when the window is narrow -----------------------------------------------
function toggleSessions(show) {
  const app = $("app");
  const on = show === undefined ? !app.classList.contains("show-sessions") : show;
  app.classList.toggle("show-sessions", on);
  $("sessions-toggle").setAttribute("aria-expanded", String(on));
}

document.addEventListener("DOMContentLoaded", () => {
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !e.isComposing) { e.preventDefault(); pressEscape(); }
  });
  $("sessions-toggle").onclick = () => toggleSessions();
  // Choosing a session (or a new one) closes the overlay.
  $("sessions").addEventListener("click", () => toggleSessions(false));
  $("new-session").addEventListener("click", () => toggleSessions(false));
});
