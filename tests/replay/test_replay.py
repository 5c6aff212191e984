"""Record a run, replay it with no model: same events, same text, same session; divergences stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HumanApprover,
    Reply,
    ScriptedProvider,
    ToolContext,
    event_to_dict,
    tool,
)
from steerable.replay import (
    Recorder,
    RecordingError,
    ReplayDivergence,
    load_recording,
    replay,
)

IGNORED = {"time", "seq", "duration", "turn_id", "parent_turn_id", "child_turn_id", "request_id",
           "message_id", "origin_id", "request_seq"}


def _comparable(events: list[Any]) -> list[dict[str, Any]]:
    out = []
    for e in events:
        d = event_to_dict(e) if not isinstance(e, dict) else dict(e)
        out.append({k: v for k, v in d.items() if k not in IGNORED})
    return out


@tool(read_only=True)
async def look(path: str, ctx: ToolContext) -> str:
    """Read something."""
    ctx.progress(f"looking at {path}")
    return f"contents of {path}"


@tool
async def write(path: str, text: str) -> str:
    """Write something."""
    return f"wrote {len(text)} chars to {path}"


def _agent(script: list[Any], tools: list[Any] | None = None) -> Agent:
    return Agent(name="main", instructions="Be brief.", provider=ScriptedProvider(script),
                 tools=tools if tools is not None else [look, write])


async def _record(tmp_path: Path, script: list[Any], body: Any, **loop_kw: Any) -> tuple[Path, Any]:
    path = tmp_path / "run.jsonl"
    loop = AgentLoop(_agent(script), **loop_kw)
    async with Recorder(loop, path):
        outcome = await body(loop)
    await loop.aclose()
    return path, (loop, outcome)


async def test_replay_reproduces_events_text_and_session(tmp_path: Path) -> None:
    script = [
        Reply(text="Let me look.", tool_calls=[("look", {"path": "a"}), ("look", {"path": "b"})]),
        Reply(tool_calls=[("write", {"path": "c", "text": "hello"})]),
        Reply(text="All done: c written."),
    ]

    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("do it", session_id="s1")

    path, (loop, result) = await _record(tmp_path, script, body, permissions=[("allow", "write")])
    recorded = load_recording(path)
    out = await replay(path)
    assert out.text == result.text == "All done: c written."
    assert _comparable(list(out.events)) == _comparable(recorded.events)
    assert len(out.events) == len(recorded.events) > 20
    assert out.sessions["s1"] == loop.session_messages("s1")
    assert [e.kind for e in out.events if e.kind is EventKind.TOOL_EXEC_PROGRESS]


async def test_replay_needs_no_provider_at_all(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("hi", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(text="hello there")], body)
    # The recording alone is enough: nothing of the original agent is around.
    out = await replay(path)
    assert out.text == "hello there"
    assert out.results[0].status.value == "completed"


async def _on(sub: Any, kind: EventKind) -> Any:
    async for event in sub:
        if event.kind is kind:
            return event
    raise AssertionError(f"no {kind}")


async def test_steering_during_a_tool_is_replayed_at_the_same_point(tmp_path: Path) -> None:
    release = asyncio.Event()

    @tool(read_only=True)
    async def slow(x: int) -> str:
        """Waits for the test."""
        await release.wait()
        return f"slow {x}"

    path = tmp_path / "steer.jsonl"
    agent = _agent([Reply(tool_calls=[("slow", {"x": 1}), ("write", {"path": "p", "text": "t"})]),
                    Reply(text="ok, switching to Y")], tools=[slow, write])
    loop = AgentLoop(agent, permissions=[("allow", "write")])
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("do X", session_id="s1")
        await _on(sub, EventKind.TOOL_EXEC_START)
        assert loop.inject_steering("do Y instead", session_id="s1")
        release.set()
        live = await handle
    await loop.aclose()
    recorded = load_recording(path)
    skipped = [e for e in recorded.events if e["kind"] == "tool_exec_skipped"]
    assert [s["reason"] for s in skipped] == ["steering"]
    out = await replay(path)
    assert _comparable(list(out.events)) == _comparable(recorded.events)
    assert out.text == live.text
    assert [m.content for m in out.sessions["s1"] if m.role == "user"] == ["do X", "do Y instead"]


async def test_hard_abort_mid_tool_is_replayed_and_rolls_back(tmp_path: Path) -> None:
    @tool
    async def hang() -> str:
        """Never returns by itself."""
        await asyncio.Event().wait()
        return "unreachable"

    path = tmp_path / "abort.jsonl"
    loop = AgentLoop(_agent([Reply(text="working", tool_calls=[("hang", {})])], tools=[hang]),
                     permissions=[("allow", "hang")])
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.TOOL_EXEC_START)
        assert loop.interrupt_hard("s1")
        live = await handle
    await loop.aclose()
    assert live.status.value == "aborted"
    out = await replay(path)
    assert out.results[0].status.value == "aborted"
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)
    assert out.sessions["s1"] == []


async def test_graceful_interrupt_during_llm_call_is_replayed(tmp_path: Path) -> None:
    path = tmp_path / "graceful.jsonl"
    loop = AgentLoop(_agent([Reply(text="thinking hard", tool_calls=[("look", {"path": "a"})],
                                   delay=0.2),
                             Reply(text="Stopped; I had looked at nothing.")]))
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.LLM_REQUEST)
        assert loop.interrupt_graceful("s1", hint="stop now")
        live = await handle
    await loop.aclose()
    out = await replay(path)
    assert out.results[0].status.value == live.status.value == "interrupted"
    assert out.text == live.text
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)


async def test_approvals_are_replayed_with_their_answers(tmp_path: Path) -> None:
    path = tmp_path / "approve.jsonl"
    loop = AgentLoop(_agent([Reply(tool_calls=[("write", {"path": "a", "text": "1"}),
                                               ("write", {"path": "b", "text": "2"})]),
                             Reply(text="one written, one refused")]))
    loop.register_hook(HumanApprover())
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("write both", session_id="s1")
        first = await _on(sub, EventKind.APPROVAL_REQUESTED)
        assert loop.resolve_approval(first.request_id, True)
        second = await _on(sub, EventKind.APPROVAL_REQUESTED)
        assert loop.resolve_approval(second.request_id, False, "not b")
        live = await handle
    await loop.aclose()
    out = await replay(path)
    skipped = [e for e in out.events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert [(s.reason, s.detail) for s in skipped] == [("denied", "not b")]
    assert out.text == live.text
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)


async def test_follow_up_and_two_turns_on_one_session(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        first = await loop.run_turn("one", session_id="s1")
        second = await loop.run_turn("two", session_id="s1")
        return first, second

    path, (loop, _) = await _record(tmp_path, [Reply(text="first"), Reply(text="second")], body)
    out = await replay(path)
    assert [r.text for r in out.results] == ["first", "second"]
    assert out.sessions["s1"] == loop.session_messages("s1")


async def test_a_session_with_history_before_recording(tmp_path: Path) -> None:
    path = tmp_path / "hist.jsonl"
    loop = AgentLoop(_agent([Reply(text="before"), Reply(text="after")]))
    await loop.run_turn("earlier", session_id="s1")
    async with Recorder(loop, path):
        await loop.run_turn("now", session_id="s1")
    out = await replay(path)
    assert out.text == "after"
    assert [m.content for m in out.sessions["s1"]] == ["earlier", "before", "now", "after"]
    await loop.aclose()


async def test_divergent_hook_stops_at_the_first_difference(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(tool_calls=[("look", {"path": "a"})]),
                                       Reply(text="done")], body)

    class Rewrite:
        def before_tool(self, ctx: Any) -> Any:
            from steerable import HookAction, HookDecision
            return HookDecision(HookAction.MODIFY, arguments={"path": "zzz"})

    with pytest.raises(ReplayDivergence) as info:
        await replay(path, hooks=[Rewrite()])
    err = info.value
    assert err.index >= 0
    assert "tool_exec_start" in str(err) and "zzz" in str(err)
    assert err.expected["arguments"] == {"path": "a"}


async def test_live_tool_with_a_different_result_diverges(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(tool_calls=[("look", {"path": "a"})]),
                                       Reply(text="done")], body)

    @tool(read_only=True, name="look")
    async def changed(path: str, ctx: ToolContext) -> str:
        """Read something."""  # the same definition: only its result regressed
        ctx.progress(f"looking at {path}")
        return f"CHANGED {path}"

    with pytest.raises(ReplayDivergence, match=r"content: recorded 'contents of a', replayed 'CHANGED a'"):
        await replay(path, tools=[changed])
    same = await replay(path, tools=[look])  # the real, unchanged tool agrees with the recording
    assert same.text == "done"


async def test_a_request_the_recording_does_not_have(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(text="done")], body)
    rec = load_recording(path)
    for entry in rec.of_type("llm"):  # as if the code under test now sent another prompt
        entry["request"]["messages"][-1]["content"] = "something else"
    with pytest.raises(ReplayDivergence, match=r"LLM call #1 of agent 'main': message 1: recorded"):
        await replay(rec)


async def test_a_shorter_recording_diverges_past_its_end(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(text="done")], body)
    rec = load_recording(path)
    last = max(i for i, e in enumerate(rec.entries) if e["type"] == "event")
    del rec.entries[last]
    with pytest.raises(ReplayDivergence, match="comes after the last recorded event"):
        await replay(rec)


def test_files_that_are_not_recordings(tmp_path: Path) -> None:
    with pytest.raises(RecordingError, match="no recording"):
        load_recording(tmp_path / "missing.jsonl")
    bad = tmp_path / "events.jsonl"
    bad.write_text(json.dumps({"kind": "turn_start"}) + "\n")
    with pytest.raises(RecordingError, match="not a steerable recording"):
        load_recording(bad)
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"type": "header", "format": "steerable-recording",
                                 "version": 99}) + "\n")
    with pytest.raises(RecordingError, match="format 99"):
        load_recording(newer)


async def test_a_torn_last_line_still_loads(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(text="done")], body)
    whole = load_recording(path)
    path.write_text(path.read_text() + '{"type": "event", "ev')
    assert len(load_recording(path).entries) == len(whole.entries)


async def test_control_from_another_thread_is_recorded_at_its_real_position(tmp_path: Path) -> None:
    release = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Waits for the test."""
        await release.wait()
        return "slow done"

    path = tmp_path / "thread.jsonl"
    loop = AgentLoop(_agent([Reply(tool_calls=[("slow", {})]), Reply(text="as you wish")],
                            tools=[slow]))
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.TOOL_EXEC_START)
        assert await asyncio.to_thread(loop.inject_steering, "from a thread", "s1")
        release.set()
        await handle
    await loop.aclose()
    (control,) = load_recording(path).of_type("control")
    assert control["text"] == "from a thread" and control["session_id"] == "s1"
    out = await replay(path)
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)
    assert [m.content for m in out.sessions["s1"] if m.role == "user"] == ["go", "from a thread"]


async def test_an_agent_first_seen_in_start_turn_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    other = Agent(name="other", instructions="Other.", provider=ScriptedProvider(
        [Reply(text="from the other agent")]))
    loop = AgentLoop(_agent([Reply(text="from main")]))
    async with Recorder(loop, path):
        await loop.run_turn("one", session_id="s1")
        await loop.run_turn("two", session_id="s2", agent=other)
    await loop.aclose()
    out = await replay(path)
    assert [r.text for r in out.results] == ["from main", "from the other agent"]


async def test_an_unwritable_recording_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    loop = AgentLoop(_agent([]))
    with pytest.raises(RecordingError, match="cannot write the recording"):
        async with Recorder(loop, blocker / "sub" / "rec.jsonl"):
            pass
    await loop.aclose()


async def test_provider_errors_and_a_cancelled_stream_replay(tmp_path: Path) -> None:
    from steerable.errors import RetryableProviderError

    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, (_, live) = await _record(
        tmp_path, [Reply(error=RetryableProviderError("HTTP 503: gave up after 3 attempts"))],
        body)
    assert live.status.value == "error"
    out = await replay(path)
    assert out.results[0].status.value == "error"
    assert "gave up after 3 attempts" in str(out.results[0].error)

    path2 = tmp_path / "cut.jsonl"
    loop = AgentLoop(_agent([Reply(text="never seen", delay=30)]))
    async with Recorder(loop, path2):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.LLM_REQUEST)
        loop.interrupt_hard("s1")
        await handle
    await loop.aclose()
    (llm,) = load_recording(path2).of_type("llm")
    assert llm["cancelled"] is True and llm["chunks"] == []
    out = await replay(path2)
    assert out.results[0].status.value == "aborted"


async def test_a_missing_abort_stalls_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    loop = AgentLoop(_agent([Reply(text="never seen", delay=30)]))
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.LLM_REQUEST)
        loop.interrupt_hard("s1")
        await handle
    await loop.aclose()
    rec = load_recording(path)
    rec.entries = [e for e in rec.entries if e["type"] != "control"]  # the abort is lost
    with pytest.raises(ReplayDivergence, match=r"replay stalled: no event for 0.3 s; the "
                                                r"recording expected event #\d+ \(interrupt_received\)"):
        await replay(rec, stall_timeout=0.3)


async def test_a_replay_that_ends_early_or_cannot_deliver_a_control(tmp_path: Path) -> None:
    async def body(loop: AgentLoop) -> Any:
        return await loop.run_turn("go", session_id="s1")

    path, _ = await _record(tmp_path, [Reply(text="done")], body)
    rec = load_recording(path)
    rec.entries.append({"type": "event", "event": dict(rec.events[-1])})
    with pytest.raises(ReplayDivergence, match=r"ended after .* events; the recording goes on"):
        await replay(rec)
    rec = load_recording(path)
    rec.entries.append({"type": "control", "after": len(rec.events), "verb": "interrupt",
                        "hard": True, "session_id": "s1"})
    with pytest.raises(ReplayDivergence, match=r"interrupt after event .* changed nothing"):
        await replay(rec)


async def test_dry_run_previews_and_tool_timeouts_replay(tmp_path: Path) -> None:
    @tool(timeout=0.05, read_only=True)
    async def sleepy() -> str:
        """Too slow."""
        await asyncio.sleep(5)
        return "late"

    path = tmp_path / "dry.jsonl"
    dry = Agent(name="main", provider=ScriptedProvider([
        Reply(tool_calls=[("write", {"path": "p", "text": "t"}), ("sleepy", {})]),
        Reply(text="previewed")]), tools=[write, sleepy], dry_run=True)
    loop = AgentLoop(dry, permissions=[("allow", "*")])
    async with Recorder(loop, path):
        await loop.run_turn("go", session_id="s1")
    await loop.aclose()
    ends = [e for e in load_recording(path).events if e["kind"] == "tool_exec_end"]
    assert "[dry-run]" in ends[0]["content"] and "timed out" in ends[1]["content"]
    out = await replay(path)
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)


async def test_a_cancel_at_a_safe_point_is_replayed(tmp_path: Path) -> None:
    from steerable import CancelMode

    release = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Waits for the test."""
        await release.wait()
        return "slow done"

    path = tmp_path / "cancel.jsonl"
    loop = AgentLoop(_agent([Reply(tool_calls=[("slow", {})]), Reply(text="never asked")],
                            tools=[slow]))
    async with Recorder(loop, path):
        sub = loop.subscribe()
        handle = loop.start_turn("go", session_id="s1")
        await _on(sub, EventKind.TOOL_EXEC_START)
        assert handle.cancel(CancelMode.AFTER_TOOLS) is not None
        release.set()
        live = await handle
    await loop.aclose()
    assert live.status.value == "cancelled"
    (control,) = load_recording(path).of_type("control")
    assert (control["verb"], control["mode"]) == ("cancel", "AFTER_TOOLS")
    out = await replay(path)
    assert out.results[0].status.value == "cancelled"
    assert _comparable(list(out.events)) == _comparable(load_recording(path).events)
    # The same run as version 1 wrote it (each control named by a loop method) replays alike.
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["version"] = 1
    for entry in lines:
        if entry["type"] == "control":
            del entry["verb"]
            entry["action"] = "cancel"
    old = tmp_path / "cancel-v1.jsonl"
    old.write_text("".join(json.dumps(e) + "\n" for e in lines))
    (control,) = load_recording(old).of_type("control")
    assert (control["verb"], control["mode"]) == ("cancel", "AFTER_TOOLS")
    again = await replay(old)
    assert _comparable(list(again.events)) == _comparable(list(out.events))


async def test_a_resumed_turn_is_refused_with_the_reason(tmp_path: Path) -> None:
    from steerable import CancelMode
    from steerable.storage import JSONLSessionStore

    loop = AgentLoop(_agent([Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="done")]),
                     store=JSONLSessionStore(tmp_path / "sessions"))
    sub = loop.subscribe()
    handle = loop.start_turn("go", session_id="s1")
    await _on(sub, EventKind.LLM_REQUEST)
    handle.cancel(CancelMode.AFTER_MODEL)
    assert (await handle).status.value == "cancelled"
    path = tmp_path / "resumed.jsonl"
    async with Recorder(loop, path):
        resumed = loop.resume("s1")
        assert resumed is not None
        await resumed
    await loop.aclose()
    with pytest.raises(RecordingError, match=r"started by loop.resume \(session 's1'\)"):
        await replay(path)


async def test_messages_given_to_send_replay_with_their_policies(tmp_path: Path) -> None:
    release = asyncio.Event()

    @tool(read_only=True)
    async def slow() -> str:
        """Waits for the test."""
        await release.wait()
        return "slow done"

    path = tmp_path / "send.jsonl"
    loop = AgentLoop(_agent([Reply(tool_calls=[("slow", {})]), Reply(text="steered answer"),
                             Reply(text="the follow-up's answer")], tools=[slow]))
    async with Recorder(loop, path):
        sub = loop.subscribe()
        loop.send("start", "s1")
        await _on(sub, EventKind.TOOL_EXEC_START)
        loop.send("also this", "s1", "steer")
        loop.send("and then that", "s1", "follow_up")
        release.set()
        await loop.wait_session("s1")
    await loop.aclose()
    rec = load_recording(path)
    assert [e["by_send"] for e in rec.of_type("turn")] == [True, True]
    out = await replay(path)
    assert _comparable(list(out.events)) == _comparable(rec.events)
    assert [m.content for m in out.sessions["s1"] if m.role == "user"] == \
        ["start", "also this", "and then that"]
