"""Hooks: priorities, the six actions, timeouts and failures, observers, approvals, rules."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HookAction,
    HookDecision,
    HumanApprover,
    Message,
    Permissions,
    Reply,
    ScriptedProvider,
    Timeouts,
    TurnStatus,
    tool,
)
from tests.conftest import (
    assert_history_consistent,
    assert_one_terminal_per_call,
    of,
    wait_for,
)

K = EventKind
ran: list[str] = []


@tool(read_only=True)
def look(path: str) -> str:
    """Look at a path."""
    ran.append(f"look {path}")
    return f"saw {path}"


@tool
def write(path: str, text: str = "") -> str:
    """Write a path."""
    ran.append(f"write {path}")
    return f"wrote {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    ran.clear()


def loop_with(script, *, timeouts: Timeouts | None = None, permissions=None, **kw):
    provider = ScriptedProvider(script)
    loop = AgentLoop(Agent(provider=provider, tools=[look, write], **kw), timeouts=timeouts,
                     permissions=permissions)
    return loop, provider, loop.subscribe(buffer=10_000)


async def test_priority_order_and_ties_in_registration_order() -> None:
    order: list[str] = []

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def before_llm(self, ctx) -> None:
            order.append(self.name)

    loop, _, _ = loop_with([Reply(text="ok")])
    loop.register_hook(Named("low"), priority=-5)
    loop.register_hook(Named("high-a"), priority=10)
    loop.register_hook(Named("mid"))
    loop.register_hook(Named("high-b"), priority=10)
    await loop.run_turn("go", session_id="s")
    assert order == ["high-a", "high-b", "mid", "low"]


async def test_before_llm_modify_messages_model_tools() -> None:
    class Rewrite:
        async def before_llm(self, ctx):
            assert ctx.turn_id and ctx.session_id == "s"
            msgs = [*ctx.request.messages[:-1], Message("user", "rewritten")]
            return HookDecision(HookAction.MODIFY, messages=msgs, model="other-model", tools=["look"])

    class Sees:
        def before_llm(self, ctx) -> None:
            seen.append(ctx.request.messages[-1].content)

    seen: list[str] = []
    loop, provider, sub = loop_with([Reply(text="ok")])
    loop.register_hook(Rewrite(), priority=1)
    loop.register_hook(Sees())
    await loop.run_turn("original", session_id="s")
    request = provider.requests[0]
    assert request.messages[-1].content == "rewritten" and request.model == "other-model"
    assert [t.name for t in request.tools] == ["look"]
    assert seen == ["rewritten"]  # later hooks see earlier changes
    assert of(sub.drain_nowait(), K.LLM_REQUEST)[0].model == "other-model"
    assert loop.session_messages("s")[0].content == "original"  # the session is untouched


async def test_after_llm_modify_replaces_reply() -> None:
    class Replace:
        def after_llm(self, ctx):
            if ctx.response.text == "raw":
                return HookDecision(HookAction.MODIFY, tool_calls=[("look", {"path": "x"})], text="")
            return None

    loop, _, _ = loop_with([Reply(text="raw"), Reply(text="done")])
    loop.register_hook(Replace())
    result = await loop.run_turn("go", session_id="s")
    assert ran == ["look x"] and result.text == "done"
    assert_history_consistent(loop.session_messages("s"))


async def test_before_tool_modify_deny_respond() -> None:
    class Gate:
        def before_tool(self, ctx):
            path = ctx.call.arguments.get("path")
            if path == "secret":
                return HookDecision(HookAction.DENY_TOOL, reason="secrets are off limits")
            if path == "cached":
                return HookDecision(HookAction.RESPOND, result="from cache")
            if path == "relative":
                return HookDecision(HookAction.MODIFY, arguments={"path": "/abs/relative"})
            return None

    script = [Reply(tool_calls=[("look", {"path": "secret"}), ("look", {"path": "cached"}),
                                ("look", {"path": "relative"})]), Reply(text="ok")]
    loop, _, sub = loop_with(script)
    loop.register_hook(Gate())
    await loop.run_turn("go", session_id="s")
    assert ran == ["look /abs/relative"]
    events = sub.drain_nowait()
    skipped = of(events, K.TOOL_EXEC_SKIPPED)
    assert [(s.reason, s.detail) for s in skipped] == [("denied", "secrets are off limits")]
    results = [m.content for m in loop.session_messages("s") if m.role == "tool"]
    assert "denied" in results[0] and "secrets are off limits" in results[0]
    assert results[1] == "from cache" and results[2] == "saw /abs/relative"
    assert of(events, K.TOOL_EXEC_START)[-1].arguments == {"path": "/abs/relative"}
    assert_one_terminal_per_call(events)


async def test_after_tool_modify_result() -> None:
    class Redact:
        def after_tool(self, ctx):
            return HookDecision(HookAction.MODIFY, result=ctx.result.content.replace("x", "*"))

    loop, _, sub = loop_with([Reply(tool_calls=[("look", {"path": "xx"})]), Reply(text="ok")])
    loop.register_hook(Redact())
    await loop.run_turn("go", session_id="s")
    assert [m.content for m in loop.session_messages("s") if m.role == "tool"] == ["saw **"]
    assert of(sub.drain_nowait(), K.TOOL_EXEC_END)[0].content == "saw **"


async def test_abort_turn_keeps_consistent_prefix_and_makes_no_more_calls() -> None:
    class Stop:
        def before_tool(self, ctx):
            if ctx.call.arguments["path"] == "b":
                return HookDecision(HookAction.ABORT_TURN, reason="policy")
            return None

    script = [Reply(tool_calls=[("write", {"path": "a"}), ("write", {"path": "b"}), ("write", {"path": "c"})]),
              Reply(text="never")]
    loop, provider, sub = loop_with(script)
    loop.register_hook(Stop())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ABORTED
    assert len(provider.requests) == 1 and ran == ["write a"]
    saved = loop.session_messages("s")
    assert [m.role for m in saved] == ["user", "assistant", "tool", "tool", "tool"]
    assert_history_consistent(saved)
    events = sub.drain_nowait()
    assert_one_terminal_per_call(events)
    assert of(events, K.INTERRUPT_RECEIVED)[0].mode == "abort_turn"


async def test_hard_abort_from_hook_rolls_back() -> None:
    class Kill:
        def after_llm(self, ctx):
            return HookDecision(HookAction.HARD_ABORT)

    loop, _, sub = loop_with([Reply(text="nope")])
    loop.register_hook(Kill())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.ABORTED and loop.session_messages("s") == []
    assert of(sub.drain_nowait(), K.INTERRUPT_RECEIVED)[0].mode == "hard"


async def test_hanging_and_raising_hooks_are_contained() -> None:
    class Hangs:
        async def before_llm(self, ctx) -> None:
            await asyncio.Event().wait()

    class IgnoresCancel:
        async def before_tool(self, ctx) -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)

    class SyncHangs:
        def after_tool(self, ctx) -> None:
            time.sleep(0.3)

    class Raises:
        def after_llm(self, ctx) -> None:
            raise ValueError("bad hook")

    class Garbage:
        def before_llm(self, ctx) -> int:
            return 42

    loop, _, sub = loop_with([Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="fine")],
                             timeouts=Timeouts(hook=0.05))
    for hook in (Hangs(), IgnoresCancel(), SyncHangs(), Raises(), Garbage()):
        loop.register_hook(hook)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "fine"
    errors = [e.message for e in of(sub.drain_nowait(), K.ERROR)]
    assert any("Hangs.before_llm timed out after 0.05 s" in m for m in errors)
    assert any("IgnoresCancel.before_tool timed out" in m for m in errors)
    assert any("SyncHangs.after_tool timed out" in m for m in errors)
    assert any("Raises.after_llm raised ValueError: bad hook" in m for m in errors)
    assert any("Garbage.before_llm returned int" in m for m in errors)
    await loop.aclose()


async def test_per_hook_timeout_overrides_default() -> None:
    class Slow:
        async def before_llm(self, ctx) -> None:
            await asyncio.sleep(0.1)
            seen.append("finished")

    seen: list[str] = []
    loop, _, _ = loop_with([Reply(text="ok")], timeouts=Timeouts(hook=0.01))
    loop.register_hook(Slow(), timeout=1.0)
    await loop.run_turn("go", session_id="s")
    assert seen == ["finished"]


async def test_unregister() -> None:
    class Count:
        def before_llm(self, ctx) -> None:
            calls.append(1)

    calls: list[int] = []
    loop, _, _ = loop_with([Reply(text="a"), Reply(text="b")])
    unregister = loop.register_hook(Count())
    await loop.run_turn("one", session_id="s")
    assert unregister() is True and unregister() is False
    await loop.run_turn("two", session_id="s")
    assert calls == [1]


async def test_observers_never_slow_the_loop() -> None:
    release, saw_end = asyncio.Event(), asyncio.Event()
    received: list[EventKind] = []

    class SlowObserver:
        async def on_event(self, event) -> None:
            received.append(event.kind)
            if event.kind is K.TURN_END:
                saw_end.set()
            await release.wait()

    loop, _, _ = loop_with([Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="ok")],
                           timeouts=Timeouts(hook=5))
    loop.register_hook(SlowObserver())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    # The turn ended while the observer was still stuck on the first event: had the loop
    # waited for it, the observer would have heard more (each wait times out after 5 s).
    assert received == [K.TURN_START]
    release.set()
    await asyncio.wait_for(saw_end.wait(), 5)  # it caught up, in order, missing nothing
    assert received[0] is K.TURN_START and received[-1] is K.TURN_END
    await loop.aclose()


async def test_register_hook_rejects_non_hooks() -> None:
    loop, _, _ = loop_with([])
    with pytest.raises(TypeError, match="implements no hook method"):
        loop.register_hook(object())
    with pytest.raises(TypeError):
        loop.register_hook(HumanApprover(), priority="high")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        loop.register_hook(HumanApprover(), timeout=-1)


# -- approvals -------------------------------------------------------------------------------


async def test_approvers_asked_for_mutating_calls_only() -> None:
    asked: list[str] = []

    class Approver:
        def approve_tool(self, ctx) -> bool:
            asked.append(ctx.call.name)
            return ctx.call.arguments["path"] != "no"

    script = [Reply(tool_calls=[("look", {"path": "a"}), ("write", {"path": "yes"}), ("write", {"path": "no"})]),
              Reply(text="ok")]
    loop, _, sub = loop_with(script)
    loop.register_hook(Approver())
    await loop.run_turn("go", session_id="s")
    assert asked == ["write", "write"]
    assert ran == ["look a", "write yes"]
    skipped = of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)
    assert [(s.reason, s.detail) for s in skipped] == [("denied", "denied by Approver")]


async def test_every_approver_must_agree() -> None:
    class Yes:
        def approve_tool(self, ctx) -> bool:
            return True

    class No:
        def approve_tool(self, ctx) -> HookDecision:
            return HookDecision(HookAction.DENY_TOOL, reason="not today")

    loop, _, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")])
    loop.register_hook(Yes(), priority=1)
    loop.register_hook(No())
    await loop.run_turn("go", session_id="s")
    assert ran == [] and of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)[0].detail == "not today"


async def test_approver_timeout_and_exception_deny() -> None:
    class Slow:
        async def approve_tool(self, ctx) -> bool:
            await asyncio.sleep(10)
            return True

    class Broken:
        def approve_tool(self, ctx) -> bool:
            raise RuntimeError("approver bug")

    for hook, expect in ((Slow(), "timed out"), (Broken(), "approver bug")):
        loop, _, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")],
                                 timeouts=Timeouts(approval=0.05))
        loop.register_hook(hook)
        await loop.run_turn("go", session_id="s")
        events = sub.drain_nowait()
        assert ran == []
        assert expect in of(events, K.TOOL_EXEC_SKIPPED)[0].detail
        assert any(expect in e.message for e in of(events, K.ERROR))
        await loop.aclose()


async def test_human_approval_round_trip() -> None:
    script = [Reply(tool_calls=[("write", {"path": "ok"}), ("write", {"path": "bad"})]), Reply(text="done")]
    loop, _, sub = loop_with(script)
    loop.register_hook(HumanApprover())
    handle = loop.start_turn("go", session_id="s")
    first = await wait_for(sub, K.APPROVAL_REQUESTED)
    assert first.tool_name == "write" and first.arguments == {"path": "ok"}
    assert loop.resolve_approval(first.request_id, True) is True
    assert loop.resolve_approval(first.request_id, True) is False  # already answered
    second = await wait_for(sub, K.APPROVAL_REQUESTED)
    # answered from another thread, as a UI would
    assert await asyncio.to_thread(loop.resolve_approval, second.request_id, False, "looks wrong")
    await handle
    assert ran == ["write ok"]
    events = sub.drain_nowait()
    resolved = of(events, K.APPROVAL_RESOLVED)
    assert [(r.approved, r.reason) for r in resolved] == [(False, "looks wrong")]
    assert of(events, K.TOOL_EXEC_SKIPPED)[0].detail == "looks wrong"
    assert loop.resolve_approval("approval_999", True) is False


async def test_human_approval_times_out_to_denial_with_resolved_event() -> None:
    loop, _, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")],
                             timeouts=Timeouts(approval=0.05))
    loop.register_hook(HumanApprover())
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    resolved = of(events, K.APPROVAL_RESOLVED)
    assert [(r.approved, r.reason) for r in resolved] == [(False, "timed out")]
    skipped = of(events, K.TOOL_EXEC_SKIPPED)[0]
    assert resolved[0].seq < skipped.seq and ran == []


async def test_hard_abort_while_waiting_for_approval() -> None:
    loop, _, sub = loop_with([Reply(tool_calls=[("write", {"path": "a"})])])
    loop.register_hook(HumanApprover())
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.APPROVAL_REQUESTED)
    loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED and ran == []
    events = sub.drain_nowait()
    assert_one_terminal_per_call_after(events)


def assert_one_terminal_per_call_after(events) -> None:
    terminal = [e for e in events if e.kind in (K.TOOL_EXEC_END, K.TOOL_EXEC_SKIPPED)]
    assert len(terminal) == 1 and terminal[0].kind is K.TOOL_EXEC_SKIPPED


async def test_dry_run_does_not_ask() -> None:
    asked: list[str] = []

    class Approver:
        def approve_tool(self, ctx) -> bool:
            asked.append(ctx.call.name)
            return True

    loop, _, _ = loop_with([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="ok")], dry_run=True)
    loop.register_hook(Approver())
    await loop.run_turn("go", session_id="s")
    assert asked == [] and ran == []


async def test_permission_rules() -> None:
    asked: list[str] = []

    class Approver:
        def approve_tool(self, ctx) -> bool:
            asked.append(ctx.call.arguments["path"])
            return True

    perms = Permissions([("allow", "write(src/*)"), ("deny", "write(src/secret*)"), ("ask", "look(etc/*)")])
    calls = [("write", {"path": "src/a.py"}), ("write", {"path": "src/secret.txt"}),
             ("write", {"path": "docs/x"}), ("look", {"path": "etc/passwd"}), ("look", {"path": "readme"})]
    loop, _, sub = loop_with([Reply(tool_calls=calls), Reply(text="ok")], permissions=perms)
    loop.register_hook(Approver())
    await loop.run_turn("go", session_id="s")
    assert asked == ["docs/x", "etc/passwd"]
    assert ran[:2] == ["write src/a.py", "write docs/x"]
    assert sorted(ran[2:]) == ["look etc/passwd", "look readme"]  # one parallel group
    skipped = of(sub.drain_nowait(), K.TOOL_EXEC_SKIPPED)
    assert skipped[0].reason == "denied" and "deny: write(src/secret*)" in skipped[0].detail


def test_permission_rule_parsing_errors() -> None:
    perms = Permissions()
    with pytest.raises(ValueError, match="allow, ask or deny"):
        perms.add("maybe", "write")
    with pytest.raises(ValueError, match="bad permission pattern"):
        perms.add("allow", "write(")
    with pytest.raises(TypeError):
        Permissions(["allow write"])  # type: ignore[list-item]


async def test_control_from_inside_a_tool_thread_and_a_hook() -> None:
    holder: dict[str, AgentLoop] = {}

    @tool
    def steer_myself() -> str:
        """Steers its own turn from its worker thread."""
        assert holder["loop"].inject_steering("note from the tool", "s")
        return "ok"

    class Interrupter:
        def before_llm(self, ctx) -> None:
            if ctx.iteration == 2:
                assert threading.current_thread() is not threading.main_thread()
                holder["loop"].interrupt_graceful("s")

    provider = ScriptedProvider([Reply(tool_calls=[("steer_myself", {})]), Reply(text="a"), Reply(text="summary")])
    loop = AgentLoop(Agent(provider=provider, tools=[steer_myself]))
    holder["loop"] = loop
    loop.register_hook(Interrupter())
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.INTERRUPTED
    assert provider.requests[1].messages[-1].content == "note from the tool"


async def test_hook_errors_are_reported_on_their_own_turn() -> None:
    class SlowForS2:
        async def before_llm(self, ctx) -> None:
            if ctx.session_id == "s2":
                await asyncio.sleep(1)

    provider = ScriptedProvider([Reply(text="a", delay=0.02), Reply(text="b")])
    loop = AgentLoop(Agent(provider=provider), timeouts=Timeouts(hook=0.05))
    sub = loop.subscribe(kinds=[K.ERROR])
    loop.register_hook(SlowForS2())
    h1 = loop.start_turn("one", session_id="s1")
    h2 = loop.start_turn("two", session_id="s2")
    await h1, await h2
    errors = sub.drain_nowait()
    assert len(errors) == 1
    assert errors[0].session_id == "s2" and errors[0].turn_id == h2.turn_id
    await loop.aclose()


async def test_an_always_failing_observer_does_not_feed_on_itself() -> None:
    seen: list[EventKind] = []

    class Broken:
        def on_event(self, event) -> None:
            seen.append(event.kind)
            raise RuntimeError("observer bug")

    loop, _, sub = loop_with([Reply(text="ok")])
    loop.register_hook(Broken())
    await loop.run_turn("go", session_id="s")
    for _ in range(200):
        await asyncio.sleep(0.005)
        if seen and seen[-1] is K.ERROR and seen.count(K.ERROR) == len([k for k in seen if k is not K.ERROR]):
            break
    await asyncio.sleep(0.05)
    errors = of(sub.drain_nowait(), K.ERROR)
    observed = [k for k in seen if k is not K.ERROR]
    assert len(errors) == len(observed) and all(e.source == "observer" for e in errors)
    assert seen.count(K.ERROR) == len(errors)  # it saw its reports, and they made no more
    await loop.aclose()
