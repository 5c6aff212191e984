"""One inbound seam: every action from outside enters the loop as one frozen command."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from steerable import CancelMode, EventKind, Reply, tool
from steerable._commands import (
    COMMANDS,
    AnswerApproval,
    Cancel,
    Command,
    Edit,
    FollowUp,
    Interrupt,
    Resume,
    Revoke,
    Send,
    StartTurn,
    Steer,
    from_wire,
)
from steerable.replay import Recorder
from tests.conftest import make_loop, wait_for


async def test_every_public_way_in_is_one_command_through_submit() -> None:
    gate = asyncio.Event()

    @tool
    async def work() -> str:
        """Wait."""
        await gate.wait()
        return "ok"

    loop, _, sub = make_loop([Reply(tool_calls=[("work", {})]), Reply(text="done"),
                              Reply(text="next")], tools=[work])
    seen: list[Command] = []

    def spy(command: Command, *, proceed: Any) -> Any:
        seen.append(command)
        return proceed(command)

    remove = loop.intercept_commands(spy)
    handle = loop.start_turn("go", session_id="s")
    await wait_for(sub, EventKind.TOOL_EXEC_START)
    r = loop.inject_steering("a", "s")
    loop.inject_follow_up("b", "s")
    loop.edit_message(r.message_id, "a2")
    loop.revoke_message(r.message_id)
    handle.inject_steering("c")
    loop.send("d", "s", "follow_up")
    loop.resolve_approval("nobody", True)
    loop.cancel("s", CancelMode.AFTER_TOOLS)
    handle.interrupt_graceful()
    loop.interrupt_hard("s")
    await handle
    await loop.wait_session("s")
    loop.resume("s")
    remove()
    loop.inject_steering("unseen", "s")
    kinds = [type(c) for c in seen]
    assert kinds[:12] == [StartTurn, Steer, FollowUp, Edit, Revoke, Steer, Send, AnswerApproval,
                          Cancel, Interrupt, Interrupt, StartTurn]
    assert kinds[-1] is Resume and Steer not in kinds[13:]
    assert seen[5] == Steer("c", "s", handle.turn_id)  # a handle names its turn
    assert seen[11] == StartTurn("d", "s", None, False, by_lane=True, message_id=seen[11].message_id)
    for command in seen:  # frozen values
        with pytest.raises(dataclasses.FrozenInstanceError):
            command.x = 1  # type: ignore[attr-defined]
    await loop.aclose()


def test_the_verbs_are_one_table_and_the_wire_form_is_checked() -> None:
    assert sorted(COMMANDS) == ["answer", "approval", "cancel", "edit", "follow_up", "interrupt", "resume",
                                "revoke", "send", "start_turn", "steer"]
    assert from_wire("steer", {"text": "x", "session_id": "s"}) == Steer("x", "s")
    assert from_wire("cancel", {"session_id": "s", "mode": "after_tools"}) == Cancel(
        "s", mode=CancelMode.AFTER_TOOLS)
    with pytest.raises(ValueError, match="unknown command 'start_turn'"):
        from_wire("start_turn", {"input": "x"})  # carries an agent: never from the wire
    with pytest.raises(ValueError, match="unknown command 'nope'"):
        from_wire("nope", {})
    with pytest.raises(TypeError):
        from_wire("steer", {"text": "x", "bogus": 1})


async def test_the_recorder_patches_no_method_of_the_loop(tmp_path: Path) -> None:
    loop, _, _ = make_loop([Reply(text="ok")])
    before = dict(vars(loop))
    async with Recorder(loop, tmp_path / "run.jsonl"):
        assert {k: v for k, v in vars(loop).items() if k not in before or before[k] is not v} \
            .keys() <= {"_interceptors"}
        assert not any(callable(v) and k in type(loop).__dict__ for k, v in vars(loop).items())
        await loop.run_turn("hi", session_id="s")
    assert loop._interceptors == []
    await loop.aclose()
