"""``SessionDriver`` (the policy the CLI and the web page share) and ``AgentLoop.run(bus)``."""

from __future__ import annotations

import asyncio

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    HumanApprover,
    InboundMessage,
    InProcessBus,
    OutboundReply,
    Reply,
    ScriptedProvider,
    SessionBusyError,
    SessionDriver,
    TurnStatus,
    tool,
)
from steerable.errors import CheckpointError
from tests.conftest import wait_for
from tests.test_send import contents, echo, gated, make

K = EventKind


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_first_press_is_graceful_a_second_on_the_same_turn_aborts_and_withdraws() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})])], tools)
    clock = Clock()
    driver = SessionDriver(loop, "s", clock=clock)
    sub = loop.subscribe(buffer=1000)
    first = driver.send("go")
    await wait_for(sub, K.TOOL_EXEC_START)
    queued = driver.send("after", "follow_up")
    assert driver.press_interrupt().action == "graceful"
    clock.now += 60  # long after: still the same turn, so this press aborts
    press = driver.press_interrupt()
    assert press.action == "hard" and press.dropped == ("after",)
    assert (await first).status is TurnStatus.ABORTED
    assert queued.done()
    assert driver.press_interrupt().action == "idle"
    await loop.aclose()


async def test_a_press_that_cannot_be_graceful_arms_and_the_next_within_the_window_aborts() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), Reply(text="x", delay=5)], tools)
    clock = Clock()
    driver = SessionDriver(loop, "s", clock=clock)
    sub = loop.subscribe(buffer=1000)
    first = driver.send("go")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.interrupt_graceful("s")  # someone else already asked: graceful is refused now
    assert driver.press_interrupt().action == "armed"
    clock.now += 1.0
    assert driver.press_interrupt().action == "hard"
    assert (await first).status is TurnStatus.ABORTED
    await loop.aclose()


async def test_approvals_are_tracked_answered_and_denied_by_an_interrupt() -> None:
    @tool
    async def write(path: str) -> str:
        """Write."""
        return "written " + path

    provider = ScriptedProvider([Reply(tool_calls=[("write", {"path": "a"})]),
                                 Reply(tool_calls=[("write", {"path": "b"})]), Reply(text="done")])
    loop = AgentLoop(Agent(name="t", provider=provider, tools=[write]))
    loop.register_hook(HumanApprover())
    driver = SessionDriver(loop, "s")
    events = driver.events()
    results = []
    driver.on_result = results.append
    driver.send("write two files")

    async def until(kind):
        async for event in events:
            if event.kind is kind:
                return event
        raise AssertionError("closed")

    asked = await until(K.APPROVAL_REQUESTED)
    assert [a.request_id for a in driver.open_approvals] == [asked.request_id]
    assert driver.answer(True, allow=["write(b)"])  # and allow the next one without asking
    end = await until(K.TURN_END)
    assert end.status is TurnStatus.COMPLETED and driver.open_approvals == []
    assert [str(r) for r in loop.permissions.rules] == ["allow: write(b) (session s)"]
    await driver.wait_idle()
    assert [r.status for r in results] == [TurnStatus.COMPLETED]
    driver.close()
    await loop.aclose()


async def test_an_always_answer_holds_in_its_session_only() -> None:
    @tool
    async def write(path: str) -> str:
        """Write."""
        return "written " + path

    provider = ScriptedProvider([Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="1"),
                                 Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="2"),
                                 Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="3")])
    loop = AgentLoop(Agent(name="t", provider=provider, tools=[write]))
    loop.register_hook(HumanApprover())
    driver = SessionDriver(loop, "s1")
    sub = loop.subscribe(buffer=1000)
    asked = []

    async def answer_always() -> None:
        async for event in sub:
            if event.kind is K.APPROVAL_REQUESTED:
                asked.append(event.session_id)
                driver.answer(True, request_id=event.request_id, allow=["write"])

    answering = asyncio.ensure_future(answer_always())
    assert (await driver.send("one")).status is TurnStatus.COMPLETED  # asked, answered always
    assert (await driver.send("two")).status is TurnStatus.COMPLETED  # allowed by the rule
    driver.session_id = "s2"  # chat's /new
    assert (await driver.send("three")).status is TurnStatus.COMPLETED  # asked again
    assert asked == ["s1", "s2"]
    answering.cancel()
    driver.close()
    await loop.aclose()


async def test_run_bus_answers_every_message_and_bounds_working_sessions() -> None:
    loop, _ = make([lambda r: Reply(text=echo(r).text, delay=0.02)] * 12 + [echo])
    sub = loop.subscribe(buffer=10_000)
    bus = InProcessBus()
    runner = asyncio.create_task(loop.run(bus, max_sessions=2))
    for i in range(9):
        await bus.publish(InboundMessage(f"s{i % 4}", f"m{i}", "follow_up", message_id=str(i)))
    bus.close()
    await runner
    replies: list[OutboundReply] = []
    events = 0
    while not bus._outbound.empty():
        item = await bus.receive()
        if isinstance(item, OutboundReply):
            replies.append(item)
        else:
            events += 1
    assert sorted(int(r.message_id) for r in replies) == list(range(9))
    assert all(r.status is TurnStatus.COMPLETED and r.text == f"re: m{r.message_id}"
               for r in replies)
    assert events > 0  # events went outbound too
    running: set[str] = set()
    most = 0
    for event in sub.drain_nowait():
        if event.kind is K.TURN_START:
            running.add(event.session_id)
        elif event.kind is K.TURN_END:
            running.discard(event.session_id)
        most = max(most, len(running))
    assert most == 2
    for s in range(4):  # per session, in arrival order
        mine = [m.content for m in loop.session_messages(f"s{s}") if m.role == "user"]
        assert mine == [f"m{i}" for i in range(9) if i % 4 == s]
    await loop.aclose()


async def test_run_bus_rejects_with_a_reply() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools)
    sub = loop.subscribe(buffer=1000)
    bus = InProcessBus()
    runner = asyncio.create_task(loop.run(bus, forward_events=False))
    await bus.publish(InboundMessage("s", "first", message_id="1"))
    await wait_for(sub, K.TOOL_EXEC_START)
    await bus.publish(InboundMessage("s", "second", "reject", message_id="2"))
    rejected = await bus.receive()
    assert isinstance(rejected, OutboundReply) and rejected.action == "rejected"
    assert rejected.message_id == "2" and "busy" in (rejected.error or "")
    gate.set()
    done = await bus.receive()
    assert isinstance(done, OutboundReply) and done.action == "started" and done.message_id == "1"
    bus.close()
    await runner
    await loop.aclose()


async def test_run_bus_answers_failed_when_a_pending_checkpoint_refuses_a_queued_turn(
        tmp_path) -> None:
    from steerable import CancelMode
    from steerable.storage import JSONLSessionStore

    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools,
                   store=JSONLSessionStore(tmp_path))
    sub = loop.subscribe(buffer=1000)
    bus = InProcessBus()
    runner = asyncio.create_task(loop.run(bus, forward_events=False))
    await bus.publish(InboundMessage("s", "first", message_id="1"))
    await wait_for(sub, K.TOOL_EXEC_START)
    await bus.publish(InboundMessage("s", "second", "follow_up", message_id="2"))
    await wait_for(sub, K.FOLLOW_UP_QUEUED)
    assert loop.cancel("s", CancelMode.AFTER_TOOLS) is not None
    gate.set()
    replies = {}
    for _ in range(2):
        reply = await asyncio.wait_for(bus.receive(), 10)
        replies[reply.message_id] = reply
    assert replies["1"].status is TurnStatus.CANCELLED
    assert replies["2"].action == "failed" and "checkpoint" in (replies["2"].error or "").lower()
    bus.close()
    await runner
    await loop.aclose()


async def test_resume_runs_the_pending_turn_then_the_follow_ups_it_hands_back() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo, echo], tools)
    results: list[TurnStatus] = []
    driver = SessionDriver(loop, "s", on_result=lambda r: results.append(r.status))
    assert driver.pending() is None and driver.resume() is None and not driver.discard()
    sub = loop.subscribe(buffer=1000)
    first = driver.send("go")
    await wait_for(sub, K.TOOL_EXEC_START)
    assert loop.inject_follow_up("and then this", "s")
    with pytest.raises(SessionBusyError):
        driver.discard()  # the running turn's checkpoint is its own
    loop.cancel("s", CancelMode.AFTER_TOOLS)
    gate.set()
    assert (await first).status is TurnStatus.CANCELLED
    pending = driver.pending()
    assert pending is not None and pending.follow_ups == ("and then this",)
    handle = driver.resume()
    assert handle is not None and handle.turn_id != pending.turn_id
    await driver.wait_idle()
    assert driver.pending() is None
    assert contents(loop, "s") == ["go", "re: go", "and then this", "re: and then this"]
    assert results == [TurnStatus.CANCELLED, TurnStatus.COMPLETED, TurnStatus.COMPLETED]
    await loop.aclose()


async def test_discard_drops_the_pending_turn_and_the_session_takes_messages_again() -> None:
    tools, gate = gated()
    loop, _ = make([Reply(tool_calls=[("work", {"step": "a"})]), echo], tools)
    driver = SessionDriver(loop, "s")
    sub = loop.subscribe(buffer=1000)
    first = driver.send("doomed")
    await wait_for(sub, K.TOOL_EXEC_START)
    loop.cancel("s", CancelMode.AFTER_TOOLS)
    gate.set()
    await first
    with pytest.raises(CheckpointError):
        driver.send("refused")
    assert driver.discard() and driver.pending() is None and not driver.discard()
    await driver.send("fresh")
    assert contents(loop, "s") == ["fresh", "re: fresh"]
    await loop.aclose()
