"""The recording file: one JSON object per line, in the order things happened.

A recording starts with a ``header`` line (format version, the agents and their tools, the
permission rules) followed by entries of these types:

- ``turn``: a top-level turn was started (input, session, the session's history before it);
- ``control``: an inbound command (steering, a follow-up, an interrupt, a cancel, an approval
  answer, a revoke, an edit, a send) as its ``verb`` and the fields of its wire form
  (``Command.fields``), with ``after`` = how many events the loop had emitted when it was made
  (its position). Version 1 named the loop method instead (``action``); it is read still;
- ``llm``: one provider call: the request as sent and every chunk streamed back (or the error);
- ``tool``: one tool's raw result, before any ``after_tool`` hook changed it;
- ``event``: one event, in the JSON form of ``event_to_dict``.

Kept apart from the recorder and the player so that the file can keep its shape while they change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steerable._messages import ToolCall, Usage
from steerable.errors import (
    ContextOverflowError,
    FatalProviderError,
    ProviderError,
    RetryableProviderError,
    ScriptExhaustedError,
)
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    RetryNotice,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
)
from steerable.replay._errors import RecordingError
from steerable.storage._records import message_from_record, message_to_record

__all__ = [
    "FORMAT",
    "VERSION",
    "Recording",
    "chunk_from_json",
    "chunk_to_json",
    "error_from_json",
    "error_to_json",
    "load_recording",
    "request_to_json",
    "shorten_request",
]

FORMAT = "steerable-recording"
VERSION = 2
_READS = (1, 2)
"""Versions this steerable reads: 1 named each control by a loop method (``_V1_CONTROLS``)."""

_V1_CONTROLS: Mapping[str, tuple[str, Mapping[str, Any]]] = {
    "inject_steering": ("steer", {}), "inject_follow_up": ("follow_up", {}),
    "interrupt_graceful": ("interrupt", {}), "interrupt_hard": ("interrupt", {"hard": True}),
    "cancel": ("cancel", {}), "send": ("send", {}), "revoke_message": ("revoke", {}),
    "edit_message": ("edit", {}), "resolve_approval": ("approval", {}),
}


def _upgrade_control(entry: dict[str, Any]) -> dict[str, Any]:
    """A version 1 control (``action``: the loop method) in the form of version 2 (``verb``)."""
    action = entry.pop("action", None)
    if action is None:
        return entry
    if action not in _V1_CONTROLS:
        raise RecordingError(f"unknown recorded control {action!r}")
    verb, extra = _V1_CONTROLS[action]
    return {**entry, "verb": verb, **extra}

_ERRORS: Mapping[str, type[ProviderError]] = {
    cls.__name__: cls
    for cls in (ProviderError, ContextOverflowError, RetryableProviderError, FatalProviderError,
                ScriptExhaustedError)
}


def request_to_json(request: LLMRequest) -> dict[str, Any]:
    """What a replay compares: every message, the tools offered (whole: name, description,
    schema, read-only flag), what the model may do with them (``tool_choice``, a reply schema),
    the model and parameters."""
    choice = request.tool_choice
    return {
        "model": request.model,
        "tools": json.loads(json.dumps([
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters),
             "read_only": bool(t.read_only)} for t in request.tools], default=str)),
        "params": json.loads(json.dumps(dict(request.params), default=str)),
        "tool_choice": {"mode": choice.mode, "only": list(choice.only or ()) or None,
                        "max_tokens": choice.max_tokens, "reason": choice.reason},
        "answer_schema": json.loads(json.dumps(request.answer_schema, default=str)),
        "messages": [message_to_record(m) for m in request.messages],
    }


def shorten_request(request: dict[str, Any], previous: list[Any]) -> dict[str, Any]:
    """``request`` with the messages it shares with the agent's previous request left out
    (``prefix`` counts them): a turn resends its history on every call, and writing it whole
    each time would make a recording grow with the square of its length."""
    messages = request["messages"]
    k = 0
    limit = min(len(previous), len(messages))
    while k < limit and previous[k] == messages[k]:
        k += 1
    if k == 0:
        return request
    return {**request, "prefix": k, "messages": messages[k:]}


def _expand_requests(entries: list[dict[str, Any]]) -> None:
    last: dict[str, list[Any]] = {}
    for entry in sorted((e for e in entries if e["type"] == "llm"),
                        key=lambda e: (str(e.get("agent")), int(e.get("n", 0)))):
        request = entry.get("request")
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            raise RecordingError(f"LLM call #{entry.get('n')} has no request")
        prefix = int(request.pop("prefix", 0))
        previous = last.get(str(entry.get("agent")), [])
        if prefix > len(previous):
            raise RecordingError(f"LLM call #{entry.get('n')} of {entry.get('agent')!r} refers "
                                 "to messages the recording does not have")
        request["messages"] = previous[:prefix] + request["messages"]
        last[str(entry.get("agent"))] = request["messages"]


def chunk_to_json(chunk: Chunk) -> dict[str, Any]:
    if isinstance(chunk, TextDelta):
        return {"t": "text", "text": chunk.text}
    if isinstance(chunk, ThinkingDelta):
        return {"t": "thinking", "text": chunk.text}
    if isinstance(chunk, ToolCallChunk):
        call = chunk.call
        out: dict[str, Any] = {"t": "tool_call", "id": call.id, "name": call.name,
                               "arguments": dict(call.arguments)}
        if call.arguments_error:
            out["arguments_error"] = call.arguments_error
        return out
    if isinstance(chunk, ToolArgsDelta):
        return {"t": "tool_args", "index": chunk.index, "name": chunk.name, "text": chunk.text}
    if isinstance(chunk, RetryNotice):
        return {"t": "retry", "attempt": chunk.attempt, "reason": chunk.reason,
                "delay": chunk.delay}
    usage = None if chunk.usage is None else [chunk.usage.input_tokens, chunk.usage.output_tokens]
    return {"t": "end", "usage": usage, "finish_reason": chunk.finish_reason}


def chunk_from_json(raw: Mapping[str, Any]) -> Chunk:
    kind = raw.get("t")
    if kind == "text":
        return TextDelta(str(raw["text"]))
    if kind == "thinking":
        return ThinkingDelta(str(raw["text"]))
    if kind == "tool_call":
        return ToolCallChunk(ToolCall(str(raw["id"]), str(raw["name"]),
                                      dict(raw.get("arguments") or {}),
                                      raw.get("arguments_error")))
    if kind == "tool_args":
        return ToolArgsDelta(int(raw["index"]), str(raw["name"]), str(raw["text"]))
    if kind == "retry":
        # The delay was waited out while recording; a replay does not wait again.
        return RetryNotice(int(raw["attempt"]), str(raw["reason"]), float(raw["delay"]))
    if kind == "end":
        usage = raw.get("usage")
        return StreamEnd(None if usage is None else Usage(int(usage[0]), int(usage[1])),
                         raw.get("finish_reason"))
    raise RecordingError(f"unknown chunk type {kind!r}")


def error_to_json(exc: BaseException) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": str(exc)}


def error_from_json(raw: Mapping[str, Any]) -> ProviderError:
    """The recorded provider failure, as the closest provider error class steerable has."""
    cls = _ERRORS.get(str(raw.get("type")), ProviderError)
    return cls(str(raw.get("message", "")))


@dataclass(slots=True)
class Recording:
    """A recording read back: the header and the entries of each type, in file order."""

    header: dict[str, Any]
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def events(self) -> list[dict[str, Any]]:
        return [e["event"] for e in self.entries if e["type"] == "event"]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["type"] == kind]

    def final_text(self) -> str:
        """The text of the last top-level TURN_END (what ``steerable run`` would print)."""
        ends = [e for e in self.events if e["kind"] == "turn_end" and e["parent_turn_id"] is None]
        return str(ends[-1]["text"]) if ends else ""


def _check_header(header: Any, path: Path) -> dict[str, Any]:
    if not isinstance(header, dict) or header.get("type") != "header" \
            or header.get("format") != FORMAT:
        raise RecordingError(f"{path} is not a steerable recording (no header line)")
    version = header.get("version")
    if version not in _READS:
        raise RecordingError(
            f"{path} was written by recording format {version!r}; this steerable reads "
            f"versions {', '.join(map(str, _READS))} (upgrade steerable to replay it)"
        )
    return header


def load_recording(path: str | Path) -> Recording:
    """Read a recording, refusing anything that is not one with a clear message.

    A recording cut short by a crash (a partial last line) loads up to its last whole line.
    """
    path = Path(path)
    try:
        # Lines end at "\n" only: a value may hold U+2028, U+0085... which splitlines() would
        # take for line ends, cutting a JSON line in two.
        lines = path.read_text(encoding="utf-8").split("\n")
        if lines and not lines[-1]:
            lines.pop()
    except FileNotFoundError:
        raise RecordingError(f"no recording at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordingError(f"cannot read recording {path}: {exc}") from None
    if not lines:
        raise RecordingError(f"{path} is empty, not a steerable recording")
    try:
        header = _check_header(json.loads(lines[0]), path)
    except json.JSONDecodeError:
        raise RecordingError(f"{path} is not a steerable recording (line 1 is not JSON)") from None
    rec = Recording(header)
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # a torn last line: the recording was cut short
            raise RecordingError(f"{path}:{number} is not valid JSON") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            raise RecordingError(f"{path}:{number} is not a recording entry")
        rec.entries.append(_upgrade_control(entry) if entry["type"] == "control" else entry)
    _expand_requests(rec.entries)
    return rec


def messages_to_json(messages: Sequence[Any]) -> list[dict[str, Any]]:
    return [message_to_record(m) for m in messages]


def messages_from_json(raw: Sequence[Any]) -> list[Any]:
    return [message_from_record(m, 1) for m in raw]
