"""Park, kill -9, answer from a new process, kill -9 again, finish in a third: the tool that
asked runs its side effect once and the turn completes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, TurnStatus
from steerable.errors import RequestClosedError
from tests.conftest import assert_history_consistent
from tests.parking.park_worker import make_tools, store_for

ROOT = Path(__file__).resolve().parents[2]


def run_until(tmp_path: Path, args: list[str], marker: str) -> list[str]:
    """Start the worker with ``args``; SIGKILL it once a line starting with ``marker`` is
    logged; the lines it logged."""
    logfile = tmp_path / "log"
    logfile.touch()
    seen = len(logfile.read_text().splitlines())
    proc = subprocess.Popen([sys.executable, "-m", "tests.parking.park_worker",
                             str(tmp_path / "data"), str(logfile), *args], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while not any(x.startswith(marker) for x in logfile.read_text().splitlines()[seen:]):
            assert proc.poll() is None, "the worker ended before the marker"
            assert time.monotonic() < deadline, "the worker never reached the marker"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return logfile.read_text().splitlines()[seen:]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
async def test_ask_kill_answer_elsewhere_kill_finish_runs_the_tool_once(
        tmp_path: Path, kind: str) -> None:
    lines = run_until(tmp_path, [kind, "ask"], "parked ")
    request_id = lines[-1].split()[-1]
    assert lines == ["start resumed=False", f"parked {request_id}"]

    lines = run_until(tmp_path, [kind, "answer", request_id, "yes"], "request 2")
    assert lines == ["start resumed=True", "side effect yes", "answered", "request 2"] or \
        lines == ["answered", "start resumed=True", "side effect yes", "request 2"]

    ran: list[str] = []
    provider = ScriptedProvider([Reply(text="shipped")])
    loop = AgentLoop(Agent(name="park", provider=provider, tools=make_tools(ran.append)),
                     store=store_for(str(tmp_path / "data"), kind), park=True)
    with pytest.raises(RequestClosedError):
        loop.answer(request_id, "no")  # answered once, in the process that died
    assert loop.pending_requests() == []
    handle = loop.resume("s")
    assert handle is not None
    result = await handle
    assert result.status is TurnStatus.COMPLETED and result.text == "shipped"
    assert ran == []  # the tool's result was checkpointed before the second kill
    history = loop.session_messages("s")
    assert_history_consistent(history)
    assert [m.content for m in history if m.role == "tool"] == ["deployed: yes"]
    await loop.aclose()
