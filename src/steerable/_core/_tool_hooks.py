"""The hook points of one tool call: ``before_tool`` (modify, deny or answer for the tool),
``approve_tool`` (every approver in turn; a person's approval may park the turn) and
``after_tool`` (modify the result). The executor (``_tool_exec``) calls them in that order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from contextlib import aclosing

from steerable._core._engine import Engine
from steerable._core._hook_chain import decisions, ignored
from steerable._core._parking import PARKED, can_park, wait_approval
from steerable._core._turn_state import TurnState
from steerable._events import ApprovalResolved
from steerable._hooks import HookAction, HookDecision, ToolCallContext, ToolResultContext
from steerable._messages import ToolCall, ToolResult

__all__ = ["after_tool", "approve_call", "before_tool"]


def _hook_ctx(st: TurnState, call: ToolCall, read_only: bool) -> ToolCallContext:
    return ToolCallContext(turn_id=st.turn_id, session_id=st.session_id,
                           parent_turn_id=st.parent_turn_id, iteration=st.transcript.iteration,
                           call=call,
                           read_only=read_only,
                           dry_run=st.model_agent.dry_run)


async def before_tool(
    engine: Engine, st: TurnState, call: ToolCall, read_only: bool
) -> tuple[ToolCall, HookDecision | None]:
    """Run before_tool hooks; returns the (maybe modified) call and a DENY/RESPOND decision."""
    async with aclosing(decisions(engine, st, "before_tool", lambda: _hook_ctx(st, call, read_only))) as chain:
        async for reg, _, decision in chain:
            if decision.action is HookAction.MODIFY and decision.arguments is not None:
                call = ToolCall(call.id, call.name, dict(decision.arguments))
            elif decision.action in (HookAction.DENY_TOOL, HookAction.RESPOND):
                return call, decision
            else:
                ignored(engine, st, reg, "before_tool", decision)
    return call, None


async def approve_call(engine: Engine, st: TurnState, call: ToolCall,
                       read_only: bool) -> tuple[bool, str] | None:
    """Ask every approver in turn; the first denial (or failure, or timeout) refuses. None:
    a person's approval parked (the turn parks after this group)."""
    open_requests: set[str] = set()
    parked: asyncio.Future[None] | None = None
    if can_park(engine, st):
        parked = asyncio.get_running_loop().create_future()

    def park() -> None:
        if parked is not None and not parked.done():
            parked.set_result(None)

    async def ask_human() -> tuple[bool, str]:
        answer = await wait_approval(engine, st, call.id, call.name, call.arguments,
                                     open_requests, park)
        if answer is PARKED:
            await asyncio.Event().wait()  # the chain is cancelled now; the turn parks
        approved, reason = answer
        return bool(approved), str(reason)

    def make_ctx() -> ToolCallContext:
        ctx = _hook_ctx(st, call, read_only)
        ctx._ask_human = ask_human
        return ctx

    def close_open_requests() -> None:
        for request_id in list(open_requests):  # the approver gave up waiting: close it now
            open_requests.remove(request_id)
            engine.broker.discard(request_id)
            engine.emit(st, ApprovalResolved, request_id=request_id, call_id=call.id,
                        tool_name=call.name, approved=False, reason="timed out")

    async def decide() -> tuple[bool, str]:
        # The same chain as every other point: priority order, failures reported, aborts
        # obeyed; here a failure, a timeout or any answer but "yes" refuses the call.
        chain = decisions(engine, st, "approve_tool", make_ctx, approving=True,
                          after_each=close_open_requests)
        async with aclosing(chain):
            async for reg, _, decision in chain:
                if decision.action is not HookAction.DENY_TOOL:
                    engine.error(st, f"approver {reg.label} answered {decision.action}; "
                                 "treated as a denial", "hook")
                return False, decision.reason if decision.reason not in ("", "denied") \
                    else f"denied by {reg.label}"
        return True, ""

    if parked is None:
        return await decide()
    deciding = asyncio.ensure_future(decide())
    try:
        await asyncio.wait((deciding, parked), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        engine.reaper.adopt(deciding)
        raise
    if deciding.done():
        return deciding.result()
    engine.reaper.adopt(deciding)  # the approver waits in the checkpoint now, not here
    return None


async def after_tool(
    engine: Engine, st: TurnState, call: ToolCall, result: ToolResult, read_only: bool
) -> ToolResult:
    def ctx() -> ToolResultContext:
        return ToolResultContext(turn_id=st.turn_id, session_id=st.session_id,
                                 parent_turn_id=st.parent_turn_id,
                                 iteration=st.transcript.iteration, call=call, result=result,
                                 read_only=read_only, dry_run=st.model_agent.dry_run)

    async with aclosing(decisions(engine, st, "after_tool", ctx)) as chain:
        async for reg, _, decision in chain:
            if decision.action is HookAction.MODIFY and (
                decision.result is not None or decision.is_error is not None
            ):
                result = dataclasses.replace(  # the images and files stay
                    result,
                    content=result.content if decision.result is None else decision.result,
                    is_error=result.is_error if decision.is_error is None else decision.is_error,
                )
            else:
                ignored(engine, st, reg, "after_tool", decision)
    return result
