"""The bash sandbox: bubblewrap (``bwrap``) around every command, when the machine has it.

Inside, the workspace (and any extra roots) is writable, the rest of the file system is
read-only, and the places that hold secrets are hidden behind empty folders: the user's home,
``/root``, ``/run/user`` (ssh and gpg agents, session buses). The command gets its own PID
namespace with a fresh ``/proc`` (it cannot read another process's ``/proc/PID/environ``, where
an API key lives, nor signal it), its own ``/tmp``, no network unless allowed, and dies with the
tool (``--die-with-parent``). Without ``bwrap`` (or on a kernel that refuses its namespaces)
bash runs unconfined and that is said once, as a warning on the ``steerable`` logger.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Sandbox", "bwrap_usable"]

log = logging.getLogger("steerable")

_SECRET_DIRS = ("/root", "/run/user")
_warned = False


@functools.cache
def bwrap_usable() -> str | None:
    """The path of a ``bwrap`` that works here, or None (checked once per process)."""
    if not sys.platform.startswith("linux"):
        return None
    path = shutil.which("bwrap")
    if path is None:
        return None
    try:
        probe = subprocess.run(
            [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
             "--unshare-net", "--die-with-parent", "/bin/true"],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if probe.returncode == 0 else None


def _warn_unconfined(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("bash runs UNCONFINED: %s. Install bubblewrap (apt-get install bubblewrap) "
                    "to sandbox it, or turn the sandbox off explicitly to silence this.", reason)


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How bash commands are confined. ``enabled=False`` turns the sandbox off."""

    enabled: bool = True
    network: bool = False
    """Let commands reach the network (off: only their own loopback)."""

    def command(self, argv: Sequence[str], writable: Sequence[Path], cwd: Path, *,
                read_only: Sequence[Path] = ()) -> list[str]:
        """``argv`` wrapped in bwrap with ``writable`` folders (and ``read_only`` ones seen,
        not written), or unchanged when unconfined."""
        if not self.enabled:
            return list(argv)
        bwrap = bwrap_usable()
        if bwrap is None:
            why = ("bwrap is not installed" if shutil.which("bwrap") is None
                   else "bwrap cannot create its namespaces on this machine")
            _warn_unconfined(why)
            return list(argv)
        args = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--tmpfs", "/tmp", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--die-with-parent"]
        if not self.network:
            args.append("--unshare-net")
        for hidden in _hidden_dirs([*writable, *read_only]):
            args += ["--tmpfs", hidden]
        for folder in writable:
            args += ["--bind", str(folder), str(folder)]
        for folder in read_only:
            args += ["--ro-bind", str(folder), str(folder)]
        return [*args, "--chdir", str(cwd), "--", *argv]

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        if bwrap_usable() is None:
            return "unavailable (bash unconfined)"
        return "bwrap" + (" with network" if self.network else ", no network")


def _hidden_dirs(writable: Sequence[Path]) -> list[str]:
    home = os.environ.get("HOME") or os.path.expanduser("~")
    out: list[str] = []
    for d in (home, *_SECRET_DIRS):
        if not d or d == "/" or not os.path.isdir(d) or d in out:
            continue
        # Never hide a folder the command must write in (a workspace under /root, say): the
        # writable binds come after, on top of the empty folder, so only hide true ancestors.
        if any(Path(d) == w for w in writable):
            continue
        out.append(d)
    return out
