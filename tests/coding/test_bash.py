"""bash: output, exit codes, caps, timeouts, environment, and a hard abort that kills the
whole process group (grandchildren included) through the real loop."""

from __future__ import annotations

import asyncio
import re

import psutil

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, ToolContext, TurnStatus
from steerable.coding import Sandbox, Workspace, coding_tools, make_bash_tool
from tests.coding.conftest import Progress, call


async def test_bash_runs_in_workspace_and_reports_exit_code(ws: Workspace, tools) -> None:
    res = await call(tools["bash"], command="pwd; echo oops >&2; exit 3")
    assert res.content == f"{ws.root}\noops\n[exit code 3]"
    assert res.is_error and res.metadata["exit_code"] == 3
    res = await call(tools["bash"], command="true")
    assert res.content == "(no output)\n[exit code 0]" and not res.is_error


async def test_bash_streams_output_as_progress(ws: Workspace, tools) -> None:
    progress = Progress()
    ctx = ToolContext(call_id="c", tool_name="bash", turn_id="t", session_id="s",
                      _report=progress)
    res = await call(tools["bash"], ctx, command="for i in 1 2 3; do echo line$i; done")
    assert "".join(progress.texts) == "line1\nline2\nline3\n"
    assert res.content.startswith("line1\nline2\nline3\n")


async def test_bash_caps_output_keeping_start_and_end(ws: Workspace) -> None:
    bash = make_bash_tool(ws, max_output=1000)
    res = await call(bash, command="seq 1 5000")
    assert res.content.startswith("1\n2\n3\n") and "4999\n5000\n[exit code 0]" in res.content
    assert "characters omitted: output capped at 1000 characters" in res.content
    assert len(res.content) < 1200


async def test_bash_timeout_kills_the_group(ws: Workspace, tools) -> None:
    res = await call(tools["bash"], command="sleep 30 & echo started $!; wait", timeout=0.5)
    assert res.is_error
    assert "timed out after 0.5 s; the command and its children were killed" in res.content
    pid = int(re.search(r"started (\d+)", res.content).group(1))  # type: ignore[union-attr]
    proc = _proc(pid)
    alive = psutil.wait_procs([proc], timeout=5)[1] if proc else []
    assert not alive


def _proc(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


async def test_a_second_cancel_does_not_cut_short_the_wait_for_the_killed_shell(
        ws: Workspace, tools) -> None:
    """A hard abort cancels the call; closing the loop cancels it once more a moment later.
    The call still ends only once the killed shell's exit is seen (reaped): cut short, its
    process object was left "still running" when the event loop closed."""
    started = asyncio.Event()
    pids: list[int] = []

    def report(text: str, data: object) -> None:
        pids.extend(int(n) for n in re.findall(r"pid (\d+)", text))
        started.set()

    ctx = ToolContext(call_id="c", tool_name="bash", turn_id="t", session_id="s",
                      _report=report)
    task = asyncio.ensure_future(call(tools["bash"], ctx, command="echo pid $$; sleep 30"))
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)  # the call kills the group and starts waiting for the exit
    task.cancel()
    await asyncio.wait((task,))
    assert task.cancelled()
    assert pids and not psutil.pid_exists(pids[0])  # killed and reaped, not left a zombie


async def test_bash_does_not_hang_on_background_children(ws: Workspace, tools) -> None:
    res = await call(tools["bash"], command="sleep 30 & echo bg")
    assert res.content.startswith("bg\n[exit code 0]")
    assert "background processes still writing output were stopped" in res.content


async def test_bash_hides_provider_keys(ws: Workspace, tools, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    res = await call(tools["bash"], command="env")
    assert "sk-very-secret" not in res.content and "HARMLESS_SETTING=visible" in res.content


async def test_bash_rejects_bad_arguments(ws: Workspace, tools) -> None:
    assert (await call(tools["bash"], command="  ")).is_error
    assert "timeout must be between" in (await call(tools["bash"], command="true",
                                                    timeout=-1)).content


async def test_hard_abort_kills_grandchildren(ws: Workspace) -> None:
    # bash -> sh -> sleep: a grandchild, which a plain kill of the shell would leave running.
    command = "sh -c 'sleep 60 & echo grandchild $!; wait' & wait"
    agent = Agent(provider=ScriptedProvider([Reply(tool_calls=[("bash", {"command": command})])]),
                  tools=coding_tools(ws, sandbox=Sandbox(enabled=False)))  # host PIDs
    async with AgentLoop(agent) as loop:
        sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_PROGRESS, EventKind.TOOL_EXEC_END])
        handle = loop.start_turn("go", "s1")
        pid = None
        async for event in sub:
            assert event.kind is EventKind.TOOL_EXEC_PROGRESS, event
            found = re.search(r"grandchild (\d+)", event.text)
            if found:
                pid = int(found.group(1))
                break
        assert pid is not None and psutil.pid_exists(pid)
        assert loop.interrupt_hard("s1")
        result = await handle
        assert result.status is TurnStatus.ABORTED and result.tools_run == ("bash",)
        proc = _proc(pid)
        if proc is not None:
            _, alive = psutil.wait_procs([proc], timeout=5)
            assert not alive, "the grandchild survived the abort"
        sub.close()


async def test_dry_run_previews_and_changes_nothing(ws: Workspace) -> None:
    (ws.root / "f.txt").write_text("a\n")
    script = [Reply(tool_calls=[("bash", {"command": "touch made"}),
                                ("edit", {"path": "f.txt", "old_text": "a", "new_text": "b"}),
                                ("read", {"path": "f.txt"})]), Reply(text="done")]
    agent = Agent(provider=ScriptedProvider(script), tools=coding_tools(ws), dry_run=True)
    async with AgentLoop(agent) as loop:
        result = await loop.run_turn("go", "s")
    contents = [m.content for m in result.messages if m.role == "tool"]
    assert contents[0] == f"[dry-run] bash would run in {ws.root}; nothing was run:\n$ touch made"
    assert contents[1].startswith("[dry-run] edit would change f.txt") and "+b\n" in contents[1]
    assert contents[2] == "     1\ta"
    assert not (ws.root / "made").exists() and (ws.root / "f.txt").read_text() == "a\n"


async def test_permission_rules_on_tool_arguments(ws: Workspace) -> None:
    calls = [("bash", {"command": "git status --short"}), ("bash", {"command": "rm -rf x"}),
             ("write", {"path": "src/a.py", "content": "x"}),
             ("write", {"path": "secrets/k", "content": "x"}), ("read", {"path": "src/a.py"})]
    agent = Agent(provider=ScriptedProvider([Reply(tool_calls=calls), Reply(text="ok")]),
                  tools=coding_tools(ws))
    asked: list[str] = []

    class Approver:
        def approve_tool(self, ctx):  # type: ignore[no-untyped-def]
            asked.append(f"{ctx.call.name} {dict(ctx.call.arguments)}")
            return False

    rules = [("allow", "bash(git status*)"), ("deny", "bash(rm *)"), ("allow", "write(src/**)"),
             ("ask", "read(src/*)")]
    async with AgentLoop(agent, permissions=rules) as loop:
        loop.register_hook(Approver())
        sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_SKIPPED, EventKind.TOOL_EXEC_END])
        await loop.run_turn("go", "s")
        sub.close()
        events = [e async for e in sub]
    outcome = {e.call_id: (e.kind, getattr(e, "detail", "")) for e in events}
    assert [outcome[f"call_{i}"][0] for i in range(1, 6)] == [
        EventKind.TOOL_EXEC_END, EventKind.TOOL_EXEC_SKIPPED, EventKind.TOOL_EXEC_END,
        EventKind.TOOL_EXEC_SKIPPED, EventKind.TOOL_EXEC_SKIPPED]
    assert "refused by the rule 'deny: bash(rm *)'" in outcome["call_2"][1]
    # deny beats allow; unmatched mutating calls and 'ask' read-only calls go to the approver
    assert asked == ["write {'path': 'secrets/k', 'content': 'x'}", "read {'path': 'src/a.py'}"]
    assert (ws.root / "src/a.py").read_text() == "x" and not (ws.root / "secrets").exists()
