"""``steerable chat`` through a pseudo-terminal: a tool's question is asked inline, a bad answer
is asked again; ``/waiting`` lists a turn parked by a run without a terminal."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect

from tests.coding.test_chat import _spawn
from tests.coding.test_cli import script, steerable


def test_chat_asks_inline_and_lists_what_waits_elsewhere(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    parked = steerable(cli_env, "run", "write it", "--json", "--provider", "scripted", "--script",
                       script(tmp_path, [{"tool_calls": [["write", {"path": "b", "content": "x"}]]}]),
                       "--workspace", str(ws))
    assert parked.returncode == 5
    rid = next(json.loads(x) for x in parked.stdout.splitlines()
               if '"approval_requested"' in x)["request_id"]
    steps = [{"tool_calls": [["ask_user", {"question": "Pick a size", "choices": ["S", "M"]}]]},
             {"text": "Size noted."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "chat")
    try:
        child.expect("/help for keys")
        child.sendline("what size?")
        child.expect(r"\? Pick a size")
        child.sendline("XL")
        child.expect("not one of the choices")
        child.sendline("M")
        child.expect("Size noted.")
        child.expect("completed · 2 iterations")
        child.sendline("/waiting")
        child.expect(f"approval {rid}")
        child.expect(f"steerable approve {rid}")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    sessions = list((Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    tool_results = [json.loads(x)["message"]["content"] for s in sessions
                    for x in s.read_text().splitlines() if '"role":"tool"' in x]
    assert tool_results == ["The user answered: M"]
