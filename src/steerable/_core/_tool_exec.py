"""The EXECUTING phase: run one response's tool calls in groups, with checkpoints between.

Calls are split, in declared order, into groups: each maximal run of read-only calls runs in
parallel (bounded), every other call runs alone. Before each group, and before each queued call
of a parallel group starts, the turn is checked: pending steering or an interrupt skips what has
not started. Every call ends with exactly one terminal event and one result message, whatever
happens: hooks that deny or respond, unknown tools, bad arguments, raising or hanging tools,
timeouts, and cancellation (a hard abort), in which case the executor itself closes the calls
that were running or waiting.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
import types
from collections.abc import Callable, Generator, Mapping
from typing import Any

from steerable._core._budget import admit_tool_calls, check_budget
from steerable._core._cancel import SafePoint
from steerable._core._durable import safe_point, write_checkpoint
from steerable._core._engine import Engine
from steerable._core._parking import (
    ParkStop,
    ask_question,
    close_in_index,
    forget_requests,
    index_parked,
    open_requests,
    recorded_approval,
)
from steerable._core._permissions import Permission
from steerable._core._subturn import subturns_of
from steerable._core._tool_hooks import after_tool, approve_call, before_tool
from steerable._core._turn_state import AbortSignal, CancelStop, TurnState
from steerable._core._watchdog import bare_context
from steerable._events import (
    PlanUpdated,
    SkipReason,
    ToolExecEnd,
    ToolExecProgress,
    ToolExecSkipped,
    ToolExecStart,
    TurnPhase,
)
from steerable._hooks import HookAction
from steerable._messages import Message, ToolCall, ToolResult
from steerable._parts import Part, TextPart
from steerable._records import state
from steerable.errors import ToolError
from steerable.tools._base import Tool, ToolContext, result_from_return

__all__ = ["SKIP_TEXT", "close_cancelled", "execute_tools", "skip_calls"]

SKIP_TEXT = {
    "interrupted": "Tool call skipped: the user interrupted the turn before this tool started.",
    "steering": "Tool call skipped: a new user message arrived before this tool started. "
    "Read it and decide what to do next.",
    "aborted": "Tool call skipped: the turn was aborted before this tool started.",
    "max_iterations": "Tool call skipped: the iteration budget is used up; answer in text.",
    "cancelled": "Tool call skipped: the turn was cancelled before this tool started.",
    "budget": "Tool call skipped: this turn's budget (Limits) is used up; no more tools run.",
}


@state
class _Call:
    """One tool call of a response, as it goes from pending to done."""

    call: ToolCall
    tool: Tool | None
    state: str = "pending"  # pending -> running -> done (or -> parked: its request waits)
    message: Message | None = None
    started: float = 0.0
    ctx: ToolContext | None = None


def _tool_message(call: ToolCall, content: str, is_error: bool,
                  parts: tuple[Part, ...] = ()) -> Message:
    body: str | tuple[Part, ...] = (TextPart(content), *parts) if parts else content
    return Message("tool", body, tool_call_id=call.id, name=call.name, is_error=is_error)


def _skip(
    engine: Engine, st: TurnState, rec: _Call, reason: SkipReason, detail: str = ""
) -> None:
    if rec.state == "done":
        return
    rec.state = "done"
    if reason == "denied":  # every denial says who or what refused (a rule, a hook, a person)
        text = f"Tool call denied: {detail}. Do not repeat this call; " \
               "choose another approach or ask the user."
    else:
        text = SKIP_TEXT[reason]
    rec.message = _tool_message(rec.call, text, True)
    st.batch_results[rec.call.id] = rec.message
    engine.emit(st, ToolExecSkipped, call_id=rec.call.id, tool_name=rec.call.name,
                reason=reason, detail=detail)


def _start(engine: Engine, st: TurnState, rec: _Call, arguments: Mapping[str, Any]) -> None:
    rec.state = "running"
    rec.started = time.monotonic()
    engine.emit(st, ToolExecStart, iteration=st.iteration, call_id=rec.call.id,
                tool_name=rec.call.name, arguments=arguments)


def _finish(engine: Engine, st: TurnState, rec: _Call, result: ToolResult) -> None:
    if rec.state == "done":
        return
    rec.state = "done"
    rec.ctx = None  # rec -> ctx -> progress reporter -> rec: a cycle only the collector frees
    rec.message = _tool_message(rec.call, result.content, result.is_error, result.parts)
    st.batch_results[rec.call.id] = rec.message
    engine.emit(st, ToolExecEnd, call_id=rec.call.id, tool_name=rec.call.name,
                is_error=result.is_error, content=rec.message.text,
                duration=time.monotonic() - rec.started if rec.started else 0.0)


def skip_calls(
    engine: Engine, st: TurnState, calls: tuple[ToolCall, ...], reason: SkipReason
) -> None:
    """Close calls that will never run (e.g. tool calls in a reply to a call that allowed none)."""
    for call in calls:
        rec = _Call(call, None)
        _skip(engine, st, rec, reason)
        assert rec.message is not None
        st.new.append(rec.message)


def close_cancelled(engine: Engine, st: TurnState) -> None:
    """A cancelled turn that keeps no checkpoint is saved like an interrupted one: the calls
    of its last response get their results so far, the rest a ``cancelled`` skip."""
    # (never empty: it starts with the turn's input, and compaction keeps the latest exchange)
    last = st.new[-1]
    if last.role != "assistant" or not last.tool_calls:
        return
    for call in last.tool_calls:
        done = st.batch_results.get(call.id)
        if done is None:
            rec = _Call(call, None)
            _skip(engine, st, rec, "cancelled")
            done = rec.message
        assert done is not None
        st.new.append(done)


def _progress_reporter(engine: Engine, st: TurnState, rec: _Call) -> Any:
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def emit(text: str, data: Mapping[str, Any]) -> None:
        if rec.state == "running":
            engine.emit(st, ToolExecProgress, call_id=rec.call.id, tool_name=rec.call.name,
                        text=text, data=dict(data))

    def report(text: str, data: Mapping[str, Any]) -> None:
        if threading.get_ident() == loop_thread:
            emit(text, data)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(emit, text, data)

    return report


def _plan_reporter(engine: Engine, st: TurnState, rec: _Call) -> Any:
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def emit(items: tuple[Mapping[str, str], ...]) -> None:
        engine.emit(st, PlanUpdated, call_id=rec.call.id, items=items)

    def report(items: tuple[Mapping[str, str], ...]) -> None:
        if threading.get_ident() == loop_thread:
            emit(items)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(emit, items)

    return report


def _tool_context(engine: Engine, st: TurnState, rec: _Call, tool: Tool,
                  ended: asyncio.Future[None]) -> ToolContext:
    def park() -> None:  # the tool's ask parked: stop waiting for the tool
        rec.state = "parked"
        if not ended.done():
            ended.set_result(None)

    return ToolContext(call_id=rec.call.id, tool_name=rec.call.name, turn_id=st.turn_id,
                       session_id=st.session_id, parent_turn_id=st.parent_turn_id,
                       iteration=st.iteration, dry_run=st.model_agent.dry_run,
                       resumed=rec.call.id in st.resumed_calls,
                       _report=_progress_reporter(engine, st, rec),
                       _plan=_plan_reporter(engine, st, rec),
                       _subturns=subturns_of(engine, st),
                       _refuses=_refusal_check(engine, tool, st.session_id),
                       _ask=functools.partial(ask_question, engine, st, rec.call.id,
                                              rec.call.name, park))


def _ran(st: TurnState, name: str) -> None:
    """``name`` started: the list of the tools run is made at the first."""
    if isinstance(st.tools_run, list):
        st.tools_run.append(name)
    else:
        st.tools_run = [name]


async def _invoke(engine: Engine, st: TurnState, rec: _Call, tool: Tool,
                  arguments: Mapping[str, Any]) -> ToolResult:
    """Validate, then run (or preview) the tool under its timeout."""
    name = rec.call.name
    dry = st.model_agent.dry_run
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    ctx = rec.ctx = _tool_context(engine, st, rec, tool, ended)
    try:
        args = tool.validate(arguments)
        if dry and not tool.read_only:
            # Previews may read files (a diff for write/edit): keep them off the loop's thread.
            return ToolResult(await asyncio.to_thread(tool.preview, args, ctx))
    except ToolError as exc:
        return ToolResult(str(exc), is_error=True)
    except Exception as exc:
        return ToolResult(f"Tool '{name}' rejected its arguments: {type(exc).__name__}: {exc}",
                          is_error=True)
    timeout = tool.timeout if tool.timeout is not None else engine.timeouts.tool
    task = loop.create_task(_run_tool(tool, args, ctx, ended))
    running = st.running_tools
    running[task] = ctx  # a hard abort cancels it directly, without waiting for us
    _ran(st, name)
    timer = None if timeout is None else loop.call_later(timeout, _expire, ended,
                                                         context=bare_context())
    try:
        # The tool's first step was scheduled first: after one pass, a tool that ended in it
        # is done, one loop pass per call (``ended`` would wake us a pass after the tool).
        await _one_pass()
        if not ended.done():
            await ended
    except asyncio.CancelledError:
        ctx.cancel()
        engine.reaper.adopt(task)
        raise
    finally:
        del running[task]
        if timer is not None:
            timer.cancel()
    if rec.state == "parked":
        ctx.cancel()
        engine.reaper.adopt(task)  # it waits inside its ask: cancelled there, re-run on resume
        raise ParkStop  # (for this call: the turn parks after its group)
    if not task.done():  # the timer ended the wait (or the tool's own step is not over)
        ctx.cancel()
        engine.reaper.adopt(task)
        return ToolResult(f"Tool '{name}' timed out after {timeout:g} s and was cancelled.",
                          is_error=True)
    return _outcome(name, task)


def _outcome(name: str, task: asyncio.Task[Any]) -> ToolResult:
    """What the tool's ended task gives the model."""
    if task.cancelled():
        return ToolResult(f"Tool '{name}' was cancelled.", is_error=True)
    failure = task.exception()
    if isinstance(failure, ToolError):
        return ToolResult(str(failure), is_error=True)
    if failure is not None:
        return ToolResult(f"Tool '{name}' failed: {type(failure).__name__}: {failure}",
                          is_error=True)
    try:
        return result_from_return(task.result())
    except Exception as exc:
        return ToolResult(f"Tool '{name}' returned a value that is not text: {exc}",
                          is_error=True)


async def _run_tool(tool: Tool, args: Any, ctx: ToolContext,
                    ended: asyncio.Future[None]) -> Any:
    """The tool's task. It wakes the turn itself as it ends, in the same loop cycle: a done
    callback on the task (what ``asyncio.wait`` uses) would cost the turn one more cycle per
    call. The turn awaits ``ended``, never the task, so a tool that ignores its cancel cannot
    hold the turn. (Only a hard abort or the event loop's shutdown cancels this task before its
    first step, and either cancels the turn's task too: nobody is left waiting for ``ended``.)"""
    try:
        return await tool.run(args, ctx)
    finally:
        if not ended.done():
            ended.set_result(None)


@types.coroutine
def _one_pass() -> Generator[None, None, None]:
    """Let every callback already scheduled run once (``asyncio.sleep(0)``, without its
    coroutine): a bare yield reschedules the task at the end of the loop's ready queue."""
    yield


def _expire(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


async def _run_call(engine: Engine, st: TurnState, rec: _Call,
                    sem: asyncio.Semaphore | None) -> None:
    if rec.state == "done":  # its result came from the checkpoint this turn resumed
        return
    if sem is not None:
        async with sem:
            if st.cancel is not None and st.cancel.stops_at(SafePoint.BEFORE_CALL) is not None:
                return  # left pending: the turn stops after this group, resume runs it
            reason = st.stop_reason()
            if reason is not None:
                _skip(engine, st, rec, reason)
                return
            await _run_call_body(engine, st, rec)
    else:
        await _run_call_body(engine, st, rec)
    # Its result is saved before anything else starts, so a resume never runs it again.
    used = forget_requests(st, [rec.call.id]) if rec.state == "done" else []
    await write_checkpoint(engine, st, "tools")
    if used:
        close_in_index(engine, st, used)


async def _run_call_body(engine: Engine, st: TurnState, rec: _Call) -> None:
    call, decision = rec.call, None
    if engine.hooks.at("before_tool"):
        call, decision = await before_tool(engine, st, rec.call,
                                           bool(rec.tool and rec.tool.read_only))
    if decision is not None and decision.action is HookAction.DENY_TOOL:
        _skip(engine, st, rec, "denied", decision.reason or "denied by a hook")
        return
    if decision is not None:  # RESPOND: the hook's result stands in for the tool
        _start(engine, st, rec, call.arguments)
        result = ToolResult(decision.result or "", bool(decision.is_error))
    elif rec.tool is None or ((offered := st.offered) is not None
                              and call.name not in offered):
        _start(engine, st, rec, call.arguments)
        result = _unavailable(st, call.name)
    elif call.arguments_error is not None:
        _start(engine, st, rec, call.arguments)
        result = ToolResult(f"Invalid arguments for tool '{call.name}': "
                            f"{call.arguments_error}. Send a JSON object.", is_error=True)
    else:
        tool = rec.tool
        perm, rule = engine.permissions.decide(
            call.name, _subjects(tool, call.arguments), read_only=tool.read_only,
            family=getattr(tool, "permission_family", None), session_id=st.session_id)
        if perm is Permission.DENY:
            _skip(engine, st, rec, "denied", f"refused by the rule '{rule}'")
            return
        needs_ask = perm is Permission.ASK and not (st.model_agent.dry_run and not tool.read_only)
        decided = recorded_approval(engine, st, call.id) if needs_ask else None
        if decided is None and needs_ask and engine.hooks.at("approve_tool"):
            decided = await approve_call(engine, st, call, tool.read_only)
            if decided is None:
                rec.state = "parked"
                return
        if decided is not None and not decided[0]:
            _skip(engine, st, rec, "denied", decided[1])
            return
        _start(engine, st, rec, call.arguments)
        try:
            result = await _invoke(engine, st, rec, tool, call.arguments)
        except ParkStop:
            return
    if engine.hooks.at("after_tool"):
        result = await after_tool(engine, st, call, result,
                                  bool(rec.tool and rec.tool.read_only))
    _finish(engine, st, rec, result)


def _refusal_check(engine: Engine, tool: Tool,
                   session_id: str) -> Callable[[str], bool] | None:
    permissions = engine.permissions
    if not permissions.rules:
        return None
    family = getattr(tool, "permission_family", None)
    return lambda subject: permissions.refuses(tool.name, subject, family=family,
                                               session_id=session_id)


def _subjects(tool: Tool, arguments: Mapping[str, Any]) -> list[str]:
    subjects = getattr(tool, "permission_subjects", None)
    if subjects is None:
        return []
    try:
        # UncoveredSubject (a str) must survive: it is what keeps allow rules off a call.
        return [s if isinstance(s, str) else str(s) for s in subjects(arguments)]
    except Exception:
        # Arguments the tool cannot even interpret match no rule (so allow rules do not apply);
        # the call then fails validation with a message the model can read.
        return []


def _groups(recs: list[_Call]) -> list[list[_Call]]:
    groups: list[list[_Call]] = []
    for rec in recs:
        read_only = rec.tool is not None and rec.tool.read_only
        if read_only and groups and groups[-1][0].tool is not None and groups[-1][0].tool.read_only:
            groups[-1].append(rec)
        else:
            groups.append([rec])
    return groups


async def _run_group(engine: Engine, st: TurnState, group: list[_Call]) -> None:
    if len(group) == 1:
        # One call needs no task of its own (two loop cycles saved per call): its hooks and its
        # tool already run in tasks of their own, handed to the reaper on cancel, so nothing
        # here can hold the turn hostage.
        await _run_call(engine, st, group[0], None)
        return
    sem = asyncio.Semaphore(engine.limits.parallel_tools) if len(group) > 1 else None
    tasks = [asyncio.ensure_future(_run_call(engine, st, rec, sem)) for rec in group]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError:
        for task in tasks:
            engine.reaper.adopt(task)
        raise
    # In the group's order, never the sets' (their order is the tasks' addresses): on a
    # durable engine each cancel is a command, and a replay must issue them in the same order.
    for task in tasks:
        if task in pending:
            engine.reaper.adopt(task)
    for task in tasks:
        if task not in done:
            continue
        exc = task.exception()
        if exc is not None:
            raise exc


def _admit(engine: Engine, st: TurnState, group: list[_Call]) -> None:
    """A budget checkpoint before a group: a limit reached stops the turn (``stop_reason``
    then skips the group); calls past ``max_tool_calls`` are refused, the rest run."""
    check_budget(engine, st)
    if st.stop_reason() is not None:
        return
    pending = [rec for rec in group if rec.state != "done"]
    allowed = admit_tool_calls(engine, st, len(pending))
    for rec in pending[allowed:]:
        _skip(engine, st, rec, "budget", st.refused or "")


def _unavailable(st: TurnState, name: str) -> ToolResult:
    """The answer to a call of a tool that does not exist, or was not offered to this call."""
    tools = st.model_agent.tools_by_name
    offered = st.offered
    known = ", ".join(t for t in tools if offered is None or t in offered) or "none"
    if name in tools:
        return ToolResult(f"Tool '{name}' is not available for this call. Available tools: "
                          f"{known}.", is_error=True)
    return ToolResult(f"Unknown tool '{name}'. Available tools: {known}.", is_error=True)


def _recs(st: TurnState, calls: tuple[ToolCall, ...], resumed: bool) -> list[_Call]:
    """The calls of a response, with the results a resumed checkpoint already holds."""
    recs = []
    for call in calls:
        rec = _Call(call, st.model_agent.tools_by_name.get(call.name))
        done = st.batch_results.get(call.id)
        if done is not None:
            rec.state, rec.message = "done", done
        recs.append(rec)
    if resumed and st.resume is not None and st.resume.cancel_mode is None \
            and not st.resume.requests:  # (a parked turn: _parking.restore_requests says)
        # The process died here: the first unfinished group may have been running.
        for group in _groups(recs):
            open_ = [r.call.id for r in group if r.state != "done"]
            if open_:
                st.resumed_calls = frozenset(open_)
                break
    return recs


async def _park(engine: Engine, st: TurnState, recs: list[_Call]) -> None:
    """A call of this group parked: checkpoint the turn with its requests, then stop."""
    requests = open_requests(st, [r.call.id for r in recs if r.state != "done"])
    await write_checkpoint(engine, st, "tools")
    try:
        index_parked(engine, st, requests)
    except Exception as exc:  # the checkpoint still lists them: pending_requests(session) does
        engine.error(st, f"indexing the waiting requests of session {st.session_id!r} "
                     f"failed: {exc}", "checkpoint")
    raise ParkStop


async def execute_tools(engine: Engine, st: TurnState, calls: tuple[ToolCall, ...],
                        resumed: bool = False) -> None:
    """Run ``calls`` and append one result message per call, in declared order.

    ``resumed``: the calls come from the checkpoint the turn resumed; those with a result in
    ``st.batch_results`` are not run again. A safe-point cancel stops between groups
    (``CancelStop``): the calls not yet run stay pending in the checkpoint, nothing is
    appended."""
    engine.set_phase(st, TurnPhase.EXECUTING)
    recs = _recs(st, calls, resumed)
    cancelled = False
    try:
        for group in _groups(recs):
            if all(rec.state == "done" for rec in group):
                continue
            if engine.limits.budgeted:
                _admit(engine, st, group)
            reason = st.stop_reason()
            if reason is not None:
                for rec in recs:
                    _skip(engine, st, rec, reason)
                break
            await _run_group(engine, st, group)
            if any(rec.state == "parked" for rec in group):
                await _park(engine, st, recs)
            await safe_point(engine, st, SafePoint.AFTER_TOOLS, "tools")
    except (CancelStop, ParkStop):
        cancelled = True
        raise
    except BaseException as exc:
        # A hard abort (CancelledError), a hook's abort, or a bug: close every open call now.
        note = "the turn was aborted" if isinstance(exc, asyncio.CancelledError | AbortSignal) \
            else f"the turn failed ({type(exc).__name__})"
        for rec in recs:
            if rec.state == "running":
                if rec.ctx is not None:
                    rec.ctx.cancel()
                _finish(engine, st, rec,
                        ToolResult(f"Tool '{rec.call.name}' was cancelled: {note}.", True))
            elif rec.state in ("pending", "parked"):
                _skip(engine, st, rec, "aborted", note)
        raise
    finally:
        st.resumed_calls = frozenset()
        if not cancelled:
            st.new.extend(rec.message for rec in recs if rec.message is not None)
