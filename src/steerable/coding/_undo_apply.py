"""Putting paths of the workspace back to stored entries: files, symlinks, folders, modes.

Only the paths named are touched. Removals go deepest first and creations shallowest first, so a
folder exists before its files and is empty before it goes. Each file is assembled beside its
target and renamed over it, so a file is never seen half restored; folder modes are set last
(a read-only folder must still receive its files).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Mapping

from steerable.coding._snap_objects import ObjectStore
from steerable.coding._snap_scan import Entry

__all__ = ["apply_entries"]


def _depth(path: str) -> int:
    return path.count("/")


def _remove(abspath: str) -> None:
    try:
        st = os.lstat(abspath)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        # A folder that should not exist: whatever is left in it (ignored build output, say)
        # was made after the snapshot it goes back to.
        shutil.rmtree(abspath)
    else:
        os.unlink(abspath)


def apply_entries(root: str, objects: ObjectStore, target: Mapping[str, Entry | None],
                  current: Mapping[str, Entry]) -> list[str]:
    """Make each path of ``target`` what it says (None: absent); returns the paths changed."""
    changed = sorted(p for p, e in target.items() if current.get(p) != e)
    for path in sorted((p for p in changed if target[p] is None), key=_depth, reverse=True):
        _remove(os.path.join(root, path))
    dirs: list[tuple[str, int]] = []
    for path in sorted((p for p in changed if target[p] is not None), key=_depth):
        entry = target[path]
        assert entry is not None
        kind, mode, digest = entry
        abspath = os.path.join(root, path)
        os.makedirs(os.path.dirname(abspath), exist_ok=True)
        now = current.get(path)
        if kind == "d":
            if now is not None and now[0] != "d":
                _remove(abspath)
            os.makedirs(abspath, exist_ok=True)
            dirs.append((abspath, mode))
            continue
        if now is not None and now[0] == "d":
            _remove(abspath)
        if kind == "f":
            objects.write_to(digest, abspath, mode)
        else:
            _link(os.fsdecode(objects.get(digest)), abspath)
    for abspath, mode in sorted(dirs, key=lambda d: d[0].count(os.sep), reverse=True):
        os.chmod(abspath, mode)
    return changed


def _link(target: str, abspath: str) -> None:
    tmp = f"{abspath}.steerable-undo-link"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, abspath)
