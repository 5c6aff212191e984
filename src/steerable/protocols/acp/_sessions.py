"""ACP sessions: which folder each session works in, and its history replayed as updates.

An ACP session is a steerable session (same id, same store) plus the folder the editor opened
it in (``cwd``). That folder is kept in a small JSON file beside the session store, so
``session/list`` can say where each session belongs and ``session/load`` can reopen it after a
restart. The file is rewritten whole through a temporary file and a rename, so a crash leaves
the old or the new version, never half of one.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    ContentToolCallContent,
    ToolCallStart,
    UserMessageChunk,
)

from steerable._messages import Message
from steerable.errors import ConfigurationError
from steerable.protocols.acp._updates import ToolView, Update, text_block, tool_kind

__all__ = ["SessionRecord", "SessionRegistry", "replay"]


@dataclass(slots=True)
class SessionRecord:
    session_id: str
    cwd: str
    created: float = field(default_factory=time.time)
    title: str = ""


class SessionRegistry:
    """Session id -> folder, kept in ``path`` (in memory only when ``path`` is None)."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._records: dict[str, SessionRecord] = {}
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the ACP session list {path}: {exc}; move "
                                     "it away to start a new one") from None
        for sid, entry in (raw.get("sessions") or {}).items():
            if isinstance(entry, dict) and isinstance(entry.get("cwd"), str):
                self._records[sid] = SessionRecord(sid, entry["cwd"],
                                                   float(entry.get("created", 0.0)),
                                                   str(entry.get("title", "")))

    def get(self, session_id: str) -> SessionRecord | None:
        return self._records.get(session_id)

    def put(self, record: SessionRecord) -> None:
        self._records[record.session_id] = record
        self._save()

    def __iter__(self) -> Iterator[SessionRecord]:
        return iter(list(self._records.values()))

    def _save(self) -> None:
        if self._path is None:
            return
        self._path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": 1, "sessions": {
            r.session_id: {"cwd": r.cwd, "created": r.created, "title": r.title}
            for r in self._records.values()}}
        fd, tmp = tempfile.mkstemp(prefix=".acp-sessions.", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(body, fh)
            os.replace(tmp, self._path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _results(messages: Sequence[Message]) -> dict[str, Message]:
    return {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}


def replay(messages: Sequence[Message], view: ToolView) -> list[Update]:
    """A saved conversation as the updates that show it again (``session/load``): user
    messages, the assistant's text, and each tool call with how it ended and its result."""
    results = _results(messages)
    out: list[Update] = []
    for m in messages:
        if m.role == "user" and m.text:
            out.append(UserMessageChunk(session_update="user_message_chunk",
                                        content=text_block(m.text)))
        elif m.role == "assistant":
            if m.text:
                out.append(AgentMessageChunk(session_update="agent_message_chunk",
                                             content=text_block(m.text)))
            for call in m.tool_calls:
                out.append(_replayed_call(call, results.get(call.id), view))
    return out


def _replayed_call(call: Any, result: Message | None, view: ToolView) -> ToolCallStart:
    arguments = dict(call.arguments)
    content: list[Any] = []
    diff = view.diff(call.name, arguments) if call.name == "edit" else None
    if diff is not None:
        content.append(diff)
    if result is not None:
        content.append(ContentToolCallContent(type="content", content=text_block(result.text)))
    return ToolCallStart(
        session_update="tool_call", tool_call_id=call.id,
        title=view.title(call.name, arguments),
        kind=tool_kind(call.name, view.tools.get(call.name)),
        status="failed" if result is None or result.is_error else "completed",
        raw_input=arguments, content=content or None, locations=view.locations(arguments))
