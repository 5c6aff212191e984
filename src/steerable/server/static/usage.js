// Usage on steerable's page: tokens in (the cached part too), tokens out and the cost when the
// model's price is known. While a turn runs, a figure beside the status pill adds up every
// model call of the turn, its sub-agents' included (LLM_RESPONSE usage); when it ends, the
// turn's own total (TURN_END usage, which counts its sub-turns) is added to its end line.
"use strict";

const usageState = { live: null };

function usageSum(a, b) {
  if (!a) return Object.assign({}, b);
  const cost = a.cost_usd === undefined ? b.cost_usd
    : b.cost_usd === undefined ? a.cost_usd : a.cost_usd + b.cost_usd;
  const out = {
    input_tokens: a.input_tokens + b.input_tokens,
    output_tokens: a.output_tokens + b.output_tokens,
    cached_tokens: (a.cached_tokens || 0) + (b.cached_tokens || 0),
  };
  if (cost !== undefined) out.cost_usd = cost;
  return out;
}

function usageText(u) {
  if (!u || !(u.input_tokens || u.output_tokens)) return "";
  const n = (x) => x.toLocaleString("en-US");
  let text = n(u.input_tokens) + " in";
  if (u.cached_tokens) text += " (" + n(u.cached_tokens) + " cached)";
  text += " · " + n(u.output_tokens) + " out";
  if (u.cost_usd !== undefined && u.cost_usd !== null) {
    text += " · $" + (u.cost_usd < 1 ? u.cost_usd.toFixed(4) : u.cost_usd.toFixed(2));
  }
  return text;
}

function usageBadge() {
  let badge = $("usage");
  if (!badge) {
    badge = el("span", "usage");
    badge.id = "usage";
    badge.title = "Tokens and cost of the current turn (cost shown when the model's price is known)";
    $("status").after(badge);
  }
  return badge;
}

// Called by handle() after app.js has drawn the event.
function usageEvent(ev, box) {
  if (ev.kind === "turn_start" && !ev.parent_turn_id) {
    usageState.live = null;
    usageBadge().textContent = "";
  } else if (ev.kind === "llm_response" && ev.usage) {
    usageState.live = usageSum(usageState.live, ev.usage);
    usageBadge().textContent = usageText(usageState.live);
  } else if (ev.kind === "turn_end" && !ev.parent_turn_id) {
    const text = usageText(ev.usage);
    usageBadge().textContent = text;
    const ends = box.querySelectorAll(":scope > .turn-end");
    const line = ends[ends.length - 1];
    if (line && text) line.appendChild(el("span", "turn-usage", text));
  }
}
