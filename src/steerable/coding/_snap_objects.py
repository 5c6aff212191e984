"""The content-addressed object store under undo: blobs and folder listings named by their hash.

An object is the zlib-compressed bytes of a file's content (or of a symlink's target, or of a
folder listing), stored at ``objects/ab/cdef...`` where ``abcdef...`` is the SHA-256 of the
uncompressed bytes. Objects are written to ``objects/tmp`` and renamed into place, so a process
killed mid-write leaves at worst a stray temporary file (removed by the next garbage collection),
never a half-written object under a real name. Reading checks the hash again: a damaged object is
an error, never silently wrong bytes put back into the user's tree.

``StoreLock`` serialises everything that writes the store (snapshots, undo, pruning) across
processes and threads: two sessions working in one folder share one store.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import secrets
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO

from steerable.errors import SteerableError

__all__ = ["CHUNK", "ObjectStore", "SnapshotStoreError", "StoreLock"]

CHUNK = 1 << 20
"""Files bigger than this are hashed and compressed in pieces of this size (never read whole)."""

_LEVEL = 1  # zlib's fastest level: source text still shrinks ~3x, and a snapshot stays cheap


class SnapshotStoreError(SteerableError):
    """The snapshot store cannot be read or written (a damaged object, a full disk)."""


class StoreLock:
    """An exclusive ``flock`` on ``path``: one writer of the store at a time, in any process.

    Each use opens its own descriptor, so two threads of one process exclude each other too.
    A process that dies holding it releases it with its descriptors.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._fh: IO[bytes] | None = None

    def __enter__(self) -> StoreLock:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fh = self._path.open("ab")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        except BaseException:
            fh.close()
            raise
        self._fh = fh
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fh is not None:
            self._fh.close()  # closing the descriptor releases the lock
            self._fh = None


class ObjectStore:
    """Objects under ``root/objects``, written atomically, checked when read."""

    def __init__(self, root: Path) -> None:
        self.root = root / "objects"
        self._tmp = self.root / "tmp"
        self._made: set[str] = set()

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest[2:]

    def has(self, digest: str) -> bool:
        return os.path.exists(self.path(digest))

    def _temp(self) -> tuple[int, str]:
        if "tmp" not in self._made:
            self._tmp.mkdir(parents=True, exist_ok=True)
            self._made.add("tmp")
        name = str(self._tmp / f"{os.getpid()}-{secrets.token_hex(8)}")
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), name

    def _publish(self, tmp: str, digest: str) -> None:
        shard = digest[:2]
        if shard not in self._made:
            (self.root / shard).mkdir(parents=True, exist_ok=True)
            self._made.add(shard)
        os.replace(tmp, self.path(digest))

    def put_bytes(self, data: bytes) -> str:
        """Store ``data`` (if it is not there yet) and return its hash."""
        digest = hashlib.sha256(data).hexdigest()
        if self.has(digest):
            return digest
        fd, tmp = self._temp()
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(zlib.compress(data, _LEVEL))
            self._publish(tmp, digest)
        except BaseException:
            _unlink(tmp)
            raise
        return digest

    def put_file(self, path: str, size: int) -> str | None:
        """Store the content of the file at ``path``; None if it vanished meanwhile."""
        try:
            fh = open(path, "rb")  # noqa: SIM115 - closed below on every path
        except FileNotFoundError:
            return None
        with fh:
            if size <= CHUNK:
                return self.put_bytes(fh.read())
            return self._put_stream(fh)

    def _put_stream(self, fh: IO[bytes]) -> str:
        # A big file: hash and compress it piece by piece into a temporary object, then name it.
        hasher = hashlib.sha256()
        squeeze = zlib.compressobj(_LEVEL)
        fd, tmp = self._temp()
        try:
            with os.fdopen(fd, "wb") as out:
                while piece := fh.read(CHUNK):
                    hasher.update(piece)
                    out.write(squeeze.compress(piece))
                out.write(squeeze.flush())
            digest = hasher.hexdigest()
            if self.has(digest):
                _unlink(tmp)
            else:
                self._publish(tmp, digest)
        except BaseException:
            _unlink(tmp)
            raise
        return digest

    def _pieces(self, digest: str) -> Iterator[bytes]:
        """The object's bytes, piece by piece, checked against its name at the end."""
        try:
            fh = self.path(digest).open("rb")
        except FileNotFoundError:
            raise SnapshotStoreError(
                f"snapshot object {digest[:12]} is missing from {self.root}; the store was "
                "damaged (or pruned meanwhile)") from None
        hasher = hashlib.sha256()
        expand = zlib.decompressobj()
        with fh:
            try:
                while piece := fh.read(CHUNK):
                    out = expand.decompress(piece)
                    hasher.update(out)
                    yield out
                tail = expand.flush()
            except zlib.error as exc:
                raise SnapshotStoreError(f"snapshot object {digest[:12]} is damaged: {exc}") \
                    from None
        hasher.update(tail)
        if hasher.hexdigest() != digest or not expand.eof:
            raise SnapshotStoreError(f"snapshot object {digest[:12]} is damaged (its content "
                                     "does not match its hash)")
        yield tail

    def get(self, digest: str) -> bytes:
        return b"".join(self._pieces(digest))

    def write_to(self, digest: str, target: str, mode: int) -> None:
        """Write the object's content to a new file ``target`` with ``mode``, atomically: it is
        assembled beside ``target`` and renamed over it only once complete and checked."""
        folder, name = os.path.split(target)
        tmp = os.path.join(folder, f".{name}.steerable-undo-{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                for piece in self._pieces(digest):
                    out.write(piece)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            _unlink(tmp)
            raise

    def all_objects(self) -> Iterator[tuple[str, Path]]:
        """Every stored object's hash and path (temporary files aside)."""
        if not self.root.is_dir():
            return
        for shard in os.scandir(self.root):
            if shard.name == "tmp" or not shard.is_dir():
                continue
            for entry in os.scandir(shard.path):
                yield shard.name + entry.name, Path(entry.path)

    def stray_temporaries(self) -> Iterator[Path]:
        """Temporary files left by writers that were killed (only call under the lock)."""
        if self._tmp.is_dir():
            yield from self._tmp.iterdir()

    def size(self) -> int:
        return sum(p.stat().st_size for _, p in self.all_objects())


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
