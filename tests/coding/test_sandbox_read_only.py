"""The read-only workspace of a turn whose write gate is closed (``Sandbox.command(read_only=)``).

It must be the same sandbox as a writable turn's in everything but the one mount: the same
system and toolchain folders, the same empty home, the same covered secrets.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable.coding import Sandbox
from steerable.coding._sandbox_plan import plan_mounts
from tests.coding.test_sandbox import _need_bwrap


def _layout(root: Path) -> dict[str, Path]:
    home = root / "home" / "me"
    for secret in (".ssh/id_ed25519", ".aws/credentials"):
        (home / secret).parent.mkdir(parents=True, exist_ok=True)
        (home / secret).write_text("KEY")
    (home / ".venv" / "bin").mkdir(parents=True, exist_ok=True)
    (home / "proj").mkdir(exist_ok=True)
    (root / "elsewhere").mkdir(exist_ok=True)
    return {"home": home, "in home": home / "proj", "above home": root / "home",
            "elsewhere": root / "elsewhere"}


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(["home", "in home", "above home", "elsewhere"]),
       network=st.booleans(), venv_on_path=st.booleans())
def test_a_read_only_workspace_differs_from_a_writable_one_only_in_its_mount(
        tmp_path: Path, where: str, network: bool, venv_on_path: bool) -> None:
    places = _layout(tmp_path)
    home = places["home"]
    path = f"{home / '.venv' / 'bin'}:/usr/bin" if venv_on_path else "/usr/bin"
    env = {"HOME": str(home), "PATH": path}
    ws = places[where]
    writable = plan_mounts([ws], env, network=network)
    read_only = plan_mounts([], env, network=network, read_only=[ws])
    real = os.path.realpath(ws)
    bind = writable.args.index("--bind")
    assert writable.args[bind:bind + 3] == ["--bind", real, real]
    expected = [*writable.args[:bind], "--ro-bind", *writable.args[bind + 1:]]
    assert read_only.args == expected
    assert "--bind" not in read_only.args
    assert read_only.readable == writable.readable and read_only.masked == writable.masked


def test_a_closed_gate_sandbox_reads_the_workspace_but_neither_writes_nor_sees_secrets(
        tmp_path: Path) -> None:
    _need_bwrap()
    home = _layout(tmp_path)["home"]
    (home / "proj" / "notes.txt").write_text("NOTES")
    env = {**os.environ, "HOME": str(home)}
    probe = ("cat proj/notes.txt; echo x > proj/notes.txt; touch new.txt; "
             "cat ~/.ssh/id_ed25519 ~/.aws/credentials; true")
    argv = Sandbox().command(["/bin/bash", "-c", probe], (), home, env, read_only=[home])
    done = subprocess.run(argv, cwd=home, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    out = done.stdout + done.stderr
    assert "NOTES" in out and "Read-only file system" in out, out
    assert "KEY" not in out, out
    assert (home / "proj" / "notes.txt").read_text() == "NOTES"
    assert not (home / "new.txt").exists()
