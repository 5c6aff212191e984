"""One inbound seam: every action from outside enters the loop as one frozen command."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import CancelMode, EventKind, Reply, tool
from steerable.drivers import _commands as cmd
from steerable.drivers._controls import COMMANDS, VERBS, from_wire
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
    seen: list[cmd.Command] = []

    def spy(command: cmd.Command, *, proceed: Any) -> Any:
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
    assert kinds[:12] == [cmd.StartTurn, cmd.Steer, cmd.FollowUp, cmd.Edit, cmd.Revoke,
                          cmd.Steer, cmd.Send, cmd.AnswerApproval, cmd.Cancel, cmd.Interrupt,
                          cmd.Interrupt, cmd.StartTurn]
    assert kinds[-1] is cmd.Resume and cmd.Steer not in kinds[13:]
    assert seen[5] == cmd.Steer("c", "s", handle.turn_id)  # a handle names its turn
    assert seen[11] == cmd.StartTurn("d", "s", None, False, by_lane=True,
                                     message_id=seen[11].message_id)
    for command in seen:  # frozen values
        with pytest.raises(dataclasses.FrozenInstanceError):
            command.x = 1  # type: ignore[attr-defined]
    await loop.aclose()


def test_the_verbs_are_one_table_and_the_wire_form_is_checked() -> None:
    assert sorted(COMMANDS) == ["approval", "cancel", "edit", "follow_up", "interrupt", "resume",
                                "revoke", "send", "start_turn", "steer"]
    assert from_wire("steer", {"text": "x", "session_id": "s"}) == cmd.Steer("x", "s")
    assert from_wire("cancel", {"session_id": "s", "mode": "after_tools"}) == cmd.Cancel(
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
            == {}
        assert len(loop._commands.interceptors) == 1
        assert not any(callable(v) and k in type(loop).__dict__ for k, v in vars(loop).items())
        await loop.run_turn("hi", session_id="s")
    assert loop._commands.interceptors == []
    await loop.aclose()


_TEXT = st.text(min_size=1, max_size=20).filter(str.strip)
_BY_TYPE: dict[str, st.SearchStrategy[Any]] = {
    "str": _TEXT, "str | None": st.none() | _TEXT, "bool": st.booleans(),
    "CancelMode": st.sampled_from(list(CancelMode)),
}


def _commands() -> st.SearchStrategy[cmd.Command]:
    """Any command another process may send, with any valid field values."""
    remote = [cls for cls in COMMANDS.values() if cls.remote]
    return st.one_of(*(st.builds(cls, **{f.name: _BY_TYPE[str(f.type)]
                                         for f in dataclasses.fields(cls)})
                       for cls in remote))


@given(_commands())
def test_every_remote_verb_crosses_a_process_and_comes_back_equal(command: cmd.Command) -> None:
    """What the Redis worker decodes and the replay submits is the command that was sent:
    its wire form is plain JSON, and ``from_wire`` of it by the one table is equal to it."""
    command.check()
    wire = json.loads(json.dumps({"verb": command.verb, **command.fields()}))
    assert from_wire(wire.pop("verb"), wire) == command


def test_the_table_runs_every_verb_and_nothing_else() -> None:
    assert set(VERBS) == set(COMMANDS.values())
    assert all(cls.verb and cls.__doc__ for cls in VERBS)
    assert {cls.verb for cls in VERBS if not cls.remote} == {"send", "start_turn", "resume"}
