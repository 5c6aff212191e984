"""Running one hook point's chain inside a turn, shared by the model-call and tool phases.

``decisions`` calls each hook of a point in priority order and yields only the decisions that
ask for something; failures are already reported and skipped, and ABORT_TURN / HARD_ABORT end
the turn right here (as an ``AbortSignal``), so callers deal only with their point's own actions.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

from steerable._core._engine import Engine
from steerable._core._hook_manager import HookFailure, Registration
from steerable._core._turn_state import AbortSignal, TurnState
from steerable._hooks import APPLICABLE_FIELDS, HookAction, HookDecision

__all__ = ["decisions", "ignored", "raise_if_terminal"]


def raise_if_terminal(engine: Engine, st: TurnState, decision: HookDecision, point: str) -> None:
    if decision.action is HookAction.HARD_ABORT:
        because = f": {decision.reason}" if decision.reason else ""
        engine.hard_abort_inside(st, f"hook {point} asked for a hard abort{because}")
        raise AbortSignal(True)
    if decision.action is HookAction.ABORT_TURN:
        raise AbortSignal(False, decision.reason or f"aborted by a {point} hook")


async def decisions(
    engine: Engine, st: TurnState, point: str, make_ctx: Callable[[], Any], *,
    approving: bool = False, after_each: Callable[[], None] | None = None,
) -> AsyncGenerator[tuple[Registration, Any, HookDecision], None]:
    """Yield ``(registration, context, decision)`` for each hook that wants something.

    ``make_ctx`` builds a fresh context per hook, so each hook sees earlier hooks' changes.
    A failed hook (timeout, exception, a value that is no decision) is reported and skipped;
    with ``approving`` (the approve_tool point) it is a denial instead, under the approval
    timeout. ``after_each`` runs after every hook call, whatever it returned.
    """
    hooks = engine.hooks
    timeout = engine.timeouts.approval if approving else engine.timeouts.hook
    for reg in hooks.at(point):
        ctx = make_ctx()
        value = await hooks.call(reg, point, ctx, timeout)
        if after_each is not None:
            after_each()
        if isinstance(value, HookFailure):
            if approving:
                yield reg, ctx, HookDecision(HookAction.DENY_TOOL, reason=value.message)
            continue
        if approving and not (value is None or isinstance(value, bool | HookDecision)):
            engine.error(st, f"approver {reg.label} returned {type(value).__name__}; treated "
                         "as a denial", "hook")
            yield reg, ctx, HookDecision(HookAction.DENY_TOOL,
                                         reason=f"approver {reg.label} returned an invalid answer")
            continue
        decision = hooks.coerce(reg, point, value, ctx)
        if decision is None or decision.action is HookAction.CONTINUE:
            continue
        _report_inapplicable(engine, st, reg, point, decision)
        raise_if_terminal(engine, st, decision, point)
        yield reg, ctx, decision


def _report_inapplicable(engine: Engine, st: TurnState, reg: Registration, point: str,
                         decision: HookDecision) -> None:
    """A decision carrying fields its point and action do not read is a bug in the hook: say
    so (ERROR event) instead of silently doing nothing with them."""
    applicable = APPLICABLE_FIELDS.get((point, decision.action), frozenset())
    extra = [f for f in decision.fields_set() if f not in applicable]
    if extra:
        engine.error(st, f"hook {reg.label}.{point} {decision.action}: "
                     f"{', '.join(extra)} {'does' if len(extra) == 1 else 'do'} not apply here "
                     f"(ignored)", "hook")


def ignored(engine: Engine, st: TurnState, reg: Registration, point: str,
            decision: HookDecision) -> None:
    engine.error(st, f"hook {reg.label}.{point} cannot {decision.action} here; ignored", "hook")
