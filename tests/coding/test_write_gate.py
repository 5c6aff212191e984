"""The write gate's verdict brought with a call (``WriteGate.applied``): it decides for its
turn and gate only, within the call (a sync tool's worker thread included), whatever this
process's own gate says; and the coding tools that change files carry their gate."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from steerable.coding import Workspace, coding_tools
from steerable.coding._workspace import WriteGate
from steerable.errors import ToolError
from steerable.tools import ToolContext


def _closed_by_default() -> WriteGate:
    gate = WriteGate()
    gate.close_by_default("not opened here")
    return gate


def test_a_brought_verdict_decides_for_its_turn_and_gate_only() -> None:
    gate, other = _closed_by_default(), _closed_by_default()
    gate.open("t-open-here")
    with gate.applied("t1", None):
        assert gate.refusal("t1") is None  # opened where the turn runs
        assert gate.refusal("t2") == "not opened here"  # another turn: this process decides
        assert other.refusal("t1") == "not opened here"  # another gate
    assert gate.refusal("t1") == "not opened here"  # only within the call
    with gate.applied("t-open-here", "a question asks for no change"):
        assert gate.refusal("t-open-here") == "a question asks for no change"
        with pytest.raises(ToolError, match="a question asks for no change"):
            gate.check("t-open-here")
    assert gate.export("t-open-here") is None and gate.export("t1") == "not opened here"


def test_a_verdict_in_an_unknown_form_closes() -> None:
    gate = WriteGate()  # open to every turn here
    with gate.applied("t1", {"open": True}):
        assert "unknown form (dict)" in str(gate.refusal("t1"))


async def test_a_sync_tools_thread_and_concurrent_calls_see_their_own_verdict() -> None:
    gate = _closed_by_default()
    seen: dict[str, str | None] = {}
    both_inside = asyncio.Barrier(2)  # each checks while the other's verdict is applied

    async def call(turn: str, verdict: str | None) -> None:
        with gate.applied(turn, verdict):
            await both_inside.wait()
            seen[turn] = await asyncio.to_thread(gate.refusal, turn)

    await asyncio.gather(call("a", None), call("b", "closed there"))
    assert seen == {"a": None, "b": "closed there"}


async def test_the_tools_that_change_files_carry_their_workspaces_gate(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    tools = {t.name: t for t in coding_tools(ws)}
    assert {n for n, t in tools.items() if t.carried} == {"write", "edit", "bash"}
    assert all(t.carried == (ws.gate,) for t in tools.values() if t.carried)
    ws.gate.close_by_default("this process never read the request")
    ctx = ToolContext(call_id="c1", tool_name="write", turn_id="t1", session_id="s1")
    write = tools["write"]
    with pytest.raises(ToolError, match="never read the request"):
        await write.run({"path": "a.txt", "content": "x\n"}, ctx)
    with ws.gate.applied("t1", None):
        await write.run({"path": "a.txt", "content": "x\n"}, ctx)
    assert (tmp_path / "a.txt").read_text() == "x\n"
