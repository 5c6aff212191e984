// Messages on steerable's page (SPEC 10): the messages that wait, with their kind and state,
// each editable and withdrawable until it reaches the agent (GET .../queue, PATCH and DELETE
// /v1/messages/{id}); a message's fates other than delivery said in the log; and a pending
// turn (cancelled, or cut off when its process stopped) resumed or discarded from a bar.
"use strict";

// A message changed state (SPEC 10): the queue panel follows; fates other than delivery are said.
function messageState(ev) {
  const turn = ev.turn_id ? state.turns.get(ev.turn_id) : null;
  const where = turn ? turn.box : log();
  if (ev.state === "revoked") note("withdrawn: " + ev.text, "", where);
  else if (ev.state === "returned") note("not delivered, handed back: " + ev.text, "", where);
  else if (ev.state === "rejected") note("not taken: " + ev.text + (ev.detail ? " (" + ev.detail + ")" : ""), "err", where);
  queueSoon();
}

// -- queued messages: what waits, with its state; withdraw or edit while it is queued --------
const KIND_LABEL = { steer: "steer", follow_up: "follow-up", send: "message" };

async function refreshQueue() {
  if (!state.sid) { showQueue([]); return; }
  const sid = state.sid;
  const r = await api("GET", "/v1/sessions/" + encodeURIComponent(sid) + "/queue");
  if (sid !== state.sid) return;
  showQueue(r.status === 200 ? r.data.messages : []);
}

function queueSoon() {
  if (state.queueTimer) return;
  state.queueTimer = setTimeout(() => { state.queueTimer = null; refreshQueue(); }, 50);
}

function showQueue(messages) {
  const box = $("queue");
  const list = $("queue-list");
  const editing = state.editing;
  list.textContent = "";
  box.hidden = messages.length === 0;
  $("queue-count").textContent = messages.length === 1 ? "1 message waits" : messages.length + " messages wait";
  for (const m of messages) {
    const li = el("li", "queued");
    li.dataset.message = m.message_id;
    li.appendChild(el("span", "tag", KIND_LABEL[m.kind] || m.kind));
    if (editing && editing.id === m.message_id) {
      const input = el("textarea", "queue-edit");
      input.value = editing.text;
      input.rows = 1;
      input.oninput = () => { editing.text = input.value; };
      li.appendChild(input);
      const save = el("button", "btn btn-primary", "Save");
      const cancel = el("button", "btn", "Cancel");
      save.type = cancel.type = "button";
      save.onclick = () => editQueued(m.message_id, input.value);
      cancel.onclick = () => { state.editing = null; refreshQueue(); };
      li.appendChild(save);
      li.appendChild(cancel);
    } else {
      li.appendChild(el("span", "q-text", m.text));
      li.appendChild(el("span", "badge ask", m.state));
      const edit = el("button", "btn", "Edit");
      const drop = el("button", "btn btn-danger", "Withdraw");
      edit.type = drop.type = "button";
      edit.onclick = () => { state.editing = { id: m.message_id, text: m.text }; showQueue(messages); };
      drop.onclick = () => revokeQueued(m.message_id, drop);
      li.appendChild(edit);
      li.appendChild(drop);
    }
    list.appendChild(li);
  }
}

async function revokeQueued(id, button) {
  button.disabled = true;
  const r = await api("DELETE", "/v1/messages/" + encodeURIComponent(id));
  if (r.status !== 200 || !r.data.ok) note((r.data && r.data.error) || "too late: the message is no longer queued", "err");
  refreshQueue();
}

async function editQueued(id, text) {
  if (!text.trim()) return;
  const r = await api("PATCH", "/v1/messages/" + encodeURIComponent(id), { text });
  state.editing = null;
  if (r.status !== 200 || !r.data.ok) note((r.data && r.data.error) || "too late: the message is no longer queued", "err");
  refreshQueue();
}

// -- a pending turn (cancelled, or cut off when its process stopped): resume or discard ----------
function showPending(p) {
  const bar = $("pending");
  bar.hidden = !p;
  if (!p) return;
  if (p.error) {
    $("pending-text").textContent = "This session's unfinished turn cannot be read (" + p.error + "). Discard it to go on.";
  } else if (p.reason === "waiting") {
    const n = p.waiting.length;
    $("pending-text").textContent = "This turn waits for your answer to " + (n === 1 ? "1 request" : n + " requests") + " (Waiting for you, on the left); it goes on once answered. Or discard it to send something new.";
  } else {
    const why = p.reason === "cancelled" ? "was cancelled (" + p.cancel_mode + ")" : "was cut off (its process stopped)";
    const calls = p.iteration + (p.iteration === 1 ? " model call" : " model calls");
    $("pending-text").textContent = "A turn " + why + " after " + calls + ": “" + p.input.split("\n")[0].slice(0, 80) + "”. Resume it, or discard it to send something new.";
  }
  $("pending-resume").disabled = !!p.error;
  $("pending-resume").hidden = p.reason === "waiting";
  $("pending-discard").disabled = false;
}

async function refreshPending() {
  if (!state.sid) return;
  const r = await api("GET", "/v1/sessions/" + encodeURIComponent(state.sid));
  if (r.status === 200 && !r.data.busy) showPending(r.data.pending_turn);
}

async function pendingAction(method, path) {
  $("pending-resume").disabled = $("pending-discard").disabled = true;
  const r = await api(method, "/v1/sessions/" + encodeURIComponent(state.sid) + "/" + path);
  if (r.status === 200 || r.status === 202) {
    showPending(null);
    if (method === "DELETE") note("the unfinished turn was discarded");
  } else {
    note((r.data && r.data.error) || "HTTP " + r.status, "err");
    refreshPending();
  }
}
