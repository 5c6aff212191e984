"""Every message given to the loop has an id, a lifecycle and exactly one terminal state."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    CancelMode,
    EventKind,
    Limits,
    MessageReceipt,
    MessageState,
    QueuedTurn,
    Reply,
    ScriptedProvider,
    TurnHandle,
    TurnStatus,
    tool,
)
from steerable.storage import JSONLSessionStore
from tests.conftest import assert_one_terminal_each, make_loop, message_fates, of, wait_for

K = EventKind
S = MessageState


def gated() -> tuple[list, asyncio.Event]:
    gate = asyncio.Event()

    @tool
    async def step(name: str) -> str:
        """A step that waits for the gate."""
        await gate.wait()
        return name

    return [step], gate


def gates() -> tuple[list, dict[str, asyncio.Event]]:
    """A step per name, each waiting for its own gate."""
    by_name: dict[str, asyncio.Event] = {}

    @tool
    async def step(name: str) -> str:
        """A step that waits for its gate."""
        await by_name.setdefault(name, asyncio.Event()).wait()
        return name

    return [step], by_name


async def test_a_steer_is_queued_then_delivered_by_the_request_that_carries_it() -> None:
    tools, gate = gated()
    loop, provider, sub = make_loop(
        [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="done")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    r = loop.inject_steering("use b", session_id="s")
    assert isinstance(r, MessageReceipt) and r and r.state is S.QUEUED and r.kind == "steer"
    assert r.message_id.startswith("msg_") and r.turn_id == handle.turn_id
    assert [m.message_id for m in loop.queued_messages("s")] == [r.message_id]
    gate.set()
    await handle
    assert r.state is S.DELIVERED and loop.queued_messages("s") == []
    events = seen + sub.drain_nowait()
    delivered = [e for e in of(events, K.MESSAGE_STATE) if e.message_id == r.message_id][-1]
    request = next(e for e in events if e.seq == delivered.request_seq)
    assert request.kind is K.LLM_REQUEST and request.iteration == 2
    assert delivered.turn_id == handle.turn_id
    assert provider.requests[1].messages[-1].content == "use b"
    fates = assert_one_terminal_each(events)
    assert fates[r.message_id] == "delivered"
    assert fates[handle.message_id] == "delivered"  # the turn's input, by its first request


async def test_refused_messages_have_falsy_rejected_receipts_with_a_reason() -> None:
    loop, _, sub = make_loop([Reply(text="x", delay=0.05)])
    nobody = loop.inject_steering("hello?", session_id="s")
    assert not nobody and nobody.state is S.REJECTED and "no turn" in nobody.detail
    loop2 = AgentLoop(Agent(provider=ScriptedProvider([Reply(text="x", delay=0.05)])),
                      limits=Limits(steering_queue=1))
    sub2 = loop2.subscribe()
    handle = loop2.start_turn("go", session_id="s")
    assert loop2.inject_steering("one", "s")
    full = loop2.inject_steering("two", "s")
    assert not full and full.state is S.REJECTED and "full" in full.detail
    await handle
    events = sub2.drain_nowait()
    assert message_fates(events)[full.message_id] == ["rejected"]
    assert_one_terminal_each(events)
    assert message_fates(sub.drain_nowait())[nobody.message_id] == ["rejected"]


async def test_a_queued_steer_can_be_revoked_or_edited_until_it_is_taken_in() -> None:
    tools, gate = gated()
    loop, provider, sub = make_loop(
        [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="done")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    gone = loop.inject_steering("forget this", "s")
    kept = loop.inject_steering("typo", "s")
    assert loop.revoke_message(gone.message_id) and gone.state is S.REVOKED
    assert not loop.revoke_message(gone.message_id)  # once only
    assert loop.edit_message(kept.message_id, "fixed")
    assert [(m.text, m.state) for m in loop.queued_messages("s")] == [("fixed", S.QUEUED)]
    assert not loop.edit_message(gone.message_id, "again")
    gate.set()
    await handle
    assert not loop.revoke_message(kept.message_id) and not loop.edit_message(kept.message_id, "z")
    texts = [m.content for m in provider.requests[1].messages]
    assert "fixed" in texts and "typo" not in texts and "forget this" not in texts
    events = seen + sub.drain_nowait()
    assert message_fates(events)[kept.message_id] == ["queued", "queued", "delivered"]
    assert assert_one_terminal_each(events)[gone.message_id] == "revoked"
    assert not loop.revoke_message("msg_unknown")


async def test_follow_ups_are_returned_with_their_ids_and_rerun_as_new_linked_messages() -> None:
    loop, provider, sub = make_loop([Reply(text="first", delay=0.05), Reply(text="second")])
    handle = loop.send("go", "s")
    assert isinstance(handle, TurnHandle) and handle.message_id and handle.state is S.QUEUED
    f = loop.inject_follow_up("then this", "s")
    assert f and f.kind == "follow_up"
    result = await handle
    assert result.follow_ups == ("then this",) and result.follow_up_ids == (f.message_id,)
    assert f.state is S.RETURNED
    await loop.wait_session("s")
    events = sub.drain_nowait()
    rerun = [e for e in of(events, K.MESSAGE_STATE) if e.origin_id == f.message_id]
    assert rerun and rerun[0].message_kind == "send" and rerun[-1].state is S.DELIVERED
    assert provider.requests[1].messages[-1].content == "then this"
    assert assert_one_terminal_each(events)[f.message_id] == "returned"


async def test_messages_send_queued_are_listed_revoked_and_edited() -> None:
    loop, provider, sub = make_loop([Reply(text="a", delay=0.1), Reply(text="b")])
    first = loop.send("one", "s")
    gone = loop.send("two", "s", "follow_up")
    edited = loop.send("thre", "s", "follow_up")
    assert isinstance(gone, QueuedTurn) and gone.message_id and gone.state is S.QUEUED
    listed = loop.queued_messages("s")
    assert [m.text for m in listed] == ["one", "two", "thre"]
    assert [m.kind for m in listed] == ["send"] * 3
    assert loop.revoke_message(gone.message_id)
    assert loop.edit_message(edited.message_id, "three")
    with pytest.raises(RuntimeError, match="revoked"):
        await gone
    assert (await edited).status is TurnStatus.COMPLETED
    assert isinstance(first, TurnHandle)
    assert [r.messages[-1].content for r in provider.requests] == ["one", "three"]
    fates = assert_one_terminal_each(sub.drain_nowait())
    assert fates[gone.message_id] == "revoked" and fates[edited.message_id] == "delivered"
    assert edited.state is S.DELIVERED


async def test_a_graceful_interrupt_returns_pending_steering_with_its_id() -> None:
    tools, gate = gated()
    loop, _, sub = make_loop(
        [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="summary")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    s = loop.inject_steering("late", "s")
    f = loop.inject_follow_up("later", "s")
    assert loop.interrupt_graceful("s")
    gate.set()
    result = await handle
    assert result.status is TurnStatus.INTERRUPTED
    assert [(q.kind, q.message_id) for q in result.unprocessed] == [
        ("steering", s.message_id), ("follow_up", f.message_id)]
    assert s.state is S.RETURNED and f.state is S.RETURNED
    assert_one_terminal_each(seen + sub.drain_nowait())


async def test_a_hard_abort_hands_back_delivered_steering_which_stays_delivered() -> None:
    tools, gate = gates()
    loop, _, sub = make_loop(
        [Reply(tool_calls=[("step", {"name": "a"})]),
         Reply(tool_calls=[("step", {"name": "b"})]), Reply(text="never")], tools=tools)
    handle = loop.start_turn("go", session_id="s")
    seen: list = []
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    s = loop.inject_steering("steer", "s")
    gate["a"].set()
    await wait_for(sub, K.LLM_REQUEST, seen=seen)
    await wait_for(sub, K.TOOL_EXEC_START, seen=seen)
    queued = loop.inject_steering("not yet", "s")
    assert loop.interrupt_hard("s")
    result = await handle
    assert result.status is TurnStatus.ABORTED
    assert [(q.text, q.message_id) for q in result.unprocessed] == [
        ("steer", s.message_id), ("not yet", queued.message_id)]
    assert s.state is S.DELIVERED and queued.state is S.RETURNED
    fates = assert_one_terminal_each(seen + sub.drain_nowait())
    assert fates[handle.message_id] == "delivered"


async def test_a_turn_aborted_before_its_first_call_returns_its_input() -> None:
    loop, _, sub = make_loop([Reply(text="never")])
    handle = loop.start_turn("go", session_id="s")
    assert loop.interrupt_hard("s")
    assert (await handle).status is TurnStatus.ABORTED
    assert handle.state is S.RETURNED
    assert assert_one_terminal_each(sub.drain_nowait()) == {handle.message_id: "returned"}


async def test_a_steer_is_in_the_store_before_the_call_returns(tmp_path: Path) -> None:
    tools, gate = gated()
    store = JSONLSessionStore(tmp_path)
    loop = AgentLoop(Agent(provider=ScriptedProvider(
        [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="ok")]), tools=tools),
        store=store)
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    r = loop.inject_steering("durable", "s")
    f = loop.inject_follow_up("after", "s")
    cp = JSONLSessionStore(tmp_path).load_checkpoint("s")  # what another process would read
    assert cp is not None and cp.steering == ("durable",) and cp.steering_ids == (r.message_id,)
    assert cp.follow_up_ids == (f.message_id,) and cp.stage == "tools"
    assert loop.revoke_message(f.message_id)
    assert JSONLSessionStore(tmp_path).load_checkpoint("s").follow_ups == ()  # type: ignore[union-attr]
    assert loop.edit_message(r.message_id, "durable!")
    assert JSONLSessionStore(tmp_path).load_checkpoint("s").steering == ("durable!",)  # type: ignore[union-attr]
    gate.set()
    await handle
    await loop.aclose()


async def test_a_cancelled_turn_keeps_its_queued_steer_and_resume_delivers_it_once(
        tmp_path: Path) -> None:
    tools, gate = gated()
    script = [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="ok")]
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider(script), tools=tools),
                     store=JSONLSessionStore(tmp_path))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, K.TOOL_EXEC_START)
    r = loop.inject_steering("after the cancel", "s")
    loop.cancel("s", CancelMode.AFTER_TOOLS)
    gate.set()
    result = await handle
    assert result.status is TurnStatus.CANCELLED and result.unprocessed == ()
    assert r.state is S.QUEUED and not loop.revoke_message(r.message_id)
    await loop.aclose()

    provider = ScriptedProvider([Reply(text="resumed")])
    again = AgentLoop(Agent(name="a", provider=provider, tools=tools),
                      store=JSONLSessionStore(tmp_path))
    sub2 = again.subscribe()
    assert [m.message_id for m in again.queued_messages("s")] == []
    resumed = again.resume("s")
    assert resumed is not None
    assert [m.message_id for m in again.queued_messages("s")] == [r.message_id]
    await resumed
    fates = assert_one_terminal_each(sub2.drain_nowait())
    assert fates == {r.message_id: "delivered"}
    sent = [m.content for m in provider.requests[0].messages]
    assert sent.count("after the cancel") == 1
    await again.aclose()


async def test_each_transition_says_why_in_its_detail() -> None:
    tools, gate = gated()
    loop = AgentLoop(Agent(provider=ScriptedProvider(
        [Reply(tool_calls=[("step", {"name": "a"})]), Reply(text="done"), Reply(text="next")]),
        tools=tools), limits=Limits(steering_queue=1))
    sub = loop.subscribe(kinds=[K.MESSAGE_STATE])
    handle = loop.send("go", "s")
    await asyncio.sleep(0.01)
    s1 = loop.inject_steering("one", "s")
    full = loop.inject_steering("two", "s")
    f1 = loop.inject_follow_up("later", "s")
    queued = loop.send("queued", "s", "follow_up")
    loop.edit_message(queued.message_id, "queued!")
    gate.set()
    result = await handle
    await loop.wait_session("s")
    nobody = loop.inject_steering("anyone?")
    details = [(e.message_id, e.state.value, e.detail) for e in sub.drain_nowait()]
    turn = handle.turn_id
    assert details[:6] == [
        (handle.message_id, "queued", "the input of a new turn"),
        (handle.message_id, "delivered", "in the context of an LLM request"),
        (s1.message_id, "queued", "steering"),
        (full.message_id, "rejected", "steering queue full (1 messages)"),
        (f1.message_id, "queued", "follow_up"),
        (queued.message_id, "queued", "waiting for a turn of its own"),
    ]
    assert (queued.message_id, "queued", "edited") in details
    assert (f1.message_id, "returned",
            f"turn {turn} ended (completed) before it was delivered") in details
    rerun = [d for d in details if d[2] == "a follow-up its turn handed back"]
    assert len(rerun) == 1 and result.follow_up_ids == (f1.message_id,)
    assert details[-1] == (nobody.message_id, "rejected", "no turn is active")
    assert nobody.session_id == "" and nobody.kind == "steer" and nobody.turn_id is None
    assert (s1.kind, f1.kind, s1.session_id, s1.turn_id, s1.parent_turn_id) == (
        "steer", "follow_up", "s", turn, None)
    await loop.aclose()


async def test_a_childs_steer_receipt_names_the_child_and_its_parent() -> None:
    from steerable import ToolContext

    child = Agent(name="kid", provider=ScriptedProvider([Reply(text="kid done", delay=0.2)]))
    receipts: list[Any] = []

    @tool(read_only=True)
    async def boss(ctx: ToolContext) -> str:
        """Start a child and steer it."""
        handle = ctx.spawn_subturn("kid", "job", deliver=False)
        receipts.append(handle.inject_steering("mind the tests"))
        receipts.append(handle.inject_follow_up("and then this"))
        return (await handle).text

    main = Agent(name="main", subagents=[child], tools=[boss],
                 provider=ScriptedProvider([Reply(tool_calls=[("boss", {})]), Reply(text="ok")]))
    loop = AgentLoop(main)
    handle = loop.start_turn("go", session_id="s")
    await handle
    steer_r, follow_r = receipts
    assert steer_r.kind == "steer" and follow_r.kind == "follow_up"
    assert steer_r.parent_turn_id == handle.turn_id == follow_r.parent_turn_id
    assert steer_r.turn_id == follow_r.turn_id != handle.turn_id
    assert steer_r.state is S.DELIVERED and follow_r.state is S.RETURNED
    await loop.aclose()


async def test_messages_that_interrupt_run_first_in_order_then_the_rest() -> None:
    loop, provider, _ = make_loop([Reply(text="a", delay=0.1), Reply(text="c"), Reply(text="d"),
                                   Reply(text="b")])
    loop.send("a", "s")
    b = loop.send("b", "s", "follow_up")
    c = loop.send("c", "s", "interrupt")
    d = loop.send("d", "s", "interrupt")
    assert [m.text for m in loop.queued_messages("s")] == ["a", "b", "c", "d"]
    assert loop.queued("s") == ["c", "d", "b"]
    await loop.wait_session("s")
    assert [r.messages[-1].content for r in provider.requests][1:] == ["c", "d", "b"]
    assert (b.action, c.action, d.action) == ("queued", "interrupted", "interrupted")
    assert c.state is S.DELIVERED
    await loop.aclose()


async def test_dropped_and_closed_messages_say_so() -> None:
    loop, _, sub = make_loop([Reply(text="a", delay=0.2)])
    loop.send("a", "s")
    dropped = loop.send("b", "s", "follow_up")
    assert loop.drop_queued("s") == ["b"]
    with pytest.raises(RuntimeError, match="withdrawn before its turn started"):
        await dropped
    closed = loop.send("c", "s", "follow_up")
    await loop.aclose()
    with pytest.raises(RuntimeError, match="loop closed"):
        await closed
    details = {e.message_id: (e.state.value, e.detail) for e in of(sub.drain_nowait(),
               K.MESSAGE_STATE) if e.state is not S.QUEUED}
    assert details[dropped.message_id] == ("revoked", "withdrawn by drop_queued")
    assert details[closed.message_id] == ("rejected", "the loop closed before its turn started")


async def test_reject_says_what_keeps_the_session_busy() -> None:
    from steerable import SessionBusyError

    loop, _, _ = make_loop([Reply(text="a", delay=0.1)])
    handle = loop.send("a", "s")
    with pytest.raises(SessionBusyError, match=f"turn {handle.turn_id} is running"):
        loop.send("b", "s", "reject")
    await handle
    await loop.aclose()


async def test_a_resumed_turn_keeps_its_creation_time_and_its_input_message() -> None:
    from steerable import InMemorySessionStore

    store = InMemorySessionStore()
    loop = AgentLoop(Agent(name="a", provider=ScriptedProvider([Reply(text="x")])), store=store)
    first = loop.start_turn("go", session_id="s")
    cp = loop.checkpoint("s")
    assert cp is not None and cp.created > 0 and cp.input_id == first.message_id
    loop.cancel("s", CancelMode.AFTER_MODEL)  # before its first call: stopped at once
    await first
    kept = loop.checkpoint("s")
    assert kept is not None and kept.created == cp.created and kept.iteration == 0
    await loop.aclose()
    again = AgentLoop(Agent(name="a", provider=ScriptedProvider([Reply(text="y")])),
                      store=store)
    resumed = again.resume("s")
    assert resumed is not None and resumed.message_id == first.message_id
    assert [(m.kind, m.text) for m in again.queued_messages("s")] == [("send", "go")]
    await resumed
    assert resumed.state is S.DELIVERED
    await again.aclose()


async def test_bad_input_to_the_message_calls_says_what_is_wrong() -> None:
    loop, _, _ = make_loop([Reply(text="x", delay=0.05)])
    handle = loop.start_turn("go", session_id="s")
    with pytest.raises(ValueError, match=r"^steering text must not be empty$"):
        handle.inject_steering("  ")
    with pytest.raises(ValueError, match=r"^follow-up text must not be empty$"):
        handle.inject_follow_up("")
    with pytest.raises(TypeError, match=r"^mode must be a CancelMode, got 'now'$"):
        handle.cancel("now")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^message text must not be empty$"):
        loop.edit_message("msg_x", " ")
    with pytest.raises(TypeError, match=r"^message_id must be a str, got int$"):
        loop.revoke_message(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^session_id must be a non-empty str, got ''$"):
        loop.queued_messages("")
    assert loop.queued("nobody") == [] and loop.busy("s") and not loop.busy("nobody")
    await handle
    assert not loop.busy("s")
    await loop.aclose()


async def test_reject_refuses_beside_a_turn_started_outside_send() -> None:
    from steerable import SessionBusyError

    loop, _, sub = make_loop([Reply(text="a", delay=0.05), Reply(text="b")])
    handle = loop.start_turn("a", session_id="s")
    with pytest.raises(SessionBusyError, match="is running"):
        loop.send("no", "s", "reject")
    urgent = loop.send("now", "s", "interrupt")
    await handle
    await loop.wait_session("s")
    queued_events = of(sub.drain_nowait(), K.FOLLOW_UP_QUEUED)
    assert queued_events == []  # an interrupting message is no follow-up of the turn
    assert urgent.state is S.DELIVERED
    await loop.aclose()


async def test_a_composite_turn_delivers_its_input_to_its_children() -> None:
    from steerable import SequentialAgent

    kid = Agent(name="kid", provider=ScriptedProvider([Reply(text="k")]))
    loop = AgentLoop(SequentialAgent(name="seq", agents=[kid]))
    sub = loop.subscribe(kinds=[K.MESSAGE_STATE])
    handle = loop.start_turn("go", session_id="s")
    await handle
    assert [(e.state.value, e.detail) for e in sub.drain_nowait()] == [
        ("queued", "the input of a new turn"),
        ("delivered", "handed to the composite agent's children")]
    assert handle.state is S.DELIVERED
    await loop.aclose()
