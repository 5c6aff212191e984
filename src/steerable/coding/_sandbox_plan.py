"""What the bash sandbox shows of the machine: a file system built from a few parts.

The sandbox starts from an empty root and mounts only what a shell needs, read-only: the system
directories (``/usr``, ``/bin``, ``/lib*``, ``/etc`` less its password and key files), the
toolchains on the user's ``PATH`` (a ``.venv/bin`` brings its ``.venv``, ``~/.pyenv/shims`` its
``~/.pyenv``), then the workspace, writable. Everything else (other users' homes, ``/var``,
``/run`` and the sockets in it, ``/srv``, ``/mnt``...) is simply not there. Secrets that would
come into view through an exposed folder (a workspace that is the home, ``~/.cargo``'s
credentials) are covered by empty folders or an empty file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MountPlan", "plan_mounts"]

# Read-only system folders (those that exist; merged-/usr symlinks are recreated as links).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Password hashes, host keys, sudo rules: root may read them, a command has no need to.
ETC_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
               "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd")
# Credentials in a home folder, covered whenever a home is in view (a workspace that is, or
# contains, the home) or a toolchain folder holding one is exposed.
HOME_SECRETS = (
    ".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".netrc", ".git-credentials",
    ".npmrc", ".pypirc", ".yarnrc", ".gem/credentials", ".config/gh", ".config/gcloud",
    ".config/hub", ".config/op", ".config/steerable", ".local/share/steerable",
    ".local/share/keyrings", ".password-store", ".cargo/credentials", ".cargo/credentials.toml",
    ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history",
    ".terraform.d/credentials.tfrc.json", ".vault-token",
)
# Under these home folders a PATH entry brings only itself (and its siblings below), not the
# whole folder: they hold unrelated data (``~/.local/share`` has key rings, for one).
_SHARED_HOME_DIRS = {".local": ("bin", "lib", "share/pipx", "share/uv"), ".config": (),
                     ".cache": ()}
# Toolchains whose commands on PATH are proxies that read a second folder.
_COMPANIONS = {".cargo": (".rustup",)}
_TOOLCHAIN_BIN_NAMES = ("bin", "sbin", "shims")


@dataclass
class MountPlan:
    """The bwrap arguments for the file system, and what they make visible."""

    args: list[str] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)
    masked: list[str] = field(default_factory=list)

    def visible(self, path: str) -> bool:
        """Whether ``path`` (as the host sees it) can be seen inside the sandbox."""
        real = os.path.realpath(path)
        if any(_under(real, m) for m in self.masked):
            return False
        return any(_under(real, r) for r in self.readable)

    def add_read_only(self, path: str) -> None:
        if not any(_under(path, r) for r in self.readable):
            self.args += ["--ro-bind", path, path]
            self.readable.append(path)

    def cover(self, path: str) -> None:
        """Cover ``path`` (when it exists in view) with an empty folder or an empty file."""
        real = os.path.realpath(path)
        if not os.path.lexists(real) or real in self.masked:
            return
        if not any(_under(real, r) for r in self.readable):
            return
        if os.path.isdir(real):
            self.args += ["--tmpfs", real]
        else:
            self.args += ["--ro-bind", "/dev/null", real]
        self.masked.append(real)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _toolchain_dirs(path_dirs: Sequence[str], home: str | None) -> list[str]:
    """The folders that make the commands on PATH work: each entry's toolchain prefix."""
    out: list[str] = []
    for entry in path_dirs:
        if not entry or not os.path.isabs(entry):
            continue  # a relative entry (".") means the workspace, which is mounted anyway
        real = os.path.realpath(entry)
        if not os.path.isdir(real) or real in ("/", home):
            continue  # a PATH that names the whole file system or home brings neither
        if home and _under(real, home) and real != home:
            parts = Path(os.path.relpath(real, home)).parts
            top = os.path.join(home, parts[0])
            if parts[0] in _SHARED_HOME_DIRS:
                out.append(real)
                out += [os.path.join(top, sub) for sub in _SHARED_HOME_DIRS[parts[0]]]
            else:
                out.append(top if len(parts) > 1 else real)
                out += [os.path.join(home, c) for c in _COMPANIONS.get(parts[0], ())]
        elif os.path.basename(real) in _TOOLCHAIN_BIN_NAMES and os.path.dirname(real) != "/":
            out.append(os.path.dirname(real))  # /opt/node/bin -> /opt/node, .venv/bin -> .venv
        else:
            out.append(real)
    return [d for d in dict.fromkeys(out) if os.path.isdir(d)]


def _homes(env: Mapping[str, str]) -> list[str]:
    homes = [env.get("HOME") or os.path.expanduser("~"), "/root"]
    return [os.path.realpath(h) for h in dict.fromkeys(homes) if h and h != "/"]


def plan_mounts(writable: Sequence[Path], env: Mapping[str, str], *, network: bool,
                read_only: Sequence[Path] = ()) -> MountPlan:
    """The file system a sandboxed command sees (bwrap arguments, in mount order).

    ``read_only`` folders take the place of writable ones (the workspace of a turn that may not
    change files): mounted where a writable one would be, with the same home and toolchain
    rules, but not written.
    """
    plan = MountPlan()
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            plan.args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            plan.add_read_only(d)
    plan.args += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp"]
    ro = [os.path.realpath(r) for r in read_only]
    rw = [os.path.realpath(w) for w in writable]
    shown = [*rw, *ro]
    homes = _homes(env)
    home = homes[0] if homes else None
    if home and not any(_under(home, w) for w in shown):
        plan.args += ["--tmpfs", home]  # an empty, writable home (caches, dot files)
    for d in _toolchain_dirs(env.get("PATH", "").split(os.pathsep), home):
        if not any(_under(d, w) for w in shown):
            plan.add_read_only(d)
    if network:
        _expose_resolver(plan)
    for w in rw:
        plan.args += ["--bind", w, w]
        plan.readable.append(w)
    for r in ro:
        plan.args += ["--ro-bind", r, r]
        plan.readable.append(r)
    for secret in ETC_SECRETS:
        plan.cover(secret)
    for h in homes:
        for name in HOME_SECRETS:
            plan.cover(os.path.join(h, name))
    return plan


def _expose_resolver(plan: MountPlan) -> None:
    # /etc/resolv.conf is often a link into /run (systemd-resolved), which is not mounted.
    target = os.path.realpath("/etc/resolv.conf")
    if os.path.isfile(target) and not plan.visible(target):
        plan.args += ["--ro-bind", target, target]
        plan.readable.append(target)
