"""``steerable chat`` through a pseudo-terminal: steer, follow-up, Ctrl+C twice, Ctrl+D."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect


def test_chat_steer_follow_up_and_double_ctrl_c(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    wait_for = "echo waiting; while [ ! -f {0} ]; do sleep 0.05; done; echo got {0}"
    steps = [
        {"tool_calls": [["bash", {"command": wait_for.format("go1")}]]},
        {"text": "Steered answer."},
        {"text": "Follow-up answer."},
        {"tool_calls": [["bash", {"command": wait_for.format("never")}]]},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--provider",
                                           "scripted", "--script", str(script), "--workspace",
                                           str(ws)], env=env, encoding="utf-8", timeout=30,
                          dimensions=(40, 160))
    try:
        child.expect("/help for keys")
        child.sendline("start the job")
        child.expect("▶ bash")
        child.expect("waiting")
        child.sendline("also check the tests")
        child.expect("steering sent: also check the tests")
        child.sendline(">> then write docs")
        child.expect("follow-up queued: then write docs")
        (ws / "go1").write_text("")
        child.expect("steering delivered: also check the tests")
        child.expect("Steered answer.")
        child.expect("completed · 2 iterations")
        child.expect("Follow-up answer.")
        child.expect("completed · 1 iteration")
        child.sendline("run forever")
        child.expect("waiting")
        child.sendcontrol("c")
        child.expect("Ctrl\\+C again within 2 s")
        child.sendcontrol("c")
        child.expect("aborted · 1 iteration")
        # Ctrl+D quits. Typed while the chat still prints, it reaches the terminal before the
        # prompt and is lost (as for a person): pressed again until the chat is gone.
        for _ in range(10):
            child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
            if child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=3) == 0:
                break
        else:
            raise AssertionError("Ctrl+D at the prompt did not end the chat")
    finally:
        child.close()
    assert child.exitstatus == 0
    sessions = list((Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1
    saved = [json.loads(x) for x in sessions[0].read_text().splitlines()]
    contents = [r["message"]["content"] for r in saved if r["type"] == "message"]
    # the aborted turn was rolled back; the steered turn and the follow-up were saved in order
    assert contents[0] == "start the job" and "also check the tests" in contents
    assert contents[-2:] == ["then write docs", "Follow-up answer."]
    assert "run forever" not in contents


def _spawn(cli_env, tmp_path: Path, ws: Path, steps: list, *args: str) -> pexpect.spawn:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    return pexpect.spawn(sys.executable, ["-m", "steerable", *args, "--provider", "scripted",
                                          "--script", str(script), "--workspace", str(ws)],
                         env=env, encoding="utf-8", timeout=30, dimensions=(40, 160))


def test_chat_a_bare_y_while_no_question_is_open_is_not_sent_as_steering(
        cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    steps = [{"tool_calls": [["bash", {"command": "echo waiting; while [ ! -f go ]; do "
                                                  "sleep 0.05; done"}]]},
             {"text": "Finished."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "chat", "--yes")
    try:
        child.expect("/help for keys")
        child.sendline("start")
        child.expect("waiting")
        child.sendline("y")
        child.expect("not sent: 'y' looks like an answer to an approval question")
        (ws / "go").write_text("")
        child.expect("Finished.")
        child.expect("completed · 2 iterations")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    sessions = list((Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    saved = [json.loads(x) for x in sessions[0].read_text().splitlines()]
    contents = [r["message"]["content"] for r in saved if r["type"] == "message"]
    assert "y" not in contents and contents[0] == "start"


def test_chat_always_lasts_for_its_session_not_after_new(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    call = {"tool_calls": [["bash", {"command": "echo one"}]]}
    steps = [call, {"text": "First."}, call, {"text": "Second."}, call, {"text": "Third."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "chat")
    try:
        child.expect("/help for keys")
        child.sendline("one")
        child.expect("allow\\?")
        child.sendline("a")
        child.expect("added rule for this session: allow: bash\\(echo one\\)")
        child.expect("First.")
        child.expect("completed · 2 iterations")
        child.sendline("again")  # same session: the rule allows it, nothing asked
        child.expect("Second.")
        assert "wants to run" not in child.before
        child.expect("completed · 2 iterations")
        child.sendline("/new")
        child.expect("new session")
        child.sendline("in the new session")
        child.expect("allow\\?")  # asked again
        child.sendline("n")
        child.expect("⊘ bash denied: the user said no")
        child.expect("Third.")
        child.expect("completed · 2 iterations")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()


def test_run_a_y_typed_before_the_question_does_not_answer_it(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    steps = [{"tool_calls": [["write", {"path": "b.txt", "content": "x"}]], "delay": 1.5},
             {"text": "Not written."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "run", "write b")
    try:
        child.expect("waiting for the model")
        child.sendline("y")  # typed ahead, for nothing the user has seen yet
        child.expect("allow\\? \\[y\\]es")
        child.sendline("n")
        child.expect("Not written.")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 4 and not (ws / "b.txt").exists()


def test_chat_always_on_a_line_no_rule_can_cover_says_so(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    call = {"tool_calls": [["bash", {"command": "echo one >> log.txt"}]]}  # a redirection
    steps = [call, {"text": "First."}, call, {"text": "Second."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "chat")
    try:
        child.expect("/help for keys")
        child.sendline("one")
        child.expect("allow\\?")
        child.sendline("a")
        child.expect("allowed this once: no rule can cover this line")
        child.expect("First.")
        child.expect("completed · 2 iterations")
        assert "added rule" not in child.before
        child.sendline("again")
        child.expect("wants to run")  # asked again, as it said
        child.sendline("y")
        child.expect("Second.")
        child.expect("completed · 2 iterations")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert (ws / "log.txt").read_text() == "one\none\n"


def test_chat_lists_edits_and_withdraws_queued_messages(cli_env, tmp_path: Path) -> None:
    ws = tmp_path / "project"
    ws.mkdir()
    wait_for = "echo waiting; while [ ! -f {0} ]; do sleep 0.05; done; echo got {0}"
    steps = [{"tool_calls": [["bash", {"command": wait_for.format("go1")}]]},
             {"text": "Steered answer."}, {"text": "Follow-up answer."}]
    child = _spawn(cli_env, tmp_path, ws, steps, "chat", "--yes")
    try:
        child.expect("/help for keys")
        child.sendline("/queue")
        child.expect("nothing is queued")
        child.sendline("start the job")
        child.expect("waiting")
        child.sendline("check the tests")
        child.expect("steering sent: check the tests")
        child.sendline(">> write docs")
        child.expect("follow-up queued: write docs")
        child.sendline(">> and a changelog")
        child.expect("follow-up queued: and a changelog")
        child.sendline("/queue")
        child.expect("1. \\[message\\] check the tests · queued")
        child.expect("2. \\[message\\] write docs · queued")
        child.expect("3. \\[message\\] and a changelog · queued")
        child.sendline("/edit 1 check the tests twice")
        child.expect("message 1 now reads: check the tests twice")
        child.sendline("/revoke 3")
        child.expect("message 3 withdrawn")
        child.sendline("/revoke 9")
        child.expect("no message 9 in the last /queue listing")
        (ws / "go1").write_text("")
        child.expect("steering delivered: check the tests twice")
        child.expect("Steered answer.")
        child.expect("Follow-up answer.")
        child.expect("completed · 1 iteration")
        child.sendline("/revoke 1")
        child.expect("too late: message 1 no longer waits")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    sessions = list((Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl"))
    saved = [json.loads(x) for x in sessions[0].read_text().splitlines()]
    contents = [r["message"]["content"] for r in saved if r["type"] == "message"]
    assert "check the tests twice" in contents and "write docs" in contents
    assert "and a changelog" not in contents and "check the tests" not in contents
