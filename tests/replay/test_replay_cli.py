"""``steerable run --record FILE`` then ``steerable replay FILE``, as subprocesses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
IGNORED = {"time", "seq", "duration", "turn_id", "parent_turn_id", "request_id", "message_id",
           "origin_id", "request_seq"}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    import os

    out = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("OPENAI_", "STEERABLE_"))}
    out.update(PYTHONPATH=str(SRC), STEERABLE_DATA_DIR=str(tmp_path / "data"),
               XDG_CONFIG_HOME=str(tmp_path / "config"), HOME=str(tmp_path / "home"),
               NO_COLOR="1")
    return out


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def _events(stdout: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in json.loads(line).items() if k not in IGNORED}
            for line in stdout.splitlines()]


def test_run_record_then_replay(env: dict[str, str], tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "Reading.", "tool_calls": [["read", {"path": "a.txt"}]]},
                                  {"text": "It says hello."}]))
    rec = tmp_path / "run.jsonl"
    live = cli(env, "run", "what is in a.txt?", "--json", "--provider", "scripted", "--script",
               str(script), "--workspace", str(ws), "--record", str(rec))
    assert live.returncode == 0, live.stderr
    (ws / "a.txt").unlink()  # the replay needs neither the model nor the workspace
    again = cli(env, "replay", str(rec), "--json")
    assert again.returncode == 0, again.stderr
    assert _events(again.stdout) == _events(live.stdout)
    shown = cli(env, "replay", str(rec))
    assert shown.returncode == 0 and "It says hello." in shown.stdout
    assert "no divergence" in shown.stderr


def test_replay_reports_a_divergence_and_bad_files(env: dict[str, str], tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hi"}]))
    rec = tmp_path / "run.jsonl"
    assert cli(env, "run", "hello", "--provider", "scripted", "--script", str(script),
               "--workspace", str(tmp_path), "--record", str(rec)).returncode == 0
    lines = [json.loads(line) for line in rec.read_text().splitlines()]
    for entry in lines:
        if entry["type"] == "turn":
            entry["input"] = "goodbye"  # as if the code under test now sent something else
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(e) + "\n" for e in lines))
    res = cli(env, "replay", str(edited))
    assert res.returncode == 1
    assert "replay diverged at event #0 (turn_start" in res.stderr and "goodbye" in res.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    res = cli(env, "replay", str(bad))
    assert res.returncode == 1 and "is not a steerable recording" in res.stderr


def test_a_run_whose_calls_were_refused_by_a_rule_replays(env: dict[str, str],
                                                          tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [["write", {"path": "b.txt", "content": "x"}]]},
                                  {"text": "I could not write it."}]))
    rec = tmp_path / "denied.jsonl"
    live = cli(env, "run", "write b.txt", "--json", "--provider", "scripted", "--script",
               str(script), "--workspace", str(tmp_path), "--record", str(rec),
               "--deny", "write")
    assert live.returncode == 4, live.stderr  # the one action asked for was denied
    skipped = [e for e in _events(live.stdout) if e["kind"] == "tool_exec_skipped"]
    assert skipped and skipped[0]["reason"] == "denied" and "rule" in skipped[0]["detail"]
    again = cli(env, "replay", str(rec), "--json")
    assert again.returncode == 0, again.stderr
    assert _events(again.stdout) == _events(live.stdout)
