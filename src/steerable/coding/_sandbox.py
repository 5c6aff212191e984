"""The bash sandbox: bubblewrap (``bwrap``) around every command, when the machine has it.

A command sees a file system built for it (``_sandbox_plan``): system folders and the toolchains
on ``PATH`` read-only, the workspace writable, a private ``/tmp``, an empty home; nothing else of
the host. It runs with no capabilities at all (``--cap-drop ALL``), in a user namespace where the
kernel allows one, so even as root it cannot remount, unmount or mount anything: the hidden home
and ``/proc`` stay as they are. It gets its own PID namespace (it cannot read another process's
``/proc/PID/environ``, where an API key lives, nor signal it; and every process it started dies
when the command returns), its own IPC and host name, no network unless allowed, and resource
limits (``SandboxLimits``). Without ``bwrap`` (or on a kernel that refuses its namespaces) bash
runs unconfined and that is said once, as a warning on the ``steerable`` logger.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from steerable.coding._sandbox_plan import SYSTEM_DIRS, plan_mounts

__all__ = ["Sandbox", "SandboxLimits", "bwrap_usable", "confine_reader"]

log = logging.getLogger("steerable")

_warned = False
_PROBE = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
          "--unshare-net", "--cap-drop", "ALL", "--die-with-parent", "/bin/true"]
_NOT_FOUND = re.compile(
    r"^(?:/bin/|/usr/bin/)?bash: (?:line \d+: )?(\S+): (?:command not found|No such file or "
    r"directory)$", re.MULTILINE)


def _probe(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def _bwrap_mode() -> tuple[str, bool] | None:
    """(path of a working ``bwrap``, whether it can make a user namespace), or None."""
    if not sys.platform.startswith("linux"):
        return None
    path = shutil.which("bwrap")
    if path is None:
        return None
    if _probe([path, "--unshare-user", *_PROBE]):
        return path, True
    # Some kernels (or LSM policies) refuse unprivileged user namespaces; bwrap still confines,
    # and --cap-drop ALL still leaves a root caller without capabilities.
    return (path, False) if _probe([path, *_PROBE]) else None


def bwrap_usable() -> str | None:
    """The path of a ``bwrap`` that works here, or None (checked once per process)."""
    mode = _bwrap_mode()
    return None if mode is None else mode[0]


def _warn_unconfined(reason: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("bash runs UNCONFINED: %s. Install bubblewrap (apt-get install bubblewrap) "
                    "to sandbox it, or turn the sandbox off explicitly to silence this.", reason)


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits for every process of a sandboxed command (``setrlimit``, hard and soft).

    ``processes`` is ``RLIMIT_NPROC``, counted per user across the machine; Linux does not apply
    it to root, so as root the PID namespace (everything dies with the command) is what bounds a
    runaway fork. The others hold for root too.
    """

    processes: int = 4096
    file_size: int = 4 * 2**30
    """Largest file a process may write, in bytes (``RLIMIT_FSIZE``)."""
    cpu_seconds: int = 1800
    """CPU time per process (``RLIMIT_CPU``); the tool's own timeout bounds wall time."""
    memory: int = 8 * 2**30
    """Address space per process, in bytes (``RLIMIT_AS``)."""

    def prlimit_args(self) -> list[str]:
        return [f"--nproc={self.processes}", f"--fsize={self.file_size}",
                f"--cpu={self.cpu_seconds}", f"--as={self.memory}"]


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How bash commands are confined. ``enabled=False`` turns the sandbox off."""

    enabled: bool = True
    network: bool = False
    """Let commands reach the network (off: only their own loopback)."""
    limits: SandboxLimits | None = field(default_factory=SandboxLimits)
    """Resource limits (None: the caller's own). Applied with util-linux ``prlimit``."""

    def command(self, argv: Sequence[str], writable: Sequence[Path], cwd: Path,
                env: Mapping[str, str] | None = None, *,
                read_only: Sequence[Path] = ()) -> list[str]:
        """``argv`` wrapped in bwrap with ``writable`` folders (and ``read_only`` ones seen, not
        written), or unchanged when unconfined.

        ``env`` is the command's environment (its ``PATH`` and ``HOME`` decide which toolchains
        are shown); the process's own by default.
        """
        if not self.enabled:
            return list(argv)
        mode = _bwrap_mode()
        if mode is None:
            why = ("bwrap is not installed" if shutil.which("bwrap") is None
                   else "bwrap cannot create its namespaces on this machine")
            _warn_unconfined(why)
            return list(argv)
        bwrap, userns = mode
        args = [bwrap, *(["--unshare-user"] if userns else []), "--cap-drop", "ALL",
                "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent"]
        if not self.network:
            args.append("--unshare-net")
        plan = plan_mounts(writable, os.environ if env is None else env, network=self.network,
                           read_only=read_only)
        args += plan.args
        wrapped = [*args, "--chdir", str(cwd), "--", *argv]
        prlimit = shutil.which("prlimit") if self.limits is not None else None
        if self.limits is not None and prlimit is not None:
            wrapped = [prlimit, *self.limits.prlimit_args(), *wrapped]
        return wrapped

    def explain_missing(self, output: str, writable: Sequence[Path],
                        env: Mapping[str, str]) -> str | None:
        """A note for commands bash could not find that the host has but the sandbox hides."""
        if not self.enabled or _bwrap_mode() is None:
            return None
        plan = plan_mounts(writable, env, network=self.network)
        notes = []
        for name in dict.fromkeys(_NOT_FOUND.findall(output)):
            where = name if "/" in name else shutil.which(name, path=env.get("PATH", ""))
            if where and os.path.exists(where) and not plan.visible(where):
                notes.append(f"'{name}' exists on this machine ({os.path.realpath(where)}) but "
                             "is outside the bash sandbox, which shows only system folders, the "
                             "toolchains on PATH and the workspace")
        return "; ".join(notes) or None

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        mode = _bwrap_mode()
        if mode is None:
            return "unavailable (bash unconfined)"
        return ("bwrap" + (", user namespace" if mode[1] else "")
                + (" with network" if self.network else ", no network"))


def confine_reader(argv: Sequence[str], roots: Sequence[Path], cwd: Path) -> list[str] | None:
    """``argv`` (a program that reads the workspace, such as ripgrep) in a bwrap that shows
    only the roots (read-only), the system's libraries and the program; None without bwrap.

    A program walking the tree by path names would follow a folder swapped for a link out of
    the workspace; inside, there is nothing else to reach.
    """
    mode = _bwrap_mode()
    if mode is None:
        return None
    bwrap, userns = mode
    program = os.path.realpath(argv[0])
    args = [bwrap, *(["--unshare-user"] if userns else []), "--cap-drop", "ALL", "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--die-with-parent"]
    for d in SYSTEM_DIRS:
        if d == "/etc":
            continue
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    args += ["--ro-bind", program, program, "--dev", "/dev", "--proc", "/proc"]
    for root in roots:
        args += ["--ro-bind", str(root), str(root)]
    return [*args, "--chdir", str(cwd), "--", program, *argv[1:]]
