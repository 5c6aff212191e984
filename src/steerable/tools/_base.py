"""The tool seam: what the loop needs from a tool, and the context a running tool gets.

A tool has a name, a description, a JSON schema for its arguments and a ``read_only`` flag
(undeclared means mutating: that only costs parallelism, never correctness). The loop calls
``validate`` before ``run``, and ``preview`` instead of ``run`` for a mutating tool in dry-run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from steerable._messages import ToolResult
from steerable.providers._base import ToolSpec

__all__ = ["BaseTool", "Tool", "ToolContext"]


@dataclass(slots=True, kw_only=True)
class ToolContext:
    """Handed to a running tool: who called it, and how to report progress.

    ``progress`` is safe to call from the tool's own thread (sync tools run in a worker thread).
    ``cancelled`` (a ``threading.Event``) is set when the turn is aborted or the tool timed out,
    so a sync tool that loops can stop early; async tools are cancelled the usual asyncio way.
    """

    call_id: str
    tool_name: str
    turn_id: str
    session_id: str
    parent_turn_id: str | None = None
    iteration: int = 0
    dry_run: bool = False
    resumed: bool = False
    """True when this call may already have run (in part) before: its turn was resumed from a
    checkpoint taken while it was running, in a process that then died. Tools with side
    effects can use it to check before doing them twice (execution is at-least-once for
    exactly this call)."""
    _cancel_event: threading.Event | None = None
    _cancel_requested: bool = False
    _report: Callable[[str, Mapping[str, Any]], None] | None = None

    @property
    def cancelled(self) -> threading.Event:
        # Made on first use: most tools never look, and an Event costs more than a tool call.
        if self._cancel_event is None:
            self._cancel_event = threading.Event()
            if self._cancel_requested:
                self._cancel_event.set()
        return self._cancel_event

    def cancel(self) -> None:
        """Set ``cancelled`` (the loop calls this on abort and timeout)."""
        self._cancel_requested = True
        if self._cancel_event is not None:
            self._cancel_event.set()

    def progress(self, text: str, **data: Any) -> None:
        """Emit ``TOOL_EXEC_PROGRESS`` with ``text`` and any JSON-able ``data``."""
        if not isinstance(text, str):
            raise TypeError(f"progress text must be a str, got {type(text).__name__}")
        if self._report is not None:
            self._report(text, data)


@runtime_checkable
class Tool(Protocol):
    """What the loop calls. Subclass ``BaseTool`` or use ``@tool`` rather than start from here."""

    name: str
    description: str
    read_only: bool
    timeout: float | None

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Return the arguments to run with, or raise ``ToolArgumentsError``."""
        ...

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Do the work; return a ``str``, a ``ToolResult``, or anything JSON-able."""
        ...

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        """Say what ``run`` would do, without doing it (dry-run)."""
        ...


class BaseTool:
    """A convenient base for class-based tools: override ``run`` (and ``preview``)."""

    name: str = ""
    description: str = ""
    read_only: bool = False
    timeout: float | None = None
    permission_key: str | None = None
    """The argument that permission patterns such as ``write(src/**)`` match against."""

    @property
    def parameters(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": {}}

    def permission_subjects(self, arguments: Mapping[str, Any]) -> list[str]:
        """What permission rules match for this call: by default the ``permission_key`` value."""
        key = self.permission_key
        if key is None or key not in arguments:
            return []
        return [str(arguments[key])]

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return arguments

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        raise NotImplementedError(f"tool {self.name!r} does not implement run()")

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        shown = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str)
        return f"[dry-run] {self.name} was not run; it would have been called with {shown}"


def result_from_return(value: Any) -> ToolResult:
    """Turn whatever a tool returned into the ``ToolResult`` the model will read."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("")
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return ToolResult(str(dump()))
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return ToolResult(str(value))
