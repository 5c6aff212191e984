// Requests that wait for a person (SPEC 11) on steerable's page: every approval and question
// waiting in any session, listed in the sidebar (GET /v1/requests) and answered there
// (POST /v1/requests/{id}); a tool's question (ctx.ask, the agent's ask_user) shown on its
// card in the conversation, with the same controls. A parked turn resumes once its last
// request has an answer; a refused answer (not one of the choices, not fitting the schema,
// answered elsewhere already) is said next to the controls, and the request stays listed.
"use strict";

async function refreshWaiting() {
  const r = await api("GET", "/v1/requests");
  if (r.status === 200) showWaiting(r.data.requests);
}

function waitingSoon() {
  if (state.waitingTimer) return;
  state.waitingTimer = setTimeout(() => { state.waitingTimer = null; refreshWaiting(); }, 100);
}

function showWaiting(requests) {
  const list = $("waiting-list");
  list.textContent = "";
  $("waiting").hidden = requests.length === 0;
  $("waiting-count").textContent = requests.length === 1 ? "1 waits for you" : requests.length + " wait for you";
  for (const q of requests) {
    const li = el("li", "waiting-item");
    li.dataset.request = q.request_id;
    const head = el("div", "w-head");
    head.appendChild(el("span", "tag", q.kind));
    const link = el("a", "w-session", q.session_id);
    link.href = "#session=" + encodeURIComponent(q.session_id);
    link.onclick = (e) => { e.preventDefault(); openSession(q.session_id); };
    head.appendChild(link);
    li.appendChild(head);
    const what = q.kind === "approval" ? q.tool_name + " " + summarize(q.tool_name, q.arguments) : q.question;
    li.appendChild(el("div", "w-text", what));
    li.appendChild(answerControls(q));
    list.appendChild(li);
  }
}

// Buttons (approve / deny, or one per choice) or a text box; the refusal, if any, under them.
function answerControls(q) {
  const box = el("div", "w-answer");
  const error = el("div", "w-error");
  const buttons = [];
  const send = async (body) => {
    for (const b of buttons) b.disabled = true;
    error.textContent = "";
    const r = await api("POST", "/v1/requests/" + encodeURIComponent(q.request_id), body);
    if (r.status === 200) {
      box.textContent = "";
      box.appendChild(el("span", "w-done", "answered"));
      waitingSoon();
      return;
    }
    error.textContent = (r.data && r.data.error) || "HTTP " + r.status;
    for (const b of buttons) b.disabled = false;
  };
  const button = (label, cls, body) => {
    const b = el("button", "btn " + cls, label);
    b.type = "button";
    b.onclick = () => send(body);
    buttons.push(b);
    box.appendChild(b);
  };
  if (q.kind === "approval") {
    button("Deny", "btn-danger", { approved: false, reason: "denied on the web page" });
    button("Approve", "btn-ok", { approved: true });
  } else if (q.choices) {
    for (const choice of q.choices) button(choice, "", { value: choice });
  } else {
    const input = el("input", "w-input");
    input.placeholder = "Your answer";
    box.appendChild(input);
    const wantsJSON = q.schema && q.schema.type && q.schema.type !== "string";
    const b = el("button", "btn btn-primary", "Answer");
    b.type = "button";
    b.onclick = () => {
      let value = input.value;
      if (wantsJSON) { try { value = JSON.parse(value); } catch (e) { /* the schema check says why */ } }
      send({ value });
    };
    input.addEventListener("keydown", (e) => { if (e.key === "Enter") b.click(); });
    buttons.push(b, input);
    box.appendChild(b);
  }
  box.appendChild(error);
  return box;
}

// A tool asked a question in the open session: on its card, until it is answered.
function questionAsked(ev, t) {
  const c = card(ev.turn_id, ev.call_id, ev.tool_name, {}, t.box);
  const bar = el("div", "approval question");
  bar.dataset.request = ev.request_id;
  bar.appendChild(el("span", null, ev.question));
  bar.appendChild(answerControls({ request_id: ev.request_id, kind: "question", choices: ev.choices, schema: ev.schema }));
  c.root.appendChild(bar);
  setBadge(c, "ask", "asks you");
  state.approvals.set(ev.request_id, bar);
  scroll(true);
  waitingSoon();
}

function questionAnswered(ev) {
  const bar = state.approvals.get(ev.request_id);
  waitingSoon();
  if (!bar) return;
  state.approvals.delete(ev.request_id);
  bar.className = "approval done";
  bar.textContent = "";
  const said = ev.outcome === "answered" ? "Answered: " + (typeof ev.value === "string" ? ev.value : JSON.stringify(ev.value)) : "No answer (" + ev.outcome + ")";
  bar.appendChild(el("span", null, said));
  const c = state.cards.get(ev.turn_id + "/" + ev.call_id);
  if (c) setBadge(c, "running", "answered");
}

document.addEventListener("DOMContentLoaded", () => {
  refreshWaiting();
  setInterval(refreshWaiting, 5000);  // other processes park turns too
});
