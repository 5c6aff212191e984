"""The loop's events as ACP ``session/update`` payloads (pure functions over values).

What the editor sees of a turn: the model's text (``agent_message_chunk``) and thinking
(``agent_thought_chunk``), each tool call announced once when the model declares it
(``tool_call``, status ``pending``, kind from the tool's family, a diff for edits) and then
``tool_call_update`` as it starts, ends or is skipped, steering where it reached the model
(``user_message_chunk``), the ``todo`` tool's plan (``plan``), and token use (``usage_update``)
when the window is known. Sub-turns
show through the tool call that runs them, not their own text.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from pathlib import Path
from typing import Any, Literal

from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PlanEntry,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallLocation,
    ToolCallProgress,
    ToolCallStart,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)

from steerable._events import Event, EventKind
from steerable._messages import ToolCall

__all__ = ["ToolView", "Update", "call_start", "text_block", "tool_kind", "translate"]

Update = (AgentMessageChunk | AgentThoughtChunk | UserMessageChunk | ToolCallStart
          | ToolCallProgress | UsageUpdate | AgentPlanUpdate)

_KINDS: dict[str, ToolKind] = {
    "read": "read", "ls": "read", "grep": "search", "find": "search", "write": "edit",
    "edit": "edit", "bash": "execute", "bash_output": "execute", "bash_kill": "execute",
}
_FAMILY_KINDS: dict[str, ToolKind] = {"read": "read", "write": "edit", "bash": "execute"}
_RESULT_CAP = 20_000
# ACP's plan statuses; the todo tool says "done" where ACP says "completed". The tool has no
# priorities, so every entry is ACP's middle one.
_PlanStatus = Literal["pending", "in_progress", "completed"]
_PLAN_STATUS: dict[str, _PlanStatus] = {"pending": "pending", "in_progress": "in_progress",
                                        "done": "completed"}
_CALL_KINDS = frozenset({EventKind.TOOL_EXEC_START, EventKind.TOOL_EXEC_PROGRESS,
                         EventKind.TOOL_EXEC_END, EventKind.TOOL_EXEC_SKIPPED})


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def tool_kind(name: str, tool: Any | None) -> ToolKind:
    """The ACP kind of a call: by the built-in tool's name, else by its permission family
    (``grep`` is of the ``read`` family but searches), else ``read`` for a read-only tool."""
    if name in _KINDS:
        return _KINDS[name]
    family = getattr(tool, "permission_family", None)
    if isinstance(family, str) and family in _FAMILY_KINDS:
        return _FAMILY_KINDS[family]
    if tool is not None and getattr(tool, "read_only", False):
        return "read"
    return "other"


class ToolView:
    """How the calls of one session's workspace are shown: titles, paths, diffs."""

    def __init__(self, root: Path, tools: Mapping[str, Any]) -> None:
        self.root = root
        self.tools = tools

    def _path(self, arguments: Mapping[str, Any]) -> Path | None:
        raw = arguments.get("path")
        if not isinstance(raw, str) or not raw.strip():
            return None
        p = Path(raw).expanduser()
        return p if p.is_absolute() else self.root / p

    def title(self, name: str, arguments: Mapping[str, Any]) -> str:
        path = arguments.get("path")
        if name == "bash" and isinstance(arguments.get("command"), str):
            return f"`{arguments['command'][:200]}`"
        if name in ("grep", "find") and isinstance(arguments.get("pattern"), str):
            return f"{name} {arguments['pattern'][:200]!r}"
        verb = {"read": "Read", "write": "Write", "edit": "Edit", "ls": "List"}.get(name)
        if verb and isinstance(path, str):
            return f"{verb} {path}"
        return name

    def locations(self, arguments: Mapping[str, Any]) -> list[ToolCallLocation] | None:
        path = self._path(arguments)
        if path is None:
            return None
        line = arguments.get("offset")
        return [ToolCallLocation(path=str(path), line=line if isinstance(line, int)
                                 and line >= 0 else None)]

    def diff(self, name: str, arguments: Mapping[str, Any]) -> FileEditToolCallContent | None:
        """ACP diff content for a write or edit, worked out before it runs (the old text is
        the file as it is now)."""
        path = self._path(arguments)
        if path is None:
            return None
        if name == "write" and isinstance(arguments.get("content"), str):
            old = _read(path)
            return FileEditToolCallContent(type="diff", path=str(path), old_text=old,
                                           new_text=arguments["content"])
        if name == "edit" and isinstance(arguments.get("old_text"), str) and isinstance(
                arguments.get("new_text"), str):
            return FileEditToolCallContent(type="diff", path=str(path),
                                           old_text=arguments["old_text"],
                                           new_text=arguments["new_text"])
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # a new file (or one diffing cannot show): the diff is all new text


def call_start(view: ToolView, call: ToolCall) -> ToolCallStart:
    """The ``tool_call`` that announces a declared call, before it runs or is asked."""
    arguments = dict(call.arguments)
    diff = view.diff(call.name, arguments)
    return ToolCallStart(
        session_update="tool_call", tool_call_id=call.id, title=view.title(call.name, arguments),
        kind=tool_kind(call.name, view.tools.get(call.name)), status="pending",
        raw_input=arguments, locations=view.locations(arguments),
        content=[diff] if diff is not None else None)


def _terminal(terminal_id: str) -> TerminalToolCallContent:
    return TerminalToolCallContent(type="terminal", terminal_id=terminal_id)


def _result_content(view: ToolView, name: str, arguments: Mapping[str, Any],
                    text: str, terminal_id: str | None) -> list[Any]:
    shown = text if len(text) <= _RESULT_CAP else text[:_RESULT_CAP] + "\n[... cut]"
    # The terminal stays shown in the call after it is released (ACP keeps its output).
    content: list[Any] = [] if terminal_id is None else [_terminal(terminal_id)]
    diff = view.diff(name, arguments) if name == "edit" else None
    if diff is not None:
        content.append(diff)
    content.append(ContentToolCallContent(type="content", content=text_block(shown)))
    return content


def translate(event: Event, view: ToolView, arguments: Mapping[str, Mapping[str, Any]],
              context_window: int | None,
              terminals: Mapping[str, str] | None = None,
              announced: Container[str] = ()) -> list[Update]:
    """The updates one event of a session's top-level turn gives (often none).

    ``arguments`` maps call ids to their arguments (remembered from ``LLM_RESPONSE``), so an
    update can carry the edit's diff again with its result; ``terminals`` maps call ids to
    the editor terminal they run in. A sub-turn's events show only for its calls the editor
    was told of (``announced``: they were asked about), so each such call also ends there.
    """
    terminals = terminals or {}
    if event.parent_turn_id is not None and not (
            event.kind in _CALL_KINDS and getattr(event, "call_id", None) in announced):
        return []
    if event.kind in (EventKind.LLM_DELTA, EventKind.LLM_RESPONSE):
        return _model_updates(event, view, context_window)
    if event.kind in _CALL_KINDS:
        return _call_updates(event, view, arguments.get(getattr(event, "call_id", ""), {}),
                             terminals)
    if event.kind is EventKind.PLAN_UPDATED:
        # ACP's plan is the whole list each time, as the tool's event is.
        return [AgentPlanUpdate(session_update="plan", entries=[
            PlanEntry(content=item["content"], priority="medium",
                      status=_PLAN_STATUS.get(item["status"], "pending"))
            for item in event.items])]
    if event.kind is EventKind.STEERING_INJECTED:
        return [UserMessageChunk(session_update="user_message_chunk",
                                 content=text_block(event.text),
                                 field_meta={"steerable": {"steering": True}})]
    return []


def _model_updates(event: Event, view: ToolView, context_window: int | None) -> list[Update]:
    """The model's text and thoughts as chunks; its tool calls announced; the context used."""
    if event.kind is EventKind.LLM_DELTA:
        if not event.text:
            return []
        chunk = text_block(event.text)
        if event.thinking:
            return [AgentThoughtChunk(session_update="agent_thought_chunk", content=chunk)]
        return [AgentMessageChunk(session_update="agent_message_chunk", content=chunk)]
    if event.kind is EventKind.LLM_RESPONSE:
        out: list[Update] = [call_start(view, c) for c in event.tool_calls]
        if event.usage is not None and context_window:
            used = event.usage.input_tokens + event.usage.output_tokens
            out.append(UsageUpdate(session_update="usage_update", used=used,
                                   size=max(context_window, used)))
        return out
    return []


def _call_updates(event: Event, view: ToolView, args: Mapping[str, Any],
                  terminals: Mapping[str, str]) -> list[Update]:
    """A tool call's progress: started, its output so far, its result, or why it did not run
    (``args`` are its arguments, so an edit's result shows its diff again)."""
    if event.kind is EventKind.TOOL_EXEC_START:
        return [ToolCallProgress(session_update="tool_call_update", tool_call_id=event.call_id,
                                 status="in_progress")]
    if event.kind is EventKind.TOOL_EXEC_PROGRESS:
        terminal = event.data.get("terminalId")
        shown: Any = _terminal(str(terminal)) if terminal is not None else \
            ContentToolCallContent(type="content", content=text_block(event.text))
        return [ToolCallProgress(session_update="tool_call_update", tool_call_id=event.call_id,
                                 content=[shown])]
    if event.kind is EventKind.TOOL_EXEC_END:
        return [ToolCallProgress(
            session_update="tool_call_update", tool_call_id=event.call_id,
            status="failed" if event.is_error else "completed",
            content=_result_content(view, event.tool_name, args, event.content,
                                    terminals.get(event.call_id)),
            raw_output=event.content[:_RESULT_CAP])]
    if event.kind is EventKind.TOOL_EXEC_SKIPPED:
        why = f"not run ({event.reason})" + (f": {event.detail}" if event.detail else "")
        return [ToolCallProgress(
            session_update="tool_call_update", tool_call_id=event.call_id, status="failed",
            content=[ContentToolCallContent(type="content", content=text_block(why))],
            field_meta={"steerable": {"skipped": event.reason}})]
    return []
