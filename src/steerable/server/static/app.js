// steerable's web page: sessions, a live conversation, tool cards, approvals, steering.
// No build step and no dependencies: plain DOM, fetch, and a small server-sent-events reader
// (fetch rather than EventSource, so the bearer token travels in a header, never in a URL).
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  sid: null, cursor: 0, follow: null, running: new Set(), turns: new Map(), cards: new Map(),
  approvals: new Map(), queued: 0, undoOff: false, editing: null, queueTimer: null,
  waitingTimer: null,
};

// -- the token: given once as #token=..., kept for this tab only --------------------------
(function takeToken() {
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    sessionStorage.setItem("steerable-token", decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  const t = sessionStorage.getItem("steerable-token");
  if (t) h["Authorization"] = "Bearer " + t;
  return h;
}

async function api(method, path, body) {
  const init = { method, headers: authHeaders(body ? { "Content-Type": "application/json" } : {}) };
  if (body) init.body = JSON.stringify(body);
  const res = await fetch(path, init);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  return { status: res.status, data };
}

// -- small DOM helpers -------------------------------------------------------------------
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}
function log() { return $("log"); }
function nearBottom() { const l = log(); return l.scrollHeight - l.scrollTop - l.clientHeight < 120; }
function scroll(force) { if (force || state.stick) { const l = log(); l.scrollTop = l.scrollHeight; } }
function append(parent, node) {
  $("empty").hidden = true;
  parent.appendChild(node);
  scroll();
  return node;
}
function note(text, cls, parent) { return append(parent || log(), el("div", "note " + (cls || ""), text)); }

function summarize(name, args) {
  if (!args || typeof args !== "object") return "";
  for (const key of ["command", "path", "pattern", "task", "query", "url"]) {
    if (typeof args[key] === "string") return args[key].split("\n")[0];
  }
  const s = JSON.stringify(args);
  return s === "{}" ? "" : s;
}

// -- turns, nested by parent_turn_id -------------------------------------------------------
function turnBox(turnId, parentId) {
  let t = state.turns.get(turnId);
  if (t) return t;
  let box;
  if (parentId) {
    const parent = turnBox(parentId, null);
    box = el("div", "subturn");
    box.dataset.turn = turnId;
    const head = el("div", "subturn-head", "sub-agent");
    box.appendChild(head);
    append(parent.box, box);
    t = { box, head, text: null, parent: parentId };
  } else {
    box = el("div", "turn");
    box.dataset.turn = turnId;
    append(log(), box);
    t = { box, head: null, text: null, parent: null };
  }
  state.turns.set(turnId, t);
  return t;
}

function streamText(t, delta) {
  if (!t.text) {
    t.text = append(t.box, el("div", "msg assistant streaming"));
  }
  t.text.textContent += delta;
  scroll();
}

// A little Markdown, built as DOM nodes (never innerHTML): ``` fences, `code`, **bold**.
function rich(text) {
  const frag = document.createDocumentFragment();
  const parts = text.split(/```[^\n]*\n?/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) { frag.appendChild(el("pre", null, part.replace(/\n$/, ""))); return; }
    for (const bit of part.split(/(`[^`\n]+`|\*\*[^*\n]+\*\*)/)) {
      if (/^`[^`]+`$/.test(bit)) frag.appendChild(el("code", null, bit.slice(1, -1)));
      else if (/^\*\*[^*]+\*\*$/.test(bit)) frag.appendChild(el("strong", null, bit.slice(2, -2)));
      else if (bit) frag.appendChild(document.createTextNode(bit));
    }
  });
  return frag;
}

function assistantText(text) {
  const m = el("div", "msg assistant");
  m.appendChild(rich(text));
  return m;
}

function endStream(t, full) {
  if (!t.text) {
    if (full) append(t.box, assistantText(full));
    return;
  }
  const text = full || t.text.textContent;
  t.text.classList.remove("streaming");
  t.text.textContent = "";
  t.text.appendChild(rich(text));
  if (!text.trim()) t.text.remove();
  t.text = null;
}

// -- tool cards ----------------------------------------------------------------------------
// Cards are keyed by turn and call: a sub-agent's call ids may repeat its parent's.
function card(turnId, callId, name, args, parentBox) {
  const key = turnId + "/" + callId;
  let c = state.cards.get(key);
  if (c) return c;
  const root = el("div", "card");
  root.dataset.call = callId;
  const head = el("div", "card-head");
  head.appendChild(el("div", "tool-icon", (name || "?").slice(0, 2)));
  head.appendChild(el("span", "tool-name", name));
  head.appendChild(el("span", "tool-sum", summarize(name, args)));
  const badge = el("span", "badge running", "running");
  head.appendChild(badge);
  root.appendChild(head);
  const det = el("details");
  det.appendChild(el("summary", null, "arguments"));
  det.appendChild(el("pre", null, JSON.stringify(args || {}, null, 2)));
  root.appendChild(det);
  c = { root, badge, progress: null, result: null };
  state.cards.set(key, c);
  append(parentBox, root);
  return c;
}

function setBadge(c, cls, text) { c.badge.className = "badge " + cls; c.badge.textContent = text; }

function showResult(c, content, isError) {
  setBadge(c, isError ? "err" : "ok", isError ? "failed" : "done");
  if (c.result) c.result.remove();
  const det = el("details");
  if (isError) det.open = true;
  det.appendChild(el("summary", null, isError ? "error" : "result"));
  det.appendChild(el("pre", null, content || "(no output)"));
  c.result = det;
  c.root.appendChild(det);
}

// What an edit or write changed: one line per row, coloured by its sign.
function showDiff(c, diff) {
  if (c.diff) c.diff.remove();
  const pre = el("pre", "diff");
  let inDiff = false;
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    inDiff = inDiff || line.startsWith("--- ");
    let cls = null;
    if (inDiff && (line.startsWith("--- ") || line.startsWith("+++ "))) cls = "d-file";
    else if (inDiff && line.startsWith("@@")) cls = "d-hunk";
    else if (inDiff && line.startsWith("+")) cls = "d-add";
    else if (inDiff && line.startsWith("-")) cls = "d-del";
    pre.appendChild(el("span", cls, line + "\n"));
  }
  c.diff = pre;
  c.root.insertBefore(pre, c.root.children[1] || null);
}

// The agent's plan (the todo tool): one checklist per turn, redrawn as it changes.
function showPlan(t, items) {
  if (!t.plan) t.plan = append(t.box, el("div", "plan"));
  t.plan.textContent = "";
  const done = items.filter((i) => i.status === "done").length;
  t.plan.appendChild(el("div", "plan-head", "Plan (" + done + "/" + items.length + " done)"));
  const list = el("ul");
  for (const item of items) list.appendChild(el("li", "plan-" + item.status, item.content));
  t.plan.appendChild(list);
}

function askApproval(ev, c) {
  const bar = el("div", "approval");
  bar.dataset.request = ev.request_id;
  bar.appendChild(el("span", null, "Allow this call? The agent waits for your answer."));
  const deny = el("button", "btn btn-danger", "Deny");
  const ok = el("button", "btn btn-ok", "Approve");
  deny.type = ok.type = "button";
  const answer = async (approved) => {
    deny.disabled = ok.disabled = true;
    const r = await api("POST", "/v1/approvals/" + encodeURIComponent(ev.request_id),
      approved ? { approved: true } : { approved: false, reason: "denied on the web page" });
    if (r.status !== 200 || !r.data.ok) { deny.disabled = ok.disabled = false; }
  };
  deny.onclick = () => answer(false);
  ok.onclick = () => answer(true);
  bar.appendChild(deny);
  bar.appendChild(ok);
  c.root.appendChild(bar);
  setBadge(c, "ask", "needs approval");
  state.approvals.set(ev.request_id, bar);
  updateStatus();
  scroll(true);
}

function resolveApproval(ev) {
  const bar = state.approvals.get(ev.request_id);
  if (!bar) return;
  state.approvals.delete(ev.request_id);
  bar.className = "approval done";
  bar.textContent = "";
  bar.appendChild(el("span", null, ev.approved ? "Approved" : "Denied" + (ev.reason ? ": " + ev.reason : "")));
  const c = state.cards.get(ev.turn_id + "/" + ev.call_id);
  if (c && !ev.approved) setBadge(c, "skip", "denied");
  else if (c) setBadge(c, "running", "approved");
  updateStatus();
}

// -- events ----------------------------------------------------------------------------------
function handle(ev) {
  if (ev.kind === "message_state") { messageState(ev); return; }
  const top = !ev.parent_turn_id;
  const t = turnBox(ev.turn_id, ev.parent_turn_id);
  switch (ev.kind) {
    case "turn_start":
      if (top) {
        state.running.add(ev.turn_id);
        showPending(null);
        const m = append(t.box, el("div", "msg user"));
        if (ev.resumed_from) m.appendChild(el("span", "tag", "resumed"));
        m.appendChild(document.createTextNode(ev.input));
      } else if (t.head) {
        t.head.textContent = "sub-agent " + ev.agent;
        t.head.appendChild(el("span", "badge running", "running"));
      }
      break;
    case "llm_delta": streamText(t, ev.text); break;
    case "tool_call_delta": writingDelta(ev, t); break;
    case "llm_response": writingDone(ev.turn_id); endStream(t, ev.text); break;
    case "tool_exec_start": card(ev.turn_id, ev.call_id, ev.tool_name, ev.arguments, t.box); break;
    case "tool_exec_progress": {
      const c = card(ev.turn_id, ev.call_id, ev.tool_name, {}, t.box);
      if (ev.data && typeof ev.data.diff === "string") { showDiff(c, ev.data.diff); if (!ev.text) break; }
      if (!c.progress) {
        const p = el("div", "progress");
        c.progress = el("pre");
        p.appendChild(c.progress);
        c.root.insertBefore(p, c.root.children[1] || null);
      }
      addProgress(c.progress, ev);
      break;
    }
    case "tool_exec_end": showResult(card(ev.turn_id, ev.call_id, ev.tool_name, {}, t.box), ev.content, ev.is_error); break;
    case "tool_exec_skipped": {
      const c = card(ev.turn_id, ev.call_id, ev.tool_name, {}, t.box);
      setBadge(c, "skip", "skipped: " + ev.reason);
      if (ev.detail) c.root.appendChild(el("pre", null, ev.detail));
      break;
    }
    case "approval_requested": askApproval(ev, card(ev.turn_id, ev.call_id, ev.tool_name, ev.arguments, t.box)); break;
    case "approval_resolved": resolveApproval(ev); waitingSoon(); break;
    case "question_asked": questionAsked(ev, t); break;
    case "question_answered": questionAnswered(ev); break;
    case "steering_injected": {
      endStream(t, null);
      const pending = log().querySelector(".note.pending");
      if (pending) pending.remove();
      const m = el("div", "msg user steer");
      m.appendChild(el("span", "tag", "steering"));
      m.appendChild(document.createTextNode(ev.text));
      append(t.box, m);
      break;
    }
    case "plan_updated": showPlan(t, ev.items); break;
    case "follow_up_queued": note("queued as a follow-up: " + ev.text, "", t.box); break;

    case "interrupt_received": note(ev.mode === "hard" ? "stopping now…" : "interrupting: the agent will sum up", "", t.box); break;
    case "error": note(ev.message, "err", t.box); break;
    case "llm_retry": writingDone(ev.turn_id); note("retrying the model call: " + ev.reason, "", t.box); break;
    case "subturn_spawn": turnBox(ev.child_turn_id, ev.turn_id); break;
    case "subturn_end": {
      const child = state.turns.get(ev.child_turn_id);
      if (child && child.head) {
        const b = child.head.querySelector(".badge") || child.head.appendChild(el("span", "badge"));
        b.className = "badge " + (ev.status === "completed" ? "ok" : "skip");
        b.textContent = ev.status;
      }
      break;
    }
    case "turn_end": {
      endStream(t, null);
      if (top) {
        state.running.delete(ev.turn_id);
        const bits = [ev.status, ev.iterations + (ev.iterations === 1 ? " call" : " calls"), ev.duration.toFixed(1) + " s"];
        append(t.box, el("div", "turn-end" + (ev.status === "completed" ? "" : " bad"), bits.join(" · ")));
        if (ev.error) note(ev.error, "err", t.box);
        if (ev.status === "cancelled" || ev.status === "waiting") refreshPending();
        if (ev.status === "waiting") waitingSoon();
        loadSessions();
        refreshChanges();
      }
      break;
    }
    default: break;
  }
  usageEvent(ev, t.box);
  updateStatus();
}

function updateStatus() {
  const busy = state.running.size > 0;
  const pill = $("status");
  if (state.approvals.size) { pill.className = "pill pill-waiting"; pill.textContent = "waiting for you"; }
  else if (busy) { pill.className = "pill pill-working"; pill.textContent = "working"; }
  else { pill.className = "pill pill-idle"; pill.textContent = "idle"; }
  $("interrupt").disabled = !busy;
  $("stop").disabled = !busy;
  $("stop-undo").disabled = !busy;
  $("followup-wrap").hidden = !busy;
  $("input").placeholder = busy ? "Steer the agent while it works…" : "Message the agent…";
  $("send").textContent = busy ? ($("as-followup").checked ? "Queue" : "Steer") : "Send";
}

// -- the event stream ---------------------------------------------------------------------------
async function follow(sid) {
  if (state.follow) state.follow.abort();
  const ctrl = new AbortController();
  state.follow = ctrl;
  while (!ctrl.signal.aborted) {
    try {
      const res = await fetch("/v1/sessions/" + encodeURIComponent(sid) + "/events", {
        headers: authHeaders({ "Last-Event-ID": String(state.cursor), Accept: "text/event-stream" }),
        signal: ctrl.signal, cache: "no-store",
      });
      if (!res.ok) throw new Error("HTTP " + res.status);
      setConn(true);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let m;
        while ((m = /\r?\n\r?\n/.exec(buf))) {
          const block = buf.slice(0, m.index);
          buf = buf.slice(m.index + m[0].length);
          frame(block);
        }
      }
    } catch (e) {
      if (ctrl.signal.aborted) return;
    }
    setConn(false);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function frame(block) {
  let id = null;
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith("id:")) id = line.slice(3).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return;
  const ev = JSON.parse(data.join("\n"));
  if (id !== null) state.cursor = Number(id);
  handle(ev);
}

function setConn(ok) {
  const c = $("conn");
  c.className = "sidebar-foot " + (ok ? "ok" : "bad");
  c.textContent = ok ? "connected" : "reconnecting…";
}

// -- sessions ------------------------------------------------------------------------------------
function newId() {
  const d = new Date();
  const p = (n) => String(n).padStart(2, "0");
  const rnd = Math.random().toString(16).slice(2, 8);
  return `web-${d.getFullYear()}${p(d.getMonth() + 1)}${p(d.getDate())}-${p(d.getHours())}${p(d.getMinutes())}${p(d.getSeconds())}-${rnd}`;
}

async function loadSessions() {
  const r = await api("GET", "/v1/sessions");
  if (r.status !== 200) { setConn(false); return; }
  const ul = $("sessions");
  ul.textContent = "";
  const rows = r.data.sessions.slice();
  if (state.sid && !rows.some((s) => s.id === state.sid)) rows.unshift({ id: state.sid, title: "", messages: 0, busy: false });
  for (const s of rows) {
    const li = el("li", s.id === state.sid ? "active" : "");
    li.dataset.session = s.id;
    li.appendChild(el("span", "dot" + (s.busy ? " busy" : "")));
    li.appendChild(el("span", "s-name", s.title || s.id));
    if (s.messages) li.appendChild(el("span", "s-meta", String(s.messages)));
    li.onclick = () => openSession(s.id);
    ul.appendChild(li);
  }
}

function reset() {
  state.turns.clear(); state.cards.clear(); state.approvals.clear(); state.running.clear();
  const l = log();
  for (const n of Array.from(l.children)) if (n.id !== "empty") n.remove();
  $("empty").hidden = false;
}

function renderHistory(messages) {
  let box = null;
  let turn = 0;
  messages.forEach((m, index) => {
    if (m.role === "user") {
      box = el("div", "turn");
      box.dataset.start = String(index);  // where undo finds the turn (its first message)
      turn += 1;
      append(log(), box);
      partChips(append(box, el("div", "msg user", m.content)), m.parts);
    } else if (m.role === "assistant") {
      box = box || append(log(), el("div", "turn"));
      if (m.content) append(box, assistantText(m.content));
      for (const call of m.tool_calls || []) {
        const c = card("history-" + turn, call.id, call.name, call.arguments, box);
        setBadge(c, "skip", "no result");
      }
    } else if (m.role === "tool") {
      const c = state.cards.get("history-" + turn + "/" + m.tool_call_id);
      if (c) showResult(c, m.content, !!m.is_error);
    }
  });
}

async function openSession(sid, fresh) {
  state.sid = sid;
  history.replaceState(null, "", "#session=" + encodeURIComponent(sid));
  reset();
  $("session-id").textContent = sid;
  $("session-title").textContent = "Session";
  const r = fresh ? { status: 404 } : await api("GET", "/v1/sessions/" + encodeURIComponent(sid));
  if (r.status === 200) {
    renderHistory(r.data.messages);
    markTurns(r.data.turns || [], r.data.messages.length);
    const first = r.data.messages.find((m) => m.role === "user");
    if (first) $("session-title").textContent = first.content.split("\n")[0].slice(0, 80);
    state.cursor = r.data.events_after || 0;
    showPending(r.data.pending_turn);
  } else {
    showPending(null);
    $("session-title").textContent = "New session";
    state.cursor = 0;
  }
  state.editing = null;
  updateStatus();
  loadSessions();
  refreshQueue();
  scroll(true);
  follow(sid);
  refreshChanges();
}

// -- composing -----------------------------------------------------------------------------------
async function submit(ev) {
  if (ev) ev.preventDefault();
  const input = $("input");
  const text = input.value.trim();
  const parts = attachedParts();
  if (!text && !parts) return;
  if (!state.sid) await openSession(newId(), true);
  if ($("session-title").textContent === "New session") $("session-title").textContent = text.split("\n")[0].slice(0, 80);
  const busy = state.running.size > 0;
  const body = parts ? (text ? { text, parts } : { parts }) : { text };
  if (busy) body.policy = $("as-followup").checked ? "follow_up" : "steer";
  input.value = "";
  grow();
  const r = await api("POST", "/v1/sessions/" + encodeURIComponent(state.sid) + "/messages", body);
  if (r.status !== 202) {
    note((r.data && r.data.error) || "could not send (HTTP " + r.status + ")", "err");
    input.value = text;
    return;
  }
  if (parts) clearAttached();
  refreshQueue();
  if (r.data.action === "steered") note("↳ steering sent: it reaches the agent at its next step", "pending");
  else if (r.data.action === "queued" && body.policy !== "follow_up") note("queued as the next turn: " + text);
  loadSessions();
}

async function control(path, mode, extra) {
  if (!state.sid) return;
  await api("POST", "/v1/sessions/" + encodeURIComponent(state.sid) + "/" + path,
    Object.assign({ mode }, extra || {}));
}

function grow() {
  const t = $("input");
  t.style.height = "auto";
  t.style.height = Math.min(t.scrollHeight, 200) + "px";
}

document.addEventListener("DOMContentLoaded", () => {
  $("form").addEventListener("submit", submit);
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) submit(e);
  });
  $("input").addEventListener("input", grow);
  $("as-followup").addEventListener("change", updateStatus);
  $("interrupt").onclick = () => control("interrupt", "graceful");
  $("stop").onclick = () => control("interrupt", "hard");
  $("stop-undo").onclick = () => control("interrupt", "hard", { restore_files: true });
  $("new-session").onclick = () => openSession(newId(), true);
  $("pending-resume").onclick = () => pendingAction("POST", "resume");
  $("pending-discard").onclick = () => pendingAction("DELETE", "pending_turn");
  const m = location.hash.match(/session=([^&]+)/);
  loadSessions().then(() => {
    if (m) openSession(decodeURIComponent(m[1]));
  });
  setInterval(loadSessions, 10000);
  $("input").focus();
});
