"""Background shells: ``bash(background=True)``, ``bash_output``, ``bash_kill``, the message
that tells the session a command ended, and no process left behind (front end killed too)."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from steerable import ToolContext
from steerable.coding import BackgroundShells, Sandbox, ShellNotice, Workspace, coding_tools
from steerable.coding._bg_shells import Shell
from steerable.tools._base import valid_home
from tests._components import missing
from tests.coding.conftest import call


def ctx(session: str = "s") -> ToolContext:
    return ToolContext(call_id="c", tool_name="bash", turn_id="t", session_id=session)


def alive(marker: str) -> list[str]:
    """Command lines of processes anywhere on the machine that contain ``marker``."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        line = " ".join(p.info["cmdline"] or [])
        if marker in line and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(line)
    return found


def wait_gone(marker: str, within: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within
    while (left := alive(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def marker() -> str:
    """A sleep duration no other process on the machine uses: a name to look processes up."""
    return f"{random.randint(1000, 9999)}.{random.randint(100, 999)}"


def bash_tools(ws: Workspace, shells: BackgroundShells) -> dict[str, Any]:
    return {t.name: t for t in coding_tools(ws, use_ripgrep=False, shells=shells,
                                            sandbox=Sandbox(enabled=False))}


async def test_output_is_new_since_the_last_read_then_the_state(ws: Workspace) -> None:
    notices: list[ShellNotice] = []
    shells = BackgroundShells(notify=notices.append)
    tools = bash_tools(ws, shells)
    started = await call(tools["bash"], ctx(), command="echo one; while [ ! -f go ]; do "
                         "sleep 0.02; done; echo two; exit 3", background=True)
    assert started.content.startswith("started in the background as bg1")
    for _ in range(100):
        first = (await call(tools["bash_output"], ctx(), id="bg1")).content
        if "one" in first:
            break
        await asyncio.sleep(0.02)
    assert first.startswith("one\n[bg1 running for")
    again = (await call(tools["bash_output"], ctx(), id="bg1")).content
    assert again.startswith("(no new output)\n[bg1 running")
    (ws.root / "go").write_text("")
    for _ in range(200):
        if notices:
            break
        await asyncio.sleep(0.02)
    [notice] = notices
    assert notice.session_id == "s" and notice.exit_code == 3
    assert notice.text.startswith("Background command bg1 finished (exit code 3, ")
    assert notice.text.endswith("\ntwo")  # what was unread; the notice counts as reading it
    last = (await call(tools["bash_output"], ctx(), id="bg1")).content
    assert last.startswith("(no new output)\n[bg1 exit code 3 after")
    await shells.aclose()


async def test_kill_another_session_and_unknown_ids(ws: Workspace) -> None:
    notices: list[ShellNotice] = []
    shells = BackgroundShells(notify=notices.append)
    tools = bash_tools(ws, shells)
    a, b = marker(), marker()
    await call(tools["bash"], ctx("a"), command=f"sleep {a} & sleep {b}", background=True)
    other = await call(tools["bash_output"], ctx("b"), id="bg1")
    assert other.is_error and "no background command 'bg1' (this session's: none)" in other.content
    assert (await call(tools["bash_kill"], ctx("b"), id="bg1")).is_error
    killed = await call(tools["bash_kill"], ctx("a"), id="bg1")
    assert killed.content.startswith("killed bg1 [bg1 killed after")
    assert not alive(f"sleep {a}") and not alive(f"sleep {b}")  # the whole group went
    assert "already ended" in (await call(tools["bash_kill"], ctx("a"), id="bg1")).content
    assert not notices  # whoever killed it knows
    await shells.aclose()


async def test_a_home_names_the_process_in_each_id_and_calls_say_where_they_run(
        ws: Workspace) -> None:
    shells = BackgroundShells(home="w7")
    tools = bash_tools(ws, shells)
    started = await call(tools["bash"], ctx(), command="sleep 30", background=True)
    assert started.content.startswith("started in the background as bg1@w7")
    assert tools["bash_output"].home_of({"id": "bg1@w7"}) == "w7"
    assert tools["bash_kill"].home_of({"id": " bg1@w7 "}) == "w7"
    assert tools["bash_output"].home_of({"id": "bg1"}) is None  # any process: it says "none"
    assert tools["bash"].home_of({"command": "a@b"}) is None  # not about a process's state
    killed = await call(tools["bash_kill"], ctx(), id="bg1@w7")
    assert killed.content.startswith("killed bg1@w7")
    await shells.aclose()


@given(st.text(max_size=100))
def test_an_id_the_model_wrote_names_a_valid_home_or_none(written: str) -> None:
    # Any text may come back as an id: a home taken from it always names a task queue the
    # Temporal server accepts (else a session's workflow task would fail on it, again and
    # again), and a valid home is taken whole.
    [output, _] = BackgroundShells().tools()
    home = output.home_of({"id": written})
    assert home is None or valid_home(home)
    tail = written.rpartition("@")[2].strip()
    if "@" in written and valid_home(tail):
        assert home == tail


async def test_a_session_runs_a_bounded_number_and_close_ends_them_all(ws: Workspace) -> None:
    shells = BackgroundShells(max_running=2)
    tools = bash_tools(ws, shells)
    for _ in range(2):
        assert not (await call(tools["bash"], ctx(), command="sleep 30",
                               background=True)).is_error
    third = await call(tools["bash"], ctx(), command="sleep 30", background=True)
    assert third.is_error and "2 background commands already run" in third.content
    assert not (await call(tools["bash"], ctx("other"), command="sleep 30",
                           background=True)).is_error
    assert [s.shell_id for s in await shells.stop_session("s")] == ["bg1", "bg2"]
    assert [s.shell_id for s in await shells.aclose()] == ["bg3"]
    refused = await call(tools["bash"], ctx(), command="true", background=True)
    assert refused.is_error and "closed" in refused.content


async def test_output_over_the_cap_is_dropped_oldest_first_and_said(ws: Workspace) -> None:
    notices: list[ShellNotice] = []
    shells = BackgroundShells(keep=1000, notify=notices.append)
    tools = bash_tools(ws, shells)
    await call(tools["bash"], ctx(), command="seq 1 2000; sleep 0.1", background=True)
    for _ in range(200):
        if notices:
            break
        await asyncio.sleep(0.02)
    [notice] = notices
    assert "earlier characters were dropped unread]" in notice.text
    assert notice.text.endswith("\n2000")
    await shells.aclose()


@given(st.lists(st.tuples(st.text(max_size=40), st.booleans()), max_size=30),
       st.integers(min_value=1, max_value=60))
def test_reads_plus_dropped_count_are_the_whole_output(chunks: list[tuple[str, bool]],
                                                     keep: int) -> None:
    """Whatever the chunks and the cap, every character is either read once, in order, or
    counted as dropped unread: nothing read twice, nothing lost silently."""
    shell = Shell("bg1", "s", "cmd", pid=0)
    read, missed = "", 0
    for text, look in chunks:
        shell.add(text, keep)
        assert len(shell.buffer) <= keep
        if look:
            got, lost = shell.take_unread()
            read, missed = read + got, missed + lost
    got, lost = shell.take_unread()
    read, missed = read + got, missed + lost
    whole = "".join(t for t, _ in chunks)
    assert missed + len(read) == len(whole)
    assert whole.endswith(read) or _in_order(read, whole)


def _in_order(read: str, whole: str) -> bool:
    it = iter(whole)
    return all(ch in it for ch in read)


# -- through the CLI ------------------------------------------------------------------------

def run_cli(env: dict[str, str], tmp_path: Path, steps: list[Any],
            *flags: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "s.json").write_text(json.dumps(steps))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "steerable", "run", "go", "--provider",
                           "scripted", "--script", str(tmp_path / "s.json"), "--workspace",
                           str(ws), "--yes", "--json", *flags], env=env, cwd=ws,
                          capture_output=True, text=True, timeout=60)


def test_a_command_that_ends_while_the_turn_runs_is_steered_in(cli_env: dict[str, str],
                                                                tmp_path: Path) -> None:
    long = marker()
    steps = [{"tool_calls": [["bash", {"command": "echo begun; while [ ! -f go ]; do sleep "
                                                  "0.02; done; echo finished-it; exit 3",
                                       "background": True}]]},
             {"tool_calls": [["bash_output", {"id": "bg1"}]]},
             {"tool_calls": [["bash", {"command": f"sleep {long}", "background": True}]]},
             {"tool_calls": [["bash", {"command": "touch go; sleep 1"}]]},
             {"text": "Both seen."}]
    res = run_cli(cli_env, tmp_path, steps)
    assert res.returncode == 0, res.stderr
    events = [json.loads(x) for x in res.stdout.splitlines()]
    ends = [e["content"] for e in events if e["kind"] == "tool_exec_end"]
    assert ends[0].startswith("started in the background as bg1")
    assert "[bg1 running for" in ends[1]
    notice = next(e for e in events if e["kind"] == "steering_injected")
    assert notice["text"].startswith("Background command bg1 finished (exit code 3")
    assert notice["text"].endswith("finished-it")
    states = [e["state"] for e in events if e["kind"] == "message_state"
              and e["message_id"] == next(m["message_id"] for m in events
                                          if m["kind"] == "message_state"
                                          and m["text"] == notice["text"])]
    assert states == ["queued", "delivered"]  # a message with a receipt (SPEC 10)
    # The second command was still running when the run ended: stopped, and said.
    assert f"stopped background command bg2 (sleep {long}): the run ended" in res.stderr
    assert not wait_gone(f"sleep {long}")


def _need_bwrap() -> None:
    if shutil.which("bwrap") is None or not Sandbox().describe().startswith("bwrap"):
        missing("BWRAP", "bubblewrap (bwrap) is not installed or cannot create namespaces here")


@pytest.mark.parametrize("sandbox", [True, False], ids=["bwrap", "unconfined"])
def test_killing_the_front_end_leaves_no_background_process(cli_env: dict[str, str],
                                                            tmp_path: Path,
                                                            sandbox: bool) -> None:
    """kill -9 of ``steerable run``: in the sandbox bwrap (--die-with-parent, its own PID
    namespace) takes the commands and their children with it; unconfined, the guard process
    kills their process groups once the front end's pipe to it closes, the foreground call's
    group too."""
    if sandbox:
        _need_bwrap()
    a, b, c = marker(), marker(), marker()
    steps = [{"tool_calls": [["bash", {"command": f"sleep {a} & sleep {b}",
                                       "background": True}]]},
             {"tool_calls": [["bash", {"command": f"echo fg-running; sleep {c}"}]]},
             {"text": "never"}]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "steerable", "run", "go", "--provider",
                             "scripted", "--script", str(tmp_path / "s.json"), "--workspace",
                             str(ws), "--yes", "--json", *([] if sandbox else ["--no-sandbox"])],
                            env=cli_env, cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the foreground command's own output (not its arguments)
            event = json.loads(line)
            if event["kind"] == "tool_exec_progress" and "fg-running" in event["text"]:
                break
        assert alive(f"sleep {a}") and alive(f"sleep {b}")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert not wait_gone(f"sleep {a}") and not wait_gone(f"sleep {b}")
        assert not wait_gone(f"sleep {c}")  # the foreground call's command, too
    finally:
        # Leave nothing if the test failed.
        for p in psutil.process_iter(["cmdline"]):
            line = " ".join(p.info["cmdline"] or [])
            if any(f"sleep {m}" in line for m in (a, b, c)):
                p.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_chat_an_idle_session_hears_that_a_command_ended(cli_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    """Idle: the notice starts a turn of its own, shown like any other."""
    ws = tmp_path / "project"
    ws.mkdir()
    steps = [{"tool_calls": [["bash", {"command": "while [ ! -f go ]; do sleep 0.02; done; "
                                                  "echo build-ok", "background": True}]]},
             {"text": "Started it."},
             {"text": "The build passed."}]
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    env = {**cli_env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    child = pexpect.spawn(sys.executable, ["-m", "steerable", "chat", "--yes", "--provider",
                                           "scripted", "--script", str(script), "--workspace",
                                           str(ws)], env=env, encoding="utf-8", timeout=30,
                          dimensions=(40, 160))
    try:
        child.expect("/help for keys")
        child.sendline("build it in the background")
        child.expect("Started it.")
        child.expect("completed · 2 iterations")
        (ws / "go").write_text("")
        child.expect("The build passed.")
        child.expect("completed · 1 iteration")
        child.sendline("/quit")  # not Ctrl+D: lost when typed while the chat prints
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    [saved] = (Path(cli_env["STEERABLE_DATA_DIR"]) / "sessions").glob("*.jsonl")
    contents = [json.loads(x)["message"]["content"] for x in saved.read_text().splitlines()
                if json.loads(x)["type"] == "message"]
    told = next(c for c in contents if c.startswith("Background command bg1 finished"))
    assert told.endswith("build-ok") and contents[-1] == "The build passed."


async def test_a_hard_abort_stops_the_commands_its_turn_started(ws: Workspace) -> None:
    from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, TurnStatus

    kept, dropped = marker(), marker()
    notices: list[ShellNotice] = []
    shells = BackgroundShells(notify=notices.append)
    provider = ScriptedProvider([
        Reply(tool_calls=[("bash", {"command": f"sleep {kept}", "background": True})]),
        Reply(text="Started."),
        Reply(tool_calls=[("bash", {"command": f"sleep {dropped}", "background": True})]),
        Reply(tool_calls=[("bash", {"command": "sleep 30"})])])
    agent = Agent(name="a", instructions="", provider=provider,
                  tools=list(bash_tools(ws, shells).values()))
    async with AgentLoop(agent) as loop:
        loop.register_hook(shells)
        assert (await loop.run_turn("start one", session_id="s")).status is TurnStatus.COMPLETED
        events = loop.subscribe(kinds=[EventKind.TOOL_EXEC_START])
        turn = loop.start_turn("start another", session_id="s")
        async for event in events:
            if event.arguments.get("command") == "sleep 30":
                break
        assert loop.interrupt_hard("s")
        assert (await turn).status is TurnStatus.ABORTED
        # The group is killed at once; its watcher then reaps it and marks the shell ended.
        for _ in range(200):
            if not alive(f"sleep {dropped}") and len(shells.running("s")) == 1:
                break
            await asyncio.sleep(0.05)
        assert not alive(f"sleep {dropped}")  # rolled back with its turn
        assert [s.shell_id for s in shells.running("s")] == ["bg1"] and alive(f"sleep {kept}")
    await shells.aclose()
    assert not notices and not alive(f"sleep {kept}")


async def test_a_kill_racing_the_end_gives_one_outcome_each(ws: Workspace) -> None:
    """Killed or finished, never both and never neither: a command stopped by bash_kill sends
    no notice, one that ended on its own sends exactly one, whatever the timing."""
    notices: list[ShellNotice] = []
    shells = BackgroundShells(notify=notices.append, max_running=64)
    tools = bash_tools(ws, shells)
    rng = random.Random(7)
    answers = {}
    for i in range(24):
        # The first surely ends before the kill, the second surely not; the rest race.
        command = ["true", "sleep 5"][i] if i < 2 else f"sleep 0.0{rng.randint(0, 4)}"
        await call(tools["bash"], ctx(), command=command, background=True)
        while i == 0 and not notices:
            await asyncio.sleep(0.01)
        await asyncio.sleep(rng.choice([0, 0.001, 0.01, 0.03, 0.05]))
        answers[f"bg{i + 1}"] = (await call(tools["bash_kill"], ctx(), id=f"bg{i + 1}")).content
    await shells.aclose()
    assert "already ended" in answers["bg1"] and answers["bg2"].startswith("killed")
    told = [n.shell_id for n in notices]
    assert len(told) == len(set(told))
    for shell_id, answer in answers.items():
        if answer.startswith("killed"):
            assert shell_id not in told
        else:
            assert "already ended" in answer and shell_id in told


async def test_a_notice_no_turn_can_take_is_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    from steerable import Agent, AgentLoop, ScriptedProvider
    from steerable.cli._app import tell_session

    loop = AgentLoop(Agent(name="a", instructions="", provider=ScriptedProvider([])))
    await loop.aclose()
    notice = ShellNotice("s", "bg3", "make", 0, "Background command bg3 finished")
    tell_session(loop, notice)  # a closed loop refuses it
    assert "background command bg3 ended, but session s was not told" in caplog.text


def test_a_command_ending_during_the_last_model_call_is_still_heard(
        cli_env: dict[str, str], tmp_path: Path) -> None:
    steps = [{"tool_calls": [["bash", {"command": "sleep 0.3; echo bg-out",
                                       "background": True}]]},
             {"text": "Final answer.", "delay": 1.5},
             {"text": "Heard of bg1."}]
    res = run_cli(cli_env, tmp_path, steps)
    assert res.returncode == 0, res.stderr
    events = [json.loads(x) for x in res.stdout.splitlines()]
    told = [e for e in events if e["kind"] == "message_state"
            and e["text"].startswith("Background command bg1 finished")]
    assert [e["state"] for e in told] == ["queued", "delivered"]
    assert told[0]["text"].endswith("bg-out")
    assert [e["text"] for e in events if e["kind"] == "turn_end"] == ["Heard of bg1."]
