"""The binary data of a JSON-lines session (images, files), kept beside its history.

``<session id>.blobs/<sha256>``: one file per distinct content, named by its hash, so the
history lines stay small (they hold the key) and the same image sent twice is kept once. A blob
is written to a temporary name, synced and renamed before the history line that refers to it
is written: a reader never meets a line whose blob is half written, and a process killed in
between leaves at most an unreferenced blob, which the next rewrite removes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from steerable.storage._records import MissingBlobError

__all__ = ["BlobFolder"]


class BlobFolder:
    """The blobs of one session: ``put`` before the lines that refer to them, ``read`` back."""

    def __init__(self, folder: Path, session_file: Path) -> None:
        self.folder = folder
        self._session_file = session_file

    def put(self, blobs: Mapping[str, bytes]) -> None:
        """Store each blob not stored yet, durably."""
        if not blobs:
            return
        self.folder.mkdir(mode=0o700, exist_ok=True)
        wrote = False
        for key, data in blobs.items():
            target = self.folder / key
            if target.exists():
                continue
            fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=self.folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            wrote = True
        if wrote:
            _sync(self.folder)

    def read(self, key: str) -> bytes:
        try:
            return (self.folder / key).read_bytes()
        except FileNotFoundError:
            raise MissingBlobError(
                f"session file {self._session_file} refers to an image or file stored as "
                f"{key}, which is missing from {self.folder}; restore that file (or delete the "
                "session)") from None

    def keep_only(self, keys: Iterable[str]) -> None:
        """Remove the blobs no longer referred to (after a rewrite of the history)."""
        if not self.folder.is_dir():
            return
        wanted = set(keys)
        for path in self.folder.iterdir():
            if path.name not in wanted:
                path.unlink(missing_ok=True)

    def delete(self) -> None:
        self.keep_only(())
        with contextlib.suppress(FileNotFoundError):
            self.folder.rmdir()


def _sync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
