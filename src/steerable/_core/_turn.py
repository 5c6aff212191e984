"""One turn, phase by phase: checkpoint, call the model, run tools, repeat, then finish.

``run_turn`` is the edge that owns the turn: it is the one place that turns a cancellation
(hard abort) or a hook's abort into an ``aborted`` result, and an exception into ``error``.
Whatever path is taken, TURN_START comes first and TURN_END last, exactly once, and the session
is saved (or rolled back) before the result is returned.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from steerable._core._composite import CompositeAgent, run_composite
from steerable._core._engine import Engine
from steerable._core._model_call import call_model
from steerable._core._subturn import close_results, deliver_results, wait_children
from steerable._core._tool_exec import execute_tools, skip_calls
from steerable._core._turn_state import AbortSignal, Interrupt, QueuedMessage, TurnState
from steerable._events import (
    FollowUpQueued,
    InterruptReceived,
    SteeringInjected,
    TurnEnd,
    TurnPhase,
    TurnStart,
    TurnStatus,
)
from steerable._messages import Message, Usage

__all__ = ["DEFAULT_INTERRUPT_HINT", "TurnResult", "begin_turn", "run_turn"]

DEFAULT_INTERRUPT_HINT = (
    "The user interrupted you. Stop here: do not call tools. In a few sentences, say what you "
    "did, what you found, and what is left undone."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnResult:
    """How a turn ended. ``messages`` are the turn's own messages (what was, or would have
    been, appended to the session); ``tools_run`` names the tools that actually started, so
    side effects of an aborted turn are known."""

    turn_id: str
    session_id: str
    status: TurnStatus
    text: str
    iterations: int
    follow_ups: tuple[str, ...] = ()
    unprocessed: tuple[QueuedMessage, ...] = ()
    error: BaseException | None = None
    messages: tuple[Message, ...] = ()
    tools_run: tuple[str, ...] = ()
    usage: Usage | None = None
    duration: float = 0.0
    parent_turn_id: str | None = None


def _drain_steering(engine: Engine, st: TurnState) -> None:
    while st.steering:
        text = st.steering.popleft()
        st.new.append(Message("user", text))
        st.injected_steering.append(text)
        engine.emit(st, SteeringInjected, text=text)


async def _iterate(engine: Engine, st: TurnState) -> TurnStatus:
    max_iter = st.agent.max_iterations
    while True:
        st.iteration += 1
        graceful = st.interrupt is Interrupt.GRACEFUL
        last = graceful or st.iteration >= max_iter
        if not graceful:
            _drain_steering(engine, st)  # checkpoint: before every LLM call
        if st.results:
            deliver_results(engine, st)  # async children that ended since the last call
        extra = (Message("user", st.hint or DEFAULT_INTERRUPT_HINT),) if graceful else ()
        st.final_call = last
        response = await call_model(engine, st, offer_tools=not last, extra=extra)
        st.final_call = False
        st.new.append(Message("assistant", response.text, tool_calls=response.tool_calls))
        if graceful:
            skip_calls(engine, st, response.tool_calls, "interrupted")
            return TurnStatus.INTERRUPTED
        if last:
            skip_calls(engine, st, response.tool_calls, "max_iterations")
            return TurnStatus.MAX_ITERATIONS if st.last_had_tools else TurnStatus.COMPLETED
        st.last_had_tools = bool(response.tool_calls)
        if response.tool_calls:
            await execute_tools(engine, st, response.tool_calls)
        elif not st.steering and st.interrupt is Interrupt.NONE:
            return TurnStatus.COMPLETED
        # steering pending after a final answer, or an interrupt: iterate again


def _final_text(st: TurnState) -> str:
    for msg in reversed(st.new):
        if msg.role == "assistant":
            return msg.content
    return ""


def begin_turn(engine: Engine, st: TurnState) -> None:
    """Emit TURN_START. Called synchronously by whoever starts the turn, so that anything said
    to the turn before its task first runs (steering, an interrupt) comes after it."""
    engine.emit(st, TurnStart, input=st.input, agent=st.agent.name)


async def run_turn(engine: Engine, st: TurnState) -> TurnResult:
    """Run ``st`` (already begun) to its end. Never raises."""
    st.running = True
    status = TurnStatus.ERROR
    error: BaseException | None = None
    rollback = False
    took_slot = False
    try:
        if st.interrupt is Interrupt.HARD:  # aborted before its task first ran
            raise asyncio.CancelledError
        if not st.holds_slot and engine.slots.limit is not None:
            await engine.slots.take()  # Limits.active_turns: wait for a free slot
            st.holds_slot = took_slot = True
        if not st.ephemeral:
            st.base = await engine.load(st.session_id)
        st.new.append(Message("user", st.input))
        if isinstance(st.agent, CompositeAgent):
            status = await run_composite(engine, st)
        else:
            status = await _iterate(engine, st)
    except asyncio.CancelledError:
        # The edge that owns the turn: a hard abort (or the loop closing) ends here.
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        engine._mark_hard(st)
        status, rollback = TurnStatus.ABORTED, True
    except AbortSignal as sig:
        status, rollback = TurnStatus.ABORTED, sig.hard
        if not sig.hard:
            engine.emit(st, InterruptReceived, mode="abort_turn", hint=str(sig) or None)
    except Exception as exc:
        error = exc
        engine.error(st, f"{type(exc).__name__}: {exc}", "turn")
    try:
        if rollback:
            await wait_children(st)  # every aborted descendant ends before this turn does
        return await _finish(engine, st, status, error, rollback)
    finally:
        if took_slot:
            st.holds_slot = False
            engine.slots.give_back()


async def _finish(engine: Engine, st: TurnState, status: TurnStatus,
                  error: BaseException | None, rollback: bool) -> TurnResult:
    st.finishing = True
    if status is TurnStatus.ERROR:
        engine.set_phase(st, TurnPhase.ERROR)
    else:
        if status is TurnStatus.ABORTED:
            engine.set_phase(st, TurnPhase.ABORTING)
        engine.set_phase(st, TurnPhase.DONE)
    follow_ups: tuple[str, ...] = ()
    unprocessed: list[QueuedMessage] = []
    if status in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS):
        # Steering the model never saw (the budget ran out) becomes a follow-up.
        for text in st.steering:
            st.follow_ups.append(text)
            engine.emit(st, FollowUpQueued, text=text)
        st.steering.clear()
        follow_ups = tuple(st.follow_ups)
    else:
        if rollback:  # delivered steering is rolled back with the turn: hand it back too
            unprocessed += [QueuedMessage("steering", t) for t in st.injected_steering]
        unprocessed += [QueuedMessage("steering", t) for t in st.steering]
        unprocessed += [QueuedMessage("follow_up", t) for t in st.follow_ups]
    text = _final_text(st) if not rollback else ""
    if not st.ephemeral:
        try:
            await engine.save(st, status.value, rollback)
        except Exception as exc:  # the turn's work is in the result even if the store failed
            engine.error(st, f"saving session {st.session_id!r} failed: {exc}", "store")
            if error is None:
                error = exc
                status = TurnStatus.ERROR
    usage = Usage(st.usage_in, st.usage_out) if (st.usage_in or st.usage_out) else None
    duration = time.monotonic() - st.started
    result = TurnResult(
        turn_id=st.turn_id, session_id=st.session_id, status=status, text=text,
        iterations=st.iteration, follow_ups=follow_ups, unprocessed=tuple(unprocessed),
        error=error, messages=tuple(st.new), tools_run=tuple(st.tools_run), usage=usage,
        duration=duration, parent_turn_id=st.parent_turn_id,
    )
    await close_results(engine, st)  # results too late for this turn: to the session
    engine.emit(st, TurnEnd, status=status, text=text, iterations=st.iteration,
                error=None if error is None else f"{type(error).__name__}: {error}",
                duration=duration, usage=usage)
    return result
