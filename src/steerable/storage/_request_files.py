"""The JSONL store's index of waiting requests: small files in ``<directory>/.requests/``.

Each waiting request is ``<request_id>.open`` (its session id); an answer is
``<request_id>.answer`` (a JSON object), created with ``O_CREAT | O_EXCL`` so that of two
processes answering at once exactly one succeeds (it stays when the request is closed, as the
record that it was answered); ``resume.<checkpoint_id>`` is made the same
way by the one process that resumes a parked turn. Request ids and checkpoint ids are
URL-safe tokens, so they are safe file names; anything else is refused before it reaches the
file system. Files are written whole to a temporary name and linked into place, so a crash
leaves either no file or a complete one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RequestFiles"]

_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def _name(value: str) -> str:
    if not isinstance(value, str) or not _SAFE.match(value) or value.startswith("."):
        raise KeyError(f"not a request id: {value!r}")
    return value


class RequestFiles:
    """``RequestIndex`` over a folder (see the module's docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / name

    def _create(self, name: str, data: bytes) -> bool:
        """Write ``name`` whole, unless it exists (False then)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self._path(name)
        tmp = self._path(f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            try:
                os.link(tmp, target)  # atomic, and fails if it exists: exactly one creator
            except FileExistsError:
                return False
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def index_requests(self, session_id: str, request_ids: Sequence[str]) -> None:
        for rid in request_ids:
            self._create(f"{_name(rid)}.open", session_id.encode())

    def request_session(self, request_id: str) -> str | None:
        try:
            return self._path(f"{_name(request_id)}.open").read_text()
        except (FileNotFoundError, KeyError):
            return None

    def answer_request(self, request_id: str, answer: Mapping[str, Any]) -> bool:
        data = json.dumps(dict(answer), ensure_ascii=False).encode()
        return self._create(f"{_name(request_id)}.answer", data)

    def request_answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for rid in request_ids:
            try:
                raw = json.loads(self._path(f"{_name(rid)}.answer").read_bytes())
            except (FileNotFoundError, KeyError):
                continue
            if isinstance(raw, dict):
                out[rid] = raw
        return out

    def waiting_requests(self) -> list[tuple[str, str]]:
        if not self.directory.is_dir():
            return []
        out = []
        for path in self.directory.glob("*.open"):
            rid = path.name[: -len(".open")]
            if self._path(f"{rid}.answer").exists():
                continue
            with contextlib.suppress(FileNotFoundError):
                out.append((rid, path.read_text()))
        return out

    def claim_resume(self, checkpoint_id: str) -> bool:
        return self._create(f"resume.{_name(checkpoint_id)}", b"")

    def close_requests(self, request_ids: Sequence[str]) -> None:
        for rid in request_ids:
            with contextlib.suppress(FileNotFoundError, KeyError):
                self._path(f"{_name(rid)}.open").unlink()  # the answer stays: "answered"
