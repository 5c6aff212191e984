"""What the undo tests compare: a workspace's whole state, bytes, modes and links included."""

from __future__ import annotations

import os
import stat
from pathlib import Path

Fingerprint = dict[str, tuple[str, int, bytes]]


def fingerprint(root: Path, *, skip: frozenset[str] = frozenset()) -> Fingerprint:
    """path -> (kind, permission bits, content or link target) for everything under ``root``."""
    out: Fingerprint = {}
    for folder, dirs, files in os.walk(root):
        rel_folder = os.path.relpath(folder, root)
        dirs[:] = [d for d in dirs if d not in skip]
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.normpath(os.path.join(rel_folder, name))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", 0, os.fsencode(os.readlink(path)))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d", stat.S_IMODE(st.st_mode), b"")
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode), Path(path).read_bytes())
    return out
