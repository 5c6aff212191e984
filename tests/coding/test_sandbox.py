"""The bash sandbox: escapes that work unconfined must fail inside bubblewrap.

Outside CI these tests skip when ``bwrap`` is missing; CI sets ``STEERABLE_REQUIRE_BWRAP=1``
(and installs bubblewrap), so there a missing sandbox fails instead of skipping.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider
from steerable.coding import Sandbox, Workspace, _sandbox, coding_tools
from tests._components import missing

SECRET = "sk-sandbox-test-0123456789abcdef"


def _need_bwrap() -> None:
    if _sandbox.bwrap_usable() is None:
        missing("BWRAP", "bubblewrap (bwrap) is not installed or cannot create namespaces "
                "here; apt-get install bubblewrap")


async def bash(ws: Path, command: str, sandbox: Sandbox, timeout: float | None = None) -> str:
    args: dict[str, object] = {"command": command}
    if timeout is not None:
        args["timeout"] = timeout
    provider = ScriptedProvider([Reply(tool_calls=[("bash", args)]),
                                 Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(Workspace(ws), sandbox=sandbox)))
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_END])
    await loop.run_turn("go", session_id="s")
    await loop.aclose()
    (end,) = sub.drain_nowait()
    assert end.kind is EventKind.TOOL_EXEC_END
    return end.content


ON = Sandbox()
OFF = Sandbox(enabled=False)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


async def test_another_processs_environ_is_out_of_reach(ws: Path) -> None:
    _need_bwrap()
    # A process holding the key in its environment, as the agent's own process does.
    holder = subprocess.Popen(["sleep", "30"], env={**os.environ, "OPENAI_API_KEY": SECRET})
    try:
        read = f"tr '\\0' '\\n' < /proc/{holder.pid}/environ; grep -a -l {SECRET} /proc/*/environ"
        assert SECRET in await bash(ws, read, OFF)  # the escape, unconfined
        out = await bash(ws, read, ON)
        assert SECRET not in out and "No such file" in out
    finally:
        holder.kill()
        holder.wait()


async def test_only_the_workspace_is_writable(ws: Path) -> None:
    _need_bwrap()
    # Outside /tmp (the sandbox has its own /tmp): a folder of the real file system.
    folder = Path(tempfile.mkdtemp(dir="/var/tmp"))
    outside = folder / "outside.txt"
    try:
        out = await bash(ws, f"echo x > {outside}; echo y > inside.txt; echo z > /tmp/t; "
                             "cat /tmp/t; touch /usr/s8-probe", ON)
        assert not outside.exists() and "No such file or directory" in out
        assert "Read-only file system" in out and not Path("/usr/s8-probe").exists()
        assert (ws / "inside.txt").read_text() == "y\n"
        assert "z" in out and not Path("/tmp/t").exists()  # /tmp is the sandbox's own
        await bash(ws, f"echo x > {outside}", OFF)  # unconfined the same write is an escape
        assert outside.exists()
    finally:
        shutil.rmtree(folder)


async def test_home_is_hidden(ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _need_bwrap()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE")
    monkeypatch.setenv("HOME", str(home))
    assert "PRIVATE" in await bash(ws, "cat ~/.ssh/id_rsa", OFF)
    out = await bash(ws, "cat ~/.ssh/id_rsa; ls -a ~", ON)
    assert "PRIVATE" not in out and "No such file" in out


async def test_no_network_unless_allowed(ws: Path) -> None:
    _need_bwrap()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def accept() -> None:
        server.settimeout(10)
        try:
            while True:
                conn, _ = server.accept()
                accepted.append(True)
                conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    probe = f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>&1 && echo CONNECTED"
    try:
        assert "CONNECTED" not in await bash(ws, probe, ON)
        assert "CONNECTED" in await bash(ws, probe, Sandbox(network=True))
        assert "CONNECTED" in await bash(ws, probe, OFF)
        for _ in range(100):  # the accepting thread may still be taking the last connection
            if len(accepted) == 2:
                break
            await asyncio.sleep(0.05)
    finally:
        server.close()
        thread.join(5)
    assert len(accepted) == 2


async def test_own_pid_namespace(ws: Path) -> None:
    _need_bwrap()
    out = await bash(ws, f"kill -0 {os.getpid()} 2>&1 || echo CANNOT; ls /proc | grep -c '^[0-9]'",
                     ON)
    assert "CANNOT" in out
    assert int(out.split("CANNOT")[1].split()[0]) < 10  # only the sandbox's own few processes


async def test_a_hard_abort_kills_sandboxed_children(ws: Path) -> None:
    _need_bwrap()
    marker = ws / "late"
    provider = ScriptedProvider([Reply(tool_calls=[("bash", {"command": f"sleep 1; touch {marker}"})]),
                                 Reply(text="x")])
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(Workspace(ws), sandbox=ON)))
    sub = loop.subscribe(kinds=[EventKind.TOOL_EXEC_START])
    handle = loop.start_turn("go", session_id="s")
    await sub.__anext__()
    await asyncio.sleep(0.2)
    assert loop.interrupt_hard("s")
    await handle
    await loop.aclose()
    await asyncio.sleep(1.5)
    assert not marker.exists()


async def test_a_timeout_kills_sandboxed_background_children(ws: Path) -> None:
    _need_bwrap()
    marker = ws / "late"
    out = await bash(ws, f"(sleep 1; touch {marker}) & wait", ON, timeout=0.3)
    assert "timed out after 0.3 s" in out
    await asyncio.sleep(1.5)
    assert not marker.exists()


async def test_unconfined_bash_is_said_once(ws: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(_sandbox, "_bwrap_mode", lambda: None)
    monkeypatch.setattr(_sandbox, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="steerable"):
        assert "hi" in await bash(ws, "echo hi", ON)
        assert "hi" in await bash(ws, "echo hi", ON)
    warnings = [r for r in caplog.records if "UNCONFINED" in r.getMessage()]
    assert len(warnings) == 1
    caplog.clear()
    monkeypatch.setattr(_sandbox, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="steerable"):
        await bash(ws, "echo hi", OFF)  # turned off on purpose: nothing to say
    assert not [r for r in caplog.records if "UNCONFINED" in r.getMessage()]
