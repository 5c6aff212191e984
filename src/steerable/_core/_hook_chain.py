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
from steerable._hooks import HookAction, HookDecision

__all__ = ["decisions", "ignored", "raise_if_terminal"]


def raise_if_terminal(engine: Engine, st: TurnState, decision: HookDecision, point: str) -> None:
    if decision.action is HookAction.HARD_ABORT:
        engine.hard_abort_inside(st, f"hook {point} asked for a hard abort")
        raise AbortSignal(True, decision.reason)
    if decision.action is HookAction.ABORT_TURN:
        raise AbortSignal(False, decision.reason or f"aborted by a {point} hook")


async def decisions(
    engine: Engine, st: TurnState, point: str, make_ctx: Callable[[], Any]
) -> AsyncGenerator[tuple[Registration, Any, HookDecision], None]:
    """Yield ``(registration, context, decision)`` for each hook that wants something.

    ``make_ctx`` builds a fresh context per hook, so each hook sees earlier hooks' changes.
    """
    hooks = engine.hooks
    for reg in hooks.at(point):
        ctx = make_ctx()
        value = await hooks.call(reg, point, ctx, engine.timeouts.hook)
        if isinstance(value, HookFailure):
            continue
        decision = hooks.coerce(reg, point, value, ctx)
        if decision is None or decision.action is HookAction.CONTINUE:
            continue
        raise_if_terminal(engine, st, decision, point)
        yield reg, ctx, decision


def ignored(engine: Engine, st: TurnState, reg: Registration, point: str,
            decision: HookDecision) -> None:
    engine.error(st, f"hook {reg.label}.{point} cannot {decision.action} here; ignored", "hook")
