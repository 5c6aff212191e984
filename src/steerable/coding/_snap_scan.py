"""Turning the workspace into a tree of objects, cheaply, the way git's index does.

A folder is stored as a listing object: one line per entry, ``<kind><mode> <hash> <name>\\0``,
sorted by name, where kind is ``f`` (file: hash of its content), ``l`` (symlink: hash of its
target) or ``d`` (folder: hash of its own listing). A folder that did not change keeps its hash,
so a snapshot after a small change writes a few small objects.

Left out, as git leaves them out: what the ``.gitignore`` files and ``.git/info/exclude``
ignore, and ``.git`` itself.

What makes it cheap is the index, a cache kept beside the objects: per folder, its stat
signature, the signature of the ``.gitignore`` files that apply to it, its listing's hash and
each entry's stat signature and hash. A file whose (mtime, ctime, size, inode) did not change is
not read again; a folder whose own signature did not change is not listed again (nor its ignore
rules matched). Like git, a signature is only trusted when it is older than the moment it was
taken by more than the file system's clock tick (``RACY_NS``): a file changed twice within one
tick keeps the same mtime, so a fresh entry is hashed again until it has settled.

The index is only a cache: a missing, damaged or foreign one is rebuilt by reading every file.
"""

from __future__ import annotations

import marshal
import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from steerable.coding._snap_objects import ObjectStore
from steerable.coding._walk import ALWAYS_SKIPPED, IgnoreRules

__all__ = ["RACY_NS", "Entry", "Scanner", "diff_trees", "flatten", "read_listing"]

RACY_NS = 50_000_000
"""How much older than the moment it was taken a stat signature must be to be trusted."""

_INDEX_VERSION = 1
_EXCLUDE = ".git/info/exclude"  # the repository's own ignore rules, kept out of .gitignore

Entry = tuple[str, int, str]
"""(kind, mode, hash): kind ``f``, ``l`` or ``d``; mode the permission bits (0 for links)."""

# Per folder: (folder signature or None, ignore signature, listing hash,
#              {name: (kind, mode, hash, file signature or None)})
_Cached = tuple[Any, Any, str, dict[str, tuple[str, int, str, Any]]]


def _listing(entries: dict[str, tuple[str, int, str, Any]]) -> bytes:
    return b"".join(
        f"{e[0]}{e[1]:o} {e[2]} ".encode() + os.fsencode(name) + b"\0"
        for name, e in sorted(entries.items())
    )


def read_listing(objects: ObjectStore, digest: str) -> dict[str, Entry]:
    """The entries of the folder listing ``digest``."""
    out: dict[str, Entry] = {}
    for line in objects.get(digest).split(b"\0"):
        if not line:
            continue
        head, digest_b, name = line.split(b" ", 2)
        out[os.fsdecode(name)] = (chr(head[0]), int(head[1:], 8), digest_b.decode())
    return out


def flatten(objects: ObjectStore, tree: str, prefix: str = "") -> dict[str, Entry]:
    """Every path under ``tree`` (relative, '/'-separated); folders carry no hash here."""
    out: dict[str, Entry] = {}
    for name, (kind, mode, digest) in read_listing(objects, tree).items():
        path = f"{prefix}{name}"
        if kind == "d":
            out[path] = ("d", mode, "")
            out.update(flatten(objects, digest, path + "/"))
        else:
            out[path] = (kind, mode, digest)
    return out


def diff_trees(objects: ObjectStore, old: str, new: str,
               prefix: str = "") -> dict[str, tuple[Entry | None, Entry | None]]:
    """path -> (entry in ``old``, entry in ``new``) for every path that differs; equal folders
    are skipped by hash without being read."""
    if old == new:
        return {}
    a, b = read_listing(objects, old), read_listing(objects, new)
    out: dict[str, tuple[Entry | None, Entry | None]] = {}
    for name in sorted(a.keys() | b.keys()):
        ea, eb = a.get(name), b.get(name)
        if ea == eb:
            continue
        path = f"{prefix}{name}"
        if ea is not None and eb is not None and ea[0] == eb[0] == "d":
            if ea[1] != eb[1]:
                out[path] = (("d", ea[1], ""), ("d", eb[1], ""))
            out.update(diff_trees(objects, ea[2], eb[2], path + "/"))
            continue
        out[path] = (_shallow(ea), _shallow(eb))
        # A folder that appeared or went (or became a file): everything in it did too.
        if ea is not None and ea[0] == "d":
            out.update((sub, (e, None)) for sub, e in flatten(objects, ea[2], path + "/").items())
        if eb is not None and eb[0] == "d":
            out.update((sub, (None, e)) for sub, e in flatten(objects, eb[2], path + "/").items())
    return out


def _shallow(entry: Entry | None) -> Entry | None:
    if entry is None or entry[0] != "d":
        return entry
    return ("d", entry[1], "")


class Scanner:
    """Snapshots of one workspace into ``objects``, with the index at ``index_path``."""

    def __init__(self, root: Path, objects: ObjectStore, index_path: Path, *,
                 max_file_size: int, skip: Callable[[str], bool] | None = None) -> None:
        self.root = str(root)
        self.objects = objects
        self.index_path = index_path
        self.max_file_size = max_file_size
        self._skip = skip
        self._index: dict[str, _Cached] = {}
        self._index_id: tuple[int, int, int] | None = None
        self.skipped: list[str] = []
        """Files left out of the last snapshot because they are over ``max_file_size``."""

    # -- the index ------------------------------------------------------------------------------

    def _load_index(self) -> None:
        try:
            st = os.stat(self.index_path)
        except FileNotFoundError:
            self._index, self._index_id = {}, None
            return
        ident = (st.st_mtime_ns, st.st_ino, st.st_size)
        if ident == self._index_id:
            return  # what we hold is what is on disk: nobody else snapshotted meanwhile
        try:
            version, index = marshal.loads(self.index_path.read_bytes())
            if version != _INDEX_VERSION or not isinstance(index, dict):
                raise ValueError("another version")
        except (ValueError, EOFError, TypeError, OSError):
            index = {}  # only a cache: a damaged one costs a full read, never a wrong snapshot
        self._index, self._index_id = index, ident

    def _save_index(self, index: dict[str, _Cached]) -> None:
        tmp = self.index_path.with_name(f"{self.index_path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(marshal.dumps((_INDEX_VERSION, index)))
        os.replace(tmp, self.index_path)
        st = os.stat(self.index_path)
        self._index, self._index_id = index, (st.st_mtime_ns, st.st_ino, st.st_size)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop index entries naming objects that ``keep`` refuses (after pruning)."""
        self._load_index()
        index = {
            rel: cached for rel, cached in self._index.items()
            if keep(cached[2]) and all(keep(e[2]) for e in cached[3].values())
        }
        if len(index) != len(self._index):
            self._save_index(index)

    # -- scanning -------------------------------------------------------------------------------

    def snapshot(self) -> str:
        """Store the workspace as it is now and return its tree's hash (call under the lock)."""
        self._load_index()
        self.skipped = []
        fresh: dict[str, _Cached] = {}
        rules = IgnoreRules()
        now = time.time_ns()
        tree = self._scan(self.root, "", os.lstat(self.root), (), rules, fresh, now)
        if fresh != self._index:
            self._save_index(fresh)
        return tree

    def _scan(self, abspath: str, rel: str, st_dir: os.stat_result, ign_parent: Any,
              rules: IgnoreRules, fresh: dict[str, _Cached], now: int) -> str:
        prefix = abspath + "/"
        ign = (ign_parent, _signature(prefix + ".gitignore"))
        if not rel:
            ign = (ign, _signature(prefix + _EXCLUDE))
        dir_sig = (st_dir.st_mtime_ns, st_dir.st_ino)
        cached = self._index.get(rel)
        known = cached[3] if cached is not None and cached[1] == ign else {}
        names: Iterable[str]
        if cached is not None and cached[0] == dir_sig and cached[1] == ign:
            names = known.keys()  # the folder's entries are as they were: no listing needed
        else:
            names = self._list(abspath, rel, rules)
        remember: dict[str, tuple[str, int, str, Any]] = {}
        lstat = os.lstat
        # The hot loop of a snapshot: one lstat per entry, and for a file whose signature is
        # the one remembered, nothing else.
        for name in names:
            path = prefix + name
            try:
                st = lstat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed while we looked
            old = known.get(name)
            if (old is not None and old[3] is not None
                    and old[3] == (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
                    and (old[0] == "l") == stat.S_ISLNK(st.st_mode)):
                remember[name] = old
                continue
            found = self._entry(path, rel, name, st, ign, rules, fresh, now)
            if found is not None:
                remember[name] = found
        if cached is not None and cached[3] == remember:
            tree = cached[2]
        else:
            tree = self.objects.put_bytes(_listing(remember))
        settled = now - st_dir.st_mtime_ns > RACY_NS
        fresh[rel] = (dir_sig if settled else None, ign, tree, remember)
        return tree

    def _list(self, abspath: str, rel: str, rules: IgnoreRules) -> list[str]:
        # Load the ignore rules of this folder and of every folder above it (once per scan).
        parts = rel.split("/") if rel else []
        # A repository's .git/info/exclude comes first so the root .gitignore's own rules win.
        root_text = _read(os.path.join(self.root, _EXCLUDE)) + "\n" + _gitignore(self.root)
        rules.load("", root_text)
        for depth in range(1, len(parts) + 1):
            rules.load("/".join(parts[:depth]), _gitignore(os.path.join(self.root, *parts[:depth])))
        names = []
        with os.scandir(abspath) as it:
            for entry in it:
                name = entry.name
                if name in ALWAYS_SKIPPED:
                    continue
                path = f"{rel}/{name}" if rel else name
                if rules.ignored(path, entry.is_dir(follow_symlinks=False)):
                    continue
                if self._skip is not None and self._skip(entry.path):
                    continue
                names.append(name)
        return names

    def _entry(self, path: str, rel: str, name: str, st: os.stat_result, ign: Any,
               rules: IgnoreRules, fresh: dict[str, _Cached],
               now: int) -> tuple[str, int, str, Any] | None:
        """A new or changed entry (a folder: scanned)."""
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            sub = f"{rel}/{name}" if rel else name
            try:
                tree = self._scan(path, sub, st, ign, rules, fresh, now)
            except (FileNotFoundError, NotADirectoryError):
                return None
            return ("d", stat.S_IMODE(mode), tree, None)
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
            return None  # sockets, pipes, devices: nothing to put back
        sig = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
        kind = "l" if stat.S_ISLNK(mode) else "f"
        bits = 0 if kind == "l" else stat.S_IMODE(mode)
        digest: str | None
        if kind == "l":
            try:
                digest = self.objects.put_bytes(os.fsencode(os.readlink(path)))
            except FileNotFoundError:
                return None
        elif st.st_size > self.max_file_size:
            self.skipped.append(f"{rel}/{name}" if rel else name)
            return None
        else:
            digest = self.objects.put_file(path, st.st_size)
        if digest is None:
            return None
        settled = now - max(st.st_mtime_ns, st.st_ctime_ns) > RACY_NS
        return (kind, bits, digest, sig if settled else None)

    def reachable_from(self, trees: Iterator[str]) -> set[str]:
        """Every object the given trees use (themselves included)."""
        seen: set[str] = set()
        stack = list(trees)
        while stack:
            tree = stack.pop()
            if tree in seen:
                continue
            seen.add(tree)
            for kind, _mode, digest in read_listing(self.objects, tree).values():
                if kind == "d":
                    stack.append(digest)
                else:
                    seen.add(digest)
        return seen


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def _gitignore(folder: str) -> str:
    return _read(os.path.join(folder, ".gitignore"))


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)
