"""The coding agent on a Temporal worker (``steerable worker --temporal``) behaves as it does
locally: its tool policy decides in the workflow (its classification call an activity, its
looks at the files recorded reads), its writes and bash wait for approval, ``ask_user`` waits
for an answer (given with ``steerable approve|answer --temporal``), undo's snapshots are taken
on the worker (``steerable undo`` takes the turn back), ``steerable sessions list --temporal``
lists the session, and the history replays through the CLI's worker after the files changed."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from steerable.temporal import TemporalClient
from tests.coding.conftest import cli_env  # noqa: F401 (fixture)
from tests.temporal._harness import events_until, replay_all, turn_end

pytestmark = pytest.mark.timeout(120)


def steerable(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def _is_request(e: dict[str, object]) -> bool:
    return e["kind"] in ("approval_requested", "question_asked")


def _nth_request(n: int) -> Callable[[dict[str, object]], bool]:
    seen = 0

    def done(e: dict[str, object]) -> bool:
        nonlocal seen
        seen += _is_request(e)
        return seen == n

    return done


async def test_the_coding_agent_on_a_temporal_worker(cli_env, tmp_path: Path,  # noqa: F811
                                                     temporal_target: str, events_url: str,
                                                     task_queue: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("old\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"text": json.dumps({"kind": "change"})},  # the tool policy's classification call
        {"text": json.dumps({"needs": "writing"})},  # and its second reading, which agrees
        # The policy lets a file be written whole only once read in the request.
        {"tool_calls": [["read", {"path": "a.txt"}]]},
        {"tool_calls": [["write", {"path": "a.txt", "content": "new\n"}]]},
        {"tool_calls": [["bash", {"command": "echo more >> a.txt && touch b.txt"}]]},
        {"tool_calls": [["ask_user", {"question": "Keep it?", "choices": ["yes", "no"]}]]},
        {"text": "done"}]))
    where = ["--temporal", temporal_target, "--task-queue", task_queue]
    argv = ["worker", *where, "--redis", events_url, "--provider", "scripted", "--script",
            str(script), "--workspace", str(ws), "--policy", "on"]
    worker = subprocess.Popen([sys.executable, "-m", "steerable", *argv], env=cli_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    try:
        assert worker.stdout is not None
        line = await asyncio.to_thread(worker.stdout.readline)
        assert line.startswith("working for"), line
        # A request that names no file: one that does is done (no more calls) once it changed.
        sent = await client.send("rewrite the notes", "code-1")
        # Each request in turn: from another process (the CLI), or from this one.
        answers = [("approve",), ("client",), ("answer", "yes")]
        seen: list[dict[str, object]] = []
        for verb in answers:
            events = await events_until(client, "code-1", _nth_request(len(seen) + 1))
            request = [e for e in events if _is_request(e)][len(seen)]
            seen.append(request)
            if verb[0] == "client":
                assert await client.resolve_approval(str(request["request_id"]), True)
                continue
            done = await asyncio.to_thread(steerable, cli_env, verb[0],
                                           str(request["request_id"]), *verb[1:], *where)
            assert done.returncode == 0, done.stderr
        outcome = await asyncio.wait_for(client.result("code-1", sent.message_id), 60)
        assert (outcome.status, outcome.text) == ("completed", "done"), outcome
        assert [e["tool_name"] for e in seen] == ["write", "bash", "ask_user"]
        assert (ws / "a.txt").read_text() == "new\nmore\n" and (ws / "b.txt").exists()
        events = await events_until(client, "code-1", turn_end)
        requests = [e for e in events if e["kind"] == "llm_request"]
        # the policy's own calls (the classification and its second reading), in the workflow
        assert [r["purpose"] for r in requests[:2]] == ["classify", "confirm"]
        assert requests[2]["reason"].startswith("change")
        messages = await client.session_messages("code-1")
        results = [str(m.content) for m in messages if m.role == "tool"]
        assert results[-1] == "The user answered: yes"
        # What the command changed, read off the files by the policy in the workflow.
        assert ("[files this command changed in the workspace: a.txt (4 -> 9 bytes), b.txt "
                "(created, 0 bytes)]") in results[-2]

        listed = await asyncio.to_thread(steerable, cli_env, "sessions", "list", "--json",
                                         *where)
        assert listed.returncode == 0, listed.stderr
        assert [(s["session_id"], s["title"]) for s in json.loads(listed.stdout)] == [
            ("code-1", "rewrite the notes")]
        undone = await asyncio.to_thread(steerable, cli_env, "undo", "--session", "code-1",
                                         "--workspace", str(ws))
        assert undone.returncode == 0, undone.stderr
        assert (ws / "a.txt").read_text() == "old\n" and not (ws / "b.txt").exists()
        # The files differ from what the turn saw: a worker taking the session over still
        # replays it as it ran (the policy's looks at the files are in the history).
        await _replay_as_the_cli(client, argv, cli_env, monkeypatch)
    finally:
        await client.aclose()
        worker.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(worker.communicate, timeout=20)
        assert worker.returncode == 0, err


async def test_a_background_command_tells_its_session_on_temporal(
        cli_env, tmp_path: Path, temporal_target: str, events_url: str,  # noqa: F811
        task_queue: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"tool_calls": [["bash", {"command": "sleep 0.5; echo finished",
                                  "background": True}]]},
        {"text": "started it"}, {"text": "heard it"}]))
    where = ["--temporal", temporal_target, "--task-queue", task_queue]
    worker = subprocess.Popen(
        [sys.executable, "-m", "steerable", "worker", *where, "--redis", events_url,
         "--provider", "scripted", "--script", str(script), "--workspace", str(ws), "--yes"],
        env=cli_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = await TemporalClient.connect(temporal_target, task_queue=task_queue,
                                          events_url=events_url)
    try:
        assert worker.stdout is not None
        line = await asyncio.to_thread(worker.stdout.readline)
        assert line.startswith("working for"), line
        sent = await client.send("go", "bg-1")
        assert (await client.result("bg-1", sent.message_id)).text == "started it"
        ends = [e for e in await events_until(client, "bg-1", _nth_end(2))
                if e["kind"] == "turn_end" and e["parent_turn_id"] is None]
        assert [e["text"] for e in ends] == ["started it", "heard it"]
        told = [m.content for m in await client.session_messages("bg-1") if m.role == "user"]
        assert len(told) == 2 and "finished" in str(told[1])
    finally:
        await client.aclose()
        worker.send_signal(signal.SIGINT)
        _, err = await asyncio.to_thread(worker.communicate, timeout=20)
        assert worker.returncode == 0, err


async def _replay_as_the_cli(client: TemporalClient, argv: list[str], env: dict[str, str],
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay the task queue's histories through the worker ``steerable worker`` builds."""
    from steerable.cli._app import build_app
    from steerable.cli._args import build_parser
    from steerable.cli._serve import _temporal_worker
    from steerable.cli._settings import load_settings

    for key in ("XDG_CONFIG_HOME", "HOME", "STEERABLE_DATA_DIR"):
        monkeypatch.setenv(key, env[key])
    args = build_parser().parse_args(argv)
    app = build_app(load_settings(args), session=None, can_ask=False, script=args.script,
                    ask_by_events=True)
    try:
        await replay_all(_temporal_worker(app, args.redis, args), client)
    finally:
        await app.shells.aclose()


def _nth_end(n: int) -> Callable[[dict[str, object]], bool]:
    seen = 0

    def done(e: dict[str, object]) -> bool:
        nonlocal seen
        seen += e["kind"] == "turn_end" and e["parent_turn_id"] is None
        return seen == n

    return done
