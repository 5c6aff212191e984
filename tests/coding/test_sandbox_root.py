"""Escapes a root caller tried from inside the sandbox, and what the sandbox must still show.

These run as whoever runs the tests; CI (and this project's machines) run them as root, where
bubblewrap would keep every capability unless told to drop them. Each probe is shown to work
unconfined first where that is safe, so the test cannot pass for a reason other than the sandbox.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

from steerable.coding import Sandbox, SandboxLimits
from tests.coding.test_sandbox import OFF, ON, SECRET, _need_bwrap, bash

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a root-only escape: run as root")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


async def test_no_capabilities_inside(ws: Path) -> None:
    _need_bwrap()
    out = await bash(ws, "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status", ON)
    assert out.count("0000000000000000") == 3, out


@ROOT_ONLY
async def test_root_cannot_remount_the_root_read_write(ws: Path) -> None:
    _need_bwrap()
    out = await bash(ws, "mount -o remount,rw / && echo REMOUNTED; "
                         "mount -t tmpfs none /usr && echo MOUNTED", ON)
    assert "REMOUNTED" not in out and "MOUNTED" not in out


@ROOT_ONLY
async def test_root_cannot_unmount_the_hidden_home(ws: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _need_bwrap()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE")
    monkeypatch.setenv("HOME", str(home))
    assert "PRIVATE" in await bash(ws, "cat ~/.ssh/id_rsa", OFF)
    out = await bash(ws, "umount ~ ; umount -l ~; umount /tmp; cat ~/.ssh/id_rsa", ON)
    assert "PRIVATE" not in out and "No such file" in out


@ROOT_ONLY
async def test_root_cannot_unmount_proc_to_read_the_parents_environment(ws: Path) -> None:
    _need_bwrap()
    holder = subprocess.Popen(["sleep", "30"], env={**os.environ, "OPENAI_API_KEY": SECRET})
    try:
        read = (f"umount /proc; umount -l /proc; mount -t proc proc /proc; "
                f"cat /proc/{holder.pid}/environ; grep -a -l {SECRET} /proc/*/environ")
        assert SECRET in await bash(ws, read, OFF)
        out = await bash(ws, read, ON)
        assert SECRET not in out and "must be superuser" in out
    finally:
        holder.kill()
        holder.wait()


async def test_host_sockets_and_other_files_are_not_there(ws: Path) -> None:
    _need_bwrap()
    # A listening socket where daemons keep theirs (/run when we may write there, else /var/tmp),
    # and a secret in a folder no PATH entry or workspace leads to.
    base = Path("/run") if os.access("/run", os.W_OK) else Path("/var/tmp")
    folder = Path(tempfile.mkdtemp(dir=base))
    sock_path = folder / "docker.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    server.listen()
    (folder / "secret.txt").write_text("OTHER-USERS-SECRET")
    probe = (f"ls -la {folder}; cat {folder}/secret.txt; ls /run /var/run /home /srv /mnt 2>&1;"
             f" python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); "
             f"s.connect('{sock_path}'); print('CONNECTED')\"")
    try:
        assert "CONNECTED" in await bash(ws, probe, OFF)
        out = await bash(ws, probe, ON)
        assert "CONNECTED" not in out and "OTHER-USERS-SECRET" not in out
        assert "docker.sock" not in out
    finally:
        server.close()
        shutil.rmtree(folder)


async def test_a_workspace_that_is_the_home_hides_its_keys(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _need_bwrap()
    home = tmp_path / "home"
    for secret in (".ssh/id_ed25519", ".aws/credentials", ".config/gh/hosts.yml", ".netrc"):
        (home / secret).parent.mkdir(parents=True, exist_ok=True)
        (home / secret).write_text("KEY-" + secret)
    (home / "project.txt").write_text("mine")
    monkeypatch.setenv("HOME", str(home))
    probe = "cat project.txt ~/.ssh/id_ed25519 ~/.aws/credentials ~/.config/gh/hosts.yml ~/.netrc"
    assert (await bash(home, probe, OFF)).count("KEY-") == 4
    out = await bash(home, probe, ON)
    assert "mine" in out and "KEY-" not in out
    out = await bash(tmp_path, f"cat {home}/.ssh/id_ed25519 home/project.txt", ON)
    assert "mine" in out and "KEY-" not in out  # a workspace that contains the home


async def test_toolchains_on_path_stay_usable(ws: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    _need_bwrap()
    # A toolchain installed in the (hidden) home, as pyenv or rustup install theirs: its bin on
    # PATH and its library next to it.
    home = tmp_path / "home"
    tool = home / ".mytool"
    (tool / "lib").mkdir(parents=True)
    (tool / "lib" / "data").write_text("TOOLCHAIN-LIB")
    (tool / "bin").mkdir()
    (tool / "bin" / "mytool").write_text(f"#!/bin/sh\ncat {tool}/lib/data\n")
    (tool / "bin" / "mytool").chmod(0o755)
    # A command whose file lives where no PATH entry leads (a link out of the PATH folder).
    (home / "elsewhere").mkdir()
    (home / "elsewhere" / "hidden").write_text("#!/bin/sh\necho hi\n")
    (home / "elsewhere" / "hidden").chmod(0o755)
    (tool / "bin" / "linked").symlink_to(home / "elsewhere" / "hidden")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{tool / 'bin'}:{os.environ['PATH']}")
    out = await bash(ws, "mytool; python3 -c 'import sys; print(sys.version)'; ls ~", ON)
    assert "TOOLCHAIN-LIB" in out and "exit code 0" in out
    host = subprocess.run(["python3", "-c", "import sys; print(sys.version)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert host in out  # the same Python as the user's, not another one found elsewhere
    out = await bash(ws, "linked", ON)
    assert "exit code 127" in out and "outside the bash sandbox" in out
    out = await bash(ws, "no-such-command-anywhere", ON)
    assert "exit code 127" in out and "outside the bash sandbox" not in out


async def test_resource_limits_hold(ws: Path) -> None:
    _need_bwrap()
    box = Sandbox(limits=SandboxLimits(file_size=2**20, cpu_seconds=1, processes=64))
    out = await bash(ws, "head -c 3000000 /dev/zero > big; echo $(ulimit -t) $(ulimit -u)", box)
    assert (ws / "big").stat().st_size == 2**20 and "File size limit exceeded" in out
    assert "1 64\n" in out
    out = await bash(ws, "while :; do :; done", box, timeout=20)
    assert "exit code 152" in out or "exit code 137" in out  # SIGXCPU after 1 s of CPU


async def test_no_background_process_outlives_its_call(ws: Path) -> None:
    _need_bwrap()
    for box in (ON, OFF):
        marker = ws / f"late-{box.enabled}"
        out = await bash(ws, f"(sleep 1; touch {marker}) > /dev/null 2>&1 & "
                             f"setsid sh -c 'sleep 1; touch {marker}-setsid' > /dev/null 2>&1 &"
                             " echo started", box)
        assert "started" in out
        await asyncio.sleep(1.5)
        assert not marker.exists()
        if box.enabled:  # unconfined, a new session leaves the group: only a sandbox stops it
            assert not Path(f"{marker}-setsid").exists()
