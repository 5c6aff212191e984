"""The coding agent's write gate on Temporal is decided where the turn runs (the policy, in
the workflow) and travels with each tool call: a call that runs on another worker process than
the one that read the request (here: the worker that ran it was killed, and another ran the
call again) may change files as the turn allows, not as that process's own gate, which never
saw the turn, would say."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from steerable.temporal import TemporalClient
from tests.coding.conftest import cli_env  # noqa: F401 (fixture)
from tests.temporal._harness import events_until, turn_end

pytestmark = pytest.mark.timeout(120)  # two worker processes start, and a heartbeat lapses


def _worker(env: dict[str, str], where: list[str], events_url: str, script: Path,
            ws: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "steerable", "worker", *where, "--redis", events_url,
         "--provider", "scripted", "--script", str(script), "--workspace", str(ws),
         "--policy", "on", "--yes"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("working for"), (line, proc.stderr.read() if proc.stderr else "")
    return proc


async def test_a_call_run_again_on_another_worker_keeps_its_turns_gate(
        cli_env, tmp_path: Path, temporal_target: str, events_url: str,  # noqa: F811
        task_queue: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    first = tmp_path / "first.json"
    first.write_text(json.dumps([
        {"text": json.dumps({"kind": "change"})},  # the policy reads a change request
        {"text": json.dumps({"needs": "writing"})},  # twice: the second reading agrees
        {"tool_calls": [["bash", {"command": "touch started.txt && sleep 5 && echo made "
                                             "> made.txt"}]]}]))
    # The second worker first serves another session (so its own policy, and gate, exist),
    # then only the turn's last model call: the first ones are history.
    second = tmp_path / "second.json"
    second.write_text(json.dumps([{"text": json.dumps({"kind": "general"})}, {"text": "hi"},
                                  {"text": "done"}]))
    where = ["--temporal", temporal_target, "--task-queue", task_queue]
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(await asyncio.to_thread(_worker, cli_env, where, events_url, first, ws))
        sent = await client.send("produce the build outputs", "gate-1")
        for _ in range(600):  # the command runs on the first worker
            if (ws / "started.txt").exists():
                break
            await asyncio.sleep(0.05)
        assert (ws / "started.txt").exists()
        procs[0].send_signal(signal.SIGKILL)
        (ws / "started.txt").unlink()
        # A new process: its workspace's gate has never heard of the turn, and is closed to
        # every turn its policy did not open. Temporal gives it
        # the call again once the dead worker's heartbeat lapses, before any workflow task
        # (which would replay the policy there).
        procs.append(await asyncio.to_thread(_worker, cli_env, where, events_url, second, ws))
        other = await client.send("hello there", "gate-2")
        assert (await asyncio.wait_for(client.result("gate-2", other.message_id), 30)).text \
            == "hi"
        # Followed on the event stream: a query of the session would have the new worker
        # replay it (the policy, and its gate, with it) before the call runs again.
        events = await events_until(client, "gate-1", turn_end, timeout=90)
        ends = [e for e in events if e["kind"] == "tool_exec_end"]
        assert [e["is_error"] for e in ends] == [False], ends
        outcome = await client.result("gate-1", sent.message_id)
        assert (outcome.status, outcome.text) == ("completed", "done"), outcome
        results = [str(m.content) for m in await client.session_messages("gate-1")
                   if m.role == "tool"]
        assert len(results) == 1 and "exit code 0" in results[0], results
        assert (ws / "started.txt").exists()  # made again, by the second worker's run
    finally:
        await client.aclose()
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            await asyncio.to_thread(proc.communicate, timeout=20)
