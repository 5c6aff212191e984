"""Approval events name exactly what they are about, on every way an approval can end."""

from __future__ import annotations

import asyncio
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HookAction,
    HookDecision,
    HumanApprover,
    Reply,
    ScriptedProvider,
    Timeouts,
    TurnStatus,
    tool,
)
from tests.conftest import of, wait_for

K = EventKind


@tool
def write(path: str) -> str:
    """Write a path."""
    return f"wrote {path}"


def loop_with(script: list[Reply], **loop_kw: Any):
    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[write]), **loop_kw)
    return loop, loop.subscribe(buffer=10_000)


def assert_names_its_call(events, turn_id: str) -> None:
    """Each approval event carries the turn, the session, the call and the tool it is about,
    and each resolution answers a request made for that same call."""
    calls = {c.id: c for e in of(events, K.LLM_RESPONSE) for c in e.tool_calls}
    requested = {e.request_id: e for e in of(events, K.APPROVAL_REQUESTED)}
    for e in [*requested.values(), *of(events, K.APPROVAL_RESOLVED)]:
        assert (e.session_id, e.turn_id, e.parent_turn_id) == ("s", turn_id, None)
        assert e.call_id in calls and e.tool_name == calls[e.call_id].name == "write"
        assert e.request_id.startswith("approval_")
    for e in of(events, K.APPROVAL_RESOLVED):
        assert requested[e.request_id].call_id == e.call_id


async def test_answered_requests_each_resolve_their_own_call() -> None:
    calls = [("write", {"path": "ok"}), ("write", {"path": "bad"})]
    loop, sub = loop_with([Reply(tool_calls=calls), Reply(text="done")])
    loop.register_hook(HumanApprover())
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    first = await wait_for(sub, K.APPROVAL_REQUESTED, seen=seen)
    loop.resolve_approval(first.request_id, True, "fine")
    second = await wait_for(sub, K.APPROVAL_REQUESTED, seen=seen)
    assert second.request_id != first.request_id and second.call_id != first.call_id
    loop.resolve_approval(second.request_id, False)
    result = await handle
    events = [*seen, *sub.drain_nowait()]
    assert_names_its_call(events, result.turn_id)
    resolved = of(events, K.APPROVAL_RESOLVED)
    assert [(r.request_id, r.approved, r.reason) for r in resolved] == [
        (first.request_id, True, "fine"), (second.request_id, False, "")]
    skipped = of(events, K.TOOL_EXEC_SKIPPED)
    assert [(s.call_id, s.detail) for s in skipped] == [(second.call_id, "denied by the user")]


async def test_a_hard_abort_closes_the_open_request_as_cancelled() -> None:
    loop, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})])])
    loop.register_hook(HumanApprover())
    handle = loop.start_turn("go", session_id="s")
    seen: list[Any] = []
    request = await wait_for(sub, K.APPROVAL_REQUESTED, seen=seen)
    loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    events = [*seen, *sub.drain_nowait()]
    assert_names_its_call(events, result.turn_id)
    resolved = of(events, K.APPROVAL_RESOLVED)
    assert [(r.request_id, r.approved, r.reason) for r in resolved] == [
        (request.request_id, False, "cancelled")]
    assert loop.resolve_approval(request.request_id, True) is False  # closed for good


async def test_an_approval_timeout_closes_the_open_request_as_timed_out() -> None:
    loop, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")],
                          timeouts=Timeouts(approval=0.05))
    loop.register_hook(HumanApprover())
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert_names_its_call(events, result.turn_id)
    (request,) = of(events, K.APPROVAL_REQUESTED)
    (resolved,) = of(events, K.APPROVAL_RESOLVED)
    assert (resolved.request_id, resolved.approved, resolved.reason) == (
        request.request_id, False, "timed out")
    assert loop.resolve_approval(request.request_id, True) is False


async def test_an_approver_that_answers_anything_but_a_denial_still_refuses_and_says_so() -> None:
    class Confused:
        def approve_tool(self, ctx) -> HookDecision:
            return HookDecision(HookAction.RESPOND, reason="meant to answer")

    loop, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")])
    loop.register_hook(Confused())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    events = sub.drain_nowait()
    (error,) = of(events, K.ERROR)
    assert error.source == "hook" and error.turn_id == result.turn_id
    assert error.message == ("approver Confused answered respond; treated as a denial")
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert (skipped.reason, skipped.detail) == ("denied", "meant to answer")


async def test_a_denial_without_its_own_reason_names_the_approver() -> None:
    class Plain:
        def approve_tool(self, ctx) -> HookDecision:
            return HookDecision(HookAction.DENY_TOOL, reason="denied")

    class Silent:
        def approve_tool(self, ctx) -> bool:
            return False

    for approver, label in ((Plain(), "Plain"), (Silent(), "Silent")):
        loop, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")])
        loop.register_hook(approver)
        await loop.run_turn("go", session_id="s")
        (skipped,) = of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)
        assert skipped.detail == f"denied by {label}"
        await loop.aclose()


async def test_an_answer_from_another_thread_resolves_the_request() -> None:
    loop, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")])
    loop.register_hook(HumanApprover())
    handle = loop.start_turn("go", session_id="s")
    request = await wait_for(sub, K.APPROVAL_REQUESTED)
    assert await asyncio.to_thread(loop.resolve_approval, request.request_id, True) is True
    result = await handle
    assert result.status is TurnStatus.COMPLETED
    assert [e.content for e in of(sub.drain_nowait(), K.TOOL_EXEC_END)] == ["wrote a"]
