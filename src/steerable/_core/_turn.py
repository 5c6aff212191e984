"""One turn, phase by phase: checkpoint, call the model, run tools, repeat, then finish.

``run_turn`` is the edge that owns the turn: it is the one place that turns a cancellation
(hard abort) or a hook's abort into an ``aborted`` result, and an exception into ``error``.
Whatever path is taken, TURN_START comes first and TURN_END last, exactly once, and the session
is saved (or rolled back) before the result is returned.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from steerable._core._budget import check_budget, turn_usage
from steerable._core._cancel import CancelMode, SafePoint
from steerable._core._composite import CompositeAgent, run_composite
from steerable._core._durable import (
    release,
    safe_point,
    settle_writes,
    stage_now,
    write_checkpoint,
)
from steerable._core._engine import Engine
from steerable._core._model_call import call_model
from steerable._core._parking import ParkStop, parked_requests
from steerable._core._queues import deliver, drain_steering, settle
from steerable._core._requests import PendingRequest
from steerable._core._subturn import close_results, deliver_results, wait_children
from steerable._core._tool_exec import close_cancelled, execute_tools, skip_calls
from steerable._core._turn_state import (
    AbortSignal,
    CancelStop,
    Interrupt,
    QueuedMessage,
    TurnState,
)
from steerable._events import (
    InterruptReceived,
    TurnEnd,
    TurnPhase,
    TurnStart,
    TurnStatus,
)
from steerable._messages import Message, Usage
from steerable._records import Record, record
from steerable.providers._base import LLMResponse

__all__ = ["DEFAULT_INTERRUPT_HINT", "KEEPS_CHECKPOINT", "TurnResult", "begin_turn", "run_turn"]

KEEPS_CHECKPOINT = (TurnStatus.CANCELLED, TurnStatus.WAITING)
"""A durable turn that ends so keeps its checkpoint (``resume``, or an answer, continues it)."""

_ANSWERED = (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS)
"""Statuses whose text is the turn's answer (others end with a summary or nothing)."""

DEFAULT_INTERRUPT_HINT = (
    "The user interrupted you. Stop here: do not call tools. In a few sentences, say what you "
    "did, what you found, and what is left undone."
)


@record
class TurnResult(Record):
    """How a turn ended. ``messages`` are the turn's own messages (what was, or would have
    been, appended to the session); ``tools_run`` names the tools that actually started, so
    side effects of an aborted turn are known."""

    turn_id: str
    session_id: str
    status: TurnStatus
    text: str
    iterations: int
    follow_ups: tuple[str, ...] = ()
    follow_up_ids: tuple[str, ...] = ()
    """The message ids of ``follow_ups``, position by position (each is ``returned``: a driver
    that runs one gives it a new message whose ``origin_id`` is this id)."""
    unprocessed: tuple[QueuedMessage, ...] = ()
    error: BaseException | None = None
    messages: tuple[Message, ...] = ()
    tools_run: tuple[str, ...] = ()
    usage: Usage | None = None
    duration: float = 0.0
    parent_turn_id: str | None = None
    checkpoint_id: str | None = None
    """For a ``cancelled`` turn: the checkpoint it left (``AgentLoop.resume`` continues it)."""
    resumed_from: str | None = None
    """For a resumed turn: the id of the turn whose checkpoint it continued."""
    output: Any = None
    """The final answer as a value of the agent's ``output_type`` (None without one, and when
    the turn did not end with a valid answer: interrupted, budget, error...)."""
    pending: tuple[PendingRequest, ...] = ()
    """For a ``waiting`` (parked) turn: the approvals and questions it waits for."""


def _interrupt_note(st: TurnState) -> str:
    """The hint, and which tools really ran: a summary written without knowing claimed
    reads and edits that never happened."""
    ran = (f"Tools that ran in this turn: {', '.join(st.tools_run)}; no other tool ran."
           if st.tools_run else "No tool ran in this turn.")
    return f"{st.hint or DEFAULT_INTERRUPT_HINT}\n({ran})"


# Imported when first needed (a graceful interrupt's summary, an agent with an output type):
# most turns use neither, and the core's import is smaller without them.


def _not_an_echo(text: str, hint: str, tools_run: Sequence[str]) -> str:
    from steerable._core._interrupt_text import fallback_summary, is_echo

    return fallback_summary(tools_run) if is_echo(text, hint) else text


def _accept_answer(st: TurnState, text: str, *, can_retry: bool) -> bool:
    from steerable._core._answer import accept_answer

    return accept_answer(st, text, can_retry=can_retry)


def _final_text(st: TurnState) -> str:
    for msg in reversed(st.new):
        if msg.role == "assistant":
            return msg.text
    return ""


def begin_turn(engine: Engine, st: TurnState) -> None:
    """Emit TURN_START, and take an active-turn slot if one is free (else the turn's task waits
    for one). Called synchronously by whoever starts the turn, so that anything said to the turn
    before its task first runs (steering, an interrupt) comes after it, and the turn counts as
    running (``TurnSlots``) from the moment it is started."""
    engine.slots.try_take(st.turn_id)
    engine.emit(st, TurnStart, input=st.input, agent=st.agent.name,
                resumed_from=None if st.resume is None else st.resume.turn_id)


async def run_turn(engine: Engine, st: TurnState,
                   ended: Callable[[TurnState, TurnResult | None], None] | None = None,
                   ) -> TurnResult:
    """Run ``st`` (already begun) to its end. Never raises. ``ended``: the driver's
    bookkeeping, for a driver that runs this as the turn's task (``_last_step``).

    The model loop runs in this function's own frame, the phases around each call in
    functions that have returned by the time the model is waiting: a turn waiting on its
    model holds one coroutine frame here, not two (with 10,000 turns in flight, each frame
    is an object the collector walks in every full collection)."""
    st.running = True
    status = TurnStatus.ERROR
    error: BaseException | None = None
    rollback = False
    try:
        resume_tools = await _begin(engine, st)
        if isinstance(st.agent, CompositeAgent):
            status = await run_composite(engine, st)
        else:
            if resume_tools:  # a checkpoint taken while the last response's tools were running
                await execute_tools(engine, st, st.new[-1].tool_calls, resumed=True)
            while True:
                if engine.limits.budgeted:  # a checkpoint: a budget reached is an interrupt
                    check_budget(engine, st)
                graceful = st.interrupt is Interrupt.GRACEFUL
                if not graceful:
                    drained = drain_steering(engine, st)  # a checkpoint: before every call
                    # Saved before the first call and when steering changed the context;
                    # otherwise the checkpoint after the last tool already holds this state.
                    await safe_point(engine, st, SafePoint.BEFORE_MODEL, "model",
                                     write=drained or st.iteration == 0)
                last, extra = _next_call(engine, st, graceful)
                response = await call_model(engine, st, may_call=not last, extra=extra,
                                            answer=not graceful)
                st.final_call = False
                ended_as = _answered(engine, st, response, graceful, last)
                if ended_as is not None:
                    status = ended_as
                    break
                if response.tool_calls:
                    # The response is paid for: saved before any of its tools start.
                    await safe_point(engine, st, SafePoint.AFTER_MODEL, "tools", write=True)
                    await execute_tools(engine, st, response.tool_calls)
                # steering pending after a final answer, an interrupt, or an answer that did
                # not fit the output type (asked again): iterate again
    except BaseException as exc:  # (``_outcome`` raises again what the turn does not own)
        status, error, rollback = _outcome(engine, st, exc)
    result: TurnResult | None = None
    try:
        if rollback:
            await wait_children(st)  # every aborted descendant ends before this turn does
        result = await _finish(engine, st, status, error, rollback)
        return result
    finally:
        _last_step(engine, st, ended, result)


async def _begin(engine: Engine, st: TurnState) -> bool:
    """Up to the first LLM call: a slot, the session's history, the input. True when a
    resumed turn first runs its last response's tools."""
    if st.interrupt is Interrupt.HARD:  # aborted before its task first ran
        raise asyncio.CancelledError
    if not engine.slots.holds(st.turn_id):
        await engine.slots.take(st.turn_id)  # Limits.active_turns: wait for a free slot
    if st.resume is not None:  # resume() loaded, checked and restored it already
        return st.resume.stage == "tools"
    if not st.ephemeral:
        st.base = await engine.history(st.session_id)
        st.base_count = len(st.base)
    _take_input(st)
    if isinstance(st.agent, CompositeAgent):
        # Its children call the model, each with its own input: the composite's input is
        # delivered as it hands it to them.
        deliver(engine, st, None, "handed to the composite agent's children")
    return False


def _next_call(engine: Engine, st: TurnState,
               graceful: bool) -> tuple[bool, tuple[Message, ...]]:
    """The call about to be made: whether it is the last, and what it adds (a graceful
    interrupt's note). Counts it, and hands it the results of async children."""
    last = graceful or st.iteration + 1 >= st.model_agent.max_iterations
    st.iteration += 1
    if st.results:
        deliver_results(engine, st)  # async children that ended since the last call
    st.final_call = last
    return last, (Message("user", _interrupt_note(st)),) if graceful else ()


def _answered(engine: Engine, st: TurnState, response: LLMResponse, graceful: bool,
              last: bool) -> TurnStatus | None:
    """The reply into the transcript; how the turn ends with it, or None to go on."""
    text = response.text
    tr = st.transcript
    if graceful:
        text = _not_an_echo(text, st.hint or DEFAULT_INTERRUPT_HINT, tr.tools_run)
    if st.reply_cut:  # stopped mid-reply: what was written stands as the answer
        tr.new.append(Message("assistant", f"{text.rstrip()} […interrupted]"))
        return TurnStatus.INTERRUPTED
    tr.new.append(Message("assistant", text, tool_calls=response.tool_calls))
    tr.batch_results.clear()
    if graceful:
        skip_calls(engine, st, response.tool_calls, "interrupted")
        return TurnStatus.INTERRUPTED
    if last:
        skip_calls(engine, st, response.tool_calls, "max_iterations")
        if st.model_agent.output is not None:
            _accept_answer(st, text, can_retry=False)
        return TurnStatus.MAX_ITERATIONS if tr.last_had_tools else TurnStatus.COMPLETED
    tr.last_had_tools = bool(response.tool_calls)
    if not response.tool_calls and not st.steering and st.interrupt is Interrupt.NONE and (
            st.model_agent.output is None or _accept_answer(st, text, can_retry=True)):
        return TurnStatus.COMPLETED
    return None


def _outcome(engine: Engine, st: TurnState,
             exc: BaseException) -> tuple[TurnStatus, BaseException | None, bool]:
    """How ``exc`` ends the turn: (status, error, rollback). This is the edge that owns the
    turn: a hard abort (or the loop closing) ends here. What is not the turn's to end
    (KeyboardInterrupt, SystemExit, a closed coroutine's GeneratorExit) is raised again."""
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        engine._mark_hard(st)
        return TurnStatus.ABORTED, None, True
    if isinstance(exc, CancelStop):
        if not st.durable:
            close_cancelled(engine, st)
        return TurnStatus.CANCELLED, None, False
    if isinstance(exc, ParkStop):
        return TurnStatus.WAITING, None, False  # its checkpoint holds the open requests
    if isinstance(exc, AbortSignal):
        if not exc.hard:
            engine.emit(st, InterruptReceived, mode="abort_turn", hint=str(exc) or None)
        return TurnStatus.ABORTED, None, exc.hard
    if isinstance(exc, Exception):
        engine.error(st, f"{type(exc).__name__}: {exc}", "turn")
        return TurnStatus.ERROR, exc, False
    raise exc


def _take_input(st: TurnState) -> None:
    r = st.input_receipt
    st.new.append(Message("user", st.input if r is None else r.content()))
    if r is not None:
        st.carrying += (r,)


def _last_step(engine: Engine, st: TurnState,
               ended: Callable[[TurnState, TurnResult | None], None] | None,
               result: TurnResult | None) -> None:
    """The turn's slot back, then ``ended`` (with None if the turn's end itself was
    cancelled), then its callers woken. A driver runs ``run_turn`` as the turn's task and
    passes its bookkeeping as ``ended``: no coroutine of its own around it (one frame less
    per live turn), no done callback (a callback and a loop pass less per turn)."""
    # Every turn's slot (a sub-turn's too, taken as it was spawned) is given back here,
    # before anything waits on the result: a parent waiting for a slot never waits on it.
    engine.slots.give_back(st.turn_id)
    try:
        if ended is not None:
            ended(st, result)
    finally:
        # The task ends with this step: its callers wake in the next pass, with the result
        # (a turn whose end was cancelled: with the CancelledError its task ends with).
        if st.waiter is not None:
            _wake(st.waiter, result)
        for waiter in st.waiters:
            _wake(waiter, result)


def _wake(waiter: asyncio.Future[Any], result: TurnResult | None) -> None:
    if waiter.done():
        return
    if result is None:
        waiter.set_exception(asyncio.CancelledError())
    else:
        waiter.set_result(result)


def _ended_by(st: TurnState, status: TurnStatus) -> CancelMode | None:
    requested = None if st.cancel is None else st.cancel.requested
    if status is TurnStatus.CANCELLED:
        return requested
    if status is TurnStatus.ABORTED and requested is CancelMode.IMMEDIATE:
        return requested
    return None


async def _store_outcome(engine: Engine, st: TurnState, status: TurnStatus,
                         rollback: bool) -> BaseException | None:
    """Save (or roll back) the session and settle the checkpoint; the store's error, if any.

    Ordering matters for a crash in between: an aborted turn drops its checkpoint first (a
    restart must not continue what the user aborted); a saved turn appends its history
    first (``resume`` recognises a checkpoint whose turn is already in the history)."""
    if status in KEEPS_CHECKPOINT and st.durable:
        await settle_writes(st)  # the checkpoint stays: resume continues from it
        if st.held:  # with what waits behind it now (it ran after them since the write)
            mode = st.cancel.requested if status is TurnStatus.CANCELLED \
                and st.cancel is not None else None
            await write_checkpoint(engine, st, stage_now(st), mode)
        st.released = True
        return None
    if rollback:
        await release(engine, st)
    try:
        if not st.ephemeral:
            await engine.save(st, status.value, rollback)
    except Exception as exc:  # the turn's work is in the result even if the store failed
        engine.error(st, f"saving session {st.session_id!r} failed: {exc}", "store")
        return exc  # and its checkpoint stays, so nothing of the turn is lost
    if not rollback:
        await release(engine, st)
    return None


async def _finish(engine: Engine, st: TurnState, status: TurnStatus,
                  error: BaseException | None, rollback: bool) -> TurnResult:
    st.finishing = True
    if status is TurnStatus.ERROR:
        engine.set_phase(st, TurnPhase.ERROR)
    else:
        if status is TurnStatus.ABORTED:
            engine.set_phase(st, TurnPhase.ABORTING)
        engine.set_phase(st, TurnPhase.DONE)
    follow_ups, unprocessed = settle(engine, st, status, rollback)
    text = _final_text(st) if not rollback else ""
    failure = await _store_outcome(engine, st, status, rollback)
    if failure is not None and error is None:
        error, status = failure, TurnStatus.ERROR
    if status is TurnStatus.INTERRUPTED and st.exceeded:
        status = TurnStatus.BUDGET_EXCEEDED
    ended_by = _ended_by(st, status)
    tr, dur = st.transcript, st.durability
    usage = turn_usage(st)
    duration = time.monotonic() - st.started
    result = TurnResult(
        turn_id=st.turn_id, session_id=st.session_id, status=status, text=text,
        iterations=tr.iteration, follow_ups=tuple(r.text for r in follow_ups),
        follow_up_ids=tuple(r.message_id for r in follow_ups), unprocessed=tuple(unprocessed),
        error=error, messages=tuple(tr.new), tools_run=tuple(tr.tools_run), usage=usage,
        duration=duration, parent_turn_id=st.parent_turn_id,
        checkpoint_id=f"{dur.origin_turn_id}.{dur.seq}"
        if status in KEEPS_CHECKPOINT and dur.durable else None,
        resumed_from=None if st.resume is None else st.resume.turn_id,
        output=st.output if status in _ANSWERED else None,
        pending=parked_requests(st) if status is TurnStatus.WAITING else (),
    )
    await close_results(engine, st)  # results too late for this turn: to the session
    engine.emit(st, TurnEnd, status=status, text=text, iterations=st.iteration,
                error=None if error is None else f"{type(error).__name__}: {error}",
                duration=duration, usage=usage,
                cancel_mode=None if ended_by is None else ended_by.label)
    if st.cancel is not None:  # (without one, no handle waits and none can contribute)
        st.cancel.settle(ended_by)
    return result
