"""A turn's usage, its cost, and the budgets of ``Limits`` (tokens, dollars, tool calls).

Every model call's usage is added to its turn and to each ancestor turn: a sub-turn spends
its parent's budget, and ``result.usage`` of a turn holds what its sub-turns used. Tokens stay
in the transcript's ``usage_in/usage_out`` (checkpoints keep them); cache counts, cost, tool
calls and the limit reached live in the turn's ``Ledger``.

A budget is checked at the turn's checkpoints, never in the middle of a phase: before every
LLM call and before every tool group. At a limit the turn ends the way a graceful interrupt
does (tools not started are skipped with reason ``budget``, one last call that may call no
tool summarises), and its status is ``budget_exceeded``. A final answer that arrives while
crossing a limit stands: the limit stops further work, it does not throw away a finished answer.
``max_tool_calls`` is checked per group as it starts: the calls within the budget run (a
parallel group's admitted calls all run), the ones past it are refused with a tool result the
model reads, and the turn then stops at its next checkpoint.
"""

from __future__ import annotations

from steerable._config import Limits
from steerable._core._checkpoint import Checkpoint
from steerable._core._engine import Engine
from steerable._core._turn_state import Interrupt, TurnState
from steerable._events import InterruptReceived
from steerable._messages import Usage
from steerable._pricing import call_cost

__all__ = ["BUDGET_HINT", "admit_tool_calls", "check_budget", "record_usage", "restore_spent",
           "turn_usage"]

BUDGET_HINT = (
    "This turn has used up its budget ({reason}). Stop here: do not call tools. In a few "
    "sentences, say what you did, what you found, and what is left undone."
)


def _chain(st: TurnState | None) -> list[TurnState]:
    out = []
    while st is not None:
        out.append(st)
        st = st.parent
    return out


def _note_unpriced(engine: Engine, st: TurnState, model: str | None) -> None:
    """Once per model and turn, while a cost budget is set: that model's calls cost nothing
    the budget can see."""
    ledger = st.ledger
    if engine.limits.max_turn_cost_usd is None or (model or "") in ledger.unpriced:
        return
    ledger.unpriced |= {model or ""}
    engine.error(st, f"no price is known for model {model or '(unnamed)'!r}: "
                 "Limits.max_turn_cost_usd does not count its calls "
                 "(install steerable[prices], or set a token budget)", "turn")


async def record_usage(engine: Engine, st: TurnState, usage: Usage, model: str | None,
                       api_url: str | None) -> Usage:
    """Add one call's ``usage`` to ``st`` and its ancestors; the usage with its cost filled in
    when the provider did not give one and the price of ``model`` is known."""
    if usage.cost_usd is None:
        cost = await call_cost(usage, model, api_url)
        if cost is not None:
            usage = Usage(usage.input_tokens, usage.output_tokens, usage.cached_tokens,
                          usage.cache_write_tokens, cost)
        else:
            _note_unpriced(engine, st, model)
    extra = bool(usage.cached_tokens or usage.cache_write_tokens or usage.cost_usd is not None)
    for turn in _chain(st):
        tr = turn.transcript
        tr.usage_in += usage.input_tokens
        tr.usage_out += usage.output_tokens
        if extra:
            ledger = turn.ledger
            ledger.cached += usage.cached_tokens
            ledger.cache_write += usage.cache_write_tokens
            if usage.cost_usd is not None:
                ledger.cost = (ledger.cost or 0.0) + usage.cost_usd
    return usage


def restore_spent(st: TurnState, cp: Checkpoint) -> None:
    """A resumed turn goes on from what its checkpoint says it spent: a turn that crashes and
    resumes in a loop still stops at its budgets (tokens are restored with the transcript)."""
    ledger = st.ledger
    ledger.cached, ledger.cache_write = cp.cached_tokens, cp.cache_write_tokens
    ledger.cost, ledger.tool_calls = cp.cost_usd, cp.tool_calls


def turn_usage(st: TurnState) -> Usage | None:
    """What the turn used, its sub-turns included (None: no provider reported anything)."""
    tr, ledger = st.transcript, st.ledger
    if not (tr.usage_in or tr.usage_out or ledger.cost is not None):
        return None
    return Usage(tr.usage_in, tr.usage_out, ledger.cached, ledger.cache_write, ledger.cost)


def _reached(limits: Limits, st: TurnState) -> str | None:
    for turn in _chain(st):
        of = "" if turn is st else " (counting a parent turn's use)"
        tr, ledger = turn.transcript, turn.ledger
        if ledger.refused is not None:
            return ledger.refused
        tokens = limits.max_turn_tokens
        if tokens is not None and tr.usage_in + tr.usage_out >= tokens:
            return (f"max_turn_tokens={tokens:,}: {tr.usage_in + tr.usage_out:,} tokens "
                    f"used{of}")
        dollars = limits.max_turn_cost_usd
        if dollars is not None and ledger.cost is not None and ledger.cost >= dollars:
            return f"max_turn_cost_usd={dollars:g}: ${ledger.cost:.4f} spent{of}"
    return None


def check_budget(engine: Engine, st: TurnState) -> None:
    """At a checkpoint: when a budget is reached, end the turn as a graceful interrupt does
    (the caller's next look at the turn's interrupt sees it)."""
    ctl = st.control
    if ctl.interrupt is not Interrupt.NONE or ctl.finishing or ctl.final_call:
        return  # already stopping: a user's interrupt keeps its own status
    reason = _reached(engine.limits, st)
    if reason is None:
        return
    st.exceeded = reason
    ctl.interrupt = Interrupt.GRACEFUL
    ctl.hint = BUDGET_HINT.format(reason=reason)
    engine.emit(st, InterruptReceived, mode="budget", hint=reason)


def admit_tool_calls(engine: Engine, st: TurnState, wanted: int) -> int:
    """How many of ``wanted`` calls about to start fit ``Limits.max_tool_calls`` (this turn's
    and every ancestor's count); those are counted. Fewer than wanted marks the turn to stop
    at its next checkpoint."""
    limit = engine.limits.max_tool_calls
    if limit is None or wanted == 0:
        return wanted
    chain = _chain(st)
    room = min(limit - turn.ledger.tool_calls for turn in chain)
    allowed = max(0, min(wanted, room))
    for turn in chain:
        turn.ledger.tool_calls += allowed
    if allowed < wanted:
        st.refused = f"max_tool_calls={limit}: {wanted - allowed} call(s) refused"
    return allowed
