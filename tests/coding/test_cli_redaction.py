"""The issue's probe, end to end through the CLI: a credential URL right after an escaped tab
(the read tool numbers lines with a tab; `git remote -v` separates with one) and a secret with
quotes and a backslash. Every output parses, none holds a secret, the session loads and goes
on, and the recording replays."""

from __future__ import annotations

import json
from pathlib import Path

from tests.coding.test_cli import script, steerable

PASSWORD = "hunter2-pass-0123"
TOKEN = 'to"ken\\with-quotes-42'


def test_a_credential_after_a_tab_keeps_every_output_valid(cli_env: dict[str, str],
                                                           tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    (ws / "remotes.txt").write_text(
        f"origin\thttps://me:{PASSWORD}@example.com/x.git (fetch)\ntoken\t{TOKEN}\n")
    env = {**cli_env, "DEPLOY_TOKEN": TOKEN}
    steps = [{"text": "Looking.", "tool_calls": [["read", {"path": "remotes.txt"}]]},
             {"text": f"The token is {TOKEN} and the URL https://me:{PASSWORD}@example.com"}]
    record, events_log = tmp_path / "run.jsonl", tmp_path / "events.jsonl"
    res = steerable(env, "run", "show the remotes", "--json", "--provider", "scripted",
                    "--script", script(tmp_path, steps), "--workspace", str(ws),
                    "--record", str(record), "--record-events", str(events_log))
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]  # every line parses
    sid = events[0]["session_id"]
    end = next(e for e in events if e["kind"] == "tool_exec_end")
    assert end["content"].startswith("     1\torigin\t") and "[redacted]" in end["content"]
    session = next((tmp_path / "data" / "sessions").glob(f"{sid}.jsonl"))
    outputs = {"--json": res.stdout, "session file": session.read_text(),
               "recording": record.read_text(), "debug recorder": events_log.read_text()}
    for name, text in outputs.items():
        for line in text.rstrip("\n").split("\n"):
            json.loads(line)
        assert PASSWORD not in text and TOKEN not in text, name
        assert json.dumps(TOKEN)[1:-1] not in text, name  # nor in its JSON-escaped form

    shown = steerable(env, "sessions", "show", sid)
    assert shown.returncode == 0, shown.stderr
    more = steerable(env, "run", "and now?", "--session", sid, "--provider", "scripted",
                     "--script", script(tmp_path, [{"text": "done"}]), "--workspace", str(ws))
    assert more.returncode == 0, more.stderr
    replayed = steerable(env, "replay", str(record), "--json")
    assert replayed.returncode == 0, replayed.stderr
