"""Tool calls written as text, for models that do not use the API's tool-call channel.

Small models often answer a tool request with JSON in the reply text instead: inside
``<tool_call>`` tags (the Qwen chat template's convention), in a fenced block, or bare. This
module finds such calls and strips them from the text. ``TextCallBuffer`` does it on a live
stream: prose and ordinary code blocks stream through, and only what opens like a call is held
back until the reply ends.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["TextCall", "TextCallBuffer", "distinct", "find_text_calls"]

_OPEN_TAG = "<tool_call>"
_FENCE = "```"
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_FENCED = re.compile(r"```[ \t]*([A-Za-z_]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_NAME = re.compile(r'"name"\s*:\s*"([^"]*)"')
_LIST_START = re.compile(r"\[\s*\{")
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextCall:
    """A call found in text. ``error`` is set when it was clearly meant as a call but its JSON
    is broken; ``arguments`` is then empty."""

    name: str
    arguments: dict[str, Any]
    error: str | None = None


def _as_call(value: Any) -> TextCall | None:
    """A JSON value shaped like ``{"name": .., "arguments": {..}}`` (or "parameters")."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):  # the OpenAI wire shape, written out as text
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not ({"arguments", "parameters"} & value.keys()):
        return None
    args = value.get("arguments", value.get("parameters"))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as exc:
            return TextCall(name, {}, f"arguments are not valid JSON ({exc})")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return TextCall(name, {}, f"arguments must be a JSON object, got {type(args).__name__}")
    return TextCall(name, args)


def _calls_in(value: Any) -> list[TextCall] | None:
    """Calls in a decoded JSON value (one call or a list of calls), None if it holds none."""
    items = value if isinstance(value, list) else [value]
    calls = [_as_call(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _parse_block(body: str, *, intended: bool) -> list[TextCall] | None:
    """Calls in a tag or fence body. ``intended``: broken JSON is still a (failed) call."""
    try:
        value = json.loads(body)
    except ValueError as exc:
        named = _NAME.search(body)
        if intended or (named and '"arguments"' in body):
            name = named.group(1) if named else ""
            return [TextCall(name, {}, f"the tool call is not valid JSON ({exc})")]
        return None
    return _calls_in(value)


def _bare_calls(text: str) -> tuple[str, list[TextCall]]:
    """Bare JSON objects (or lists of them) that are calls, cut out of ``text``."""
    kept: list[str] = []
    calls: list[TextCall] = []
    pos = 0
    while True:
        listed = _LIST_START.search(text, pos)  # a list of calls, as a schema writes it
        start = min((i for i in (text.find("{", pos), listed.start() if listed else -1)
                     if i >= 0), default=-1)
        if start < 0:
            kept.append(text[pos:])
            return "".join(kept), calls
        try:
            value, end = _decoder.raw_decode(text, start)
        except ValueError:
            kept.append(text[pos:start + 1])
            pos = start + 1
            continue
        found = _calls_in(value)
        kept.append(text[pos:start] if found else text[pos:end])
        calls.extend(found or ())
        pos = end


def find_text_calls(text: str) -> tuple[str, list[TextCall]]:
    """The calls written in ``text``, in order, and the text that is left without them."""
    calls: list[TextCall] = []

    def tagged(match: re.Match[str]) -> str:
        body = _FENCED.sub(lambda m: m.group(2), match.group(1)).strip()
        found = _parse_block(body, intended=True) or []
        calls.extend(found)
        return "" if found else match.group(0)

    def fenced(match: re.Match[str]) -> str:
        body = match.group(2).strip()
        intended = match.group(1).lower() in ("tool_call", "tool")
        found = _parse_block(body, intended=intended) if body.startswith(("{", "[")) else None
        calls.extend(found or ())
        return "" if found else match.group(0)

    rest = _TAGGED.sub(tagged, text)
    if not calls:
        rest = _FENCED.sub(fenced, rest)
    if not calls:
        rest, calls = _bare_calls(rest)
    return rest.strip() if calls else text, calls


def distinct(calls: list[TextCall]) -> list[TextCall]:
    """``calls`` without the exact repeats of an earlier one. Measured with the 1.5B under a
    schema that admits a list: it wrote [read greet.py, read main.py] four times over, the
    greedy loop of a small model rather than eight requests."""
    seen: set[str] = set()
    out: list[TextCall] = []
    for c in calls:
        key = json.dumps([c.name, c.arguments], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _partial_marker(text: str) -> int:
    """Length of a suffix of ``text`` that may be the start of a call marker."""
    for marker in (_OPEN_TAG, _FENCE):
        for n in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:n]):
                return n
    return 0


_CALL_OPENINGS = ('{"name"', '{"type"', '{"function"', '[{"name"', '[{"type"', '[{"function"')
_CALL_FENCES = ("", "json", "tool_call", "tool")
_CALL, _TEXT, _WAIT = "call", "text", "wait"


def _classify(text: str, i: int) -> str:
    """Whether the candidate at ``i`` opens a call, is plain text, or cannot be told yet."""
    if text.startswith(_OPEN_TAG, i):
        return _CALL
    if text.startswith(_FENCE, i):
        line_end = text.find("\n", i)
        if line_end < 0:
            return _WAIT
        if text[i + len(_FENCE):line_end].strip().lower() not in _CALL_FENCES:
            return _TEXT  # a code block in some language: stream it
        body = text[line_end + 1:].lstrip()
        if not body:
            return _WAIT
        return _CALL if body[0] in "{[" else _TEXT
    compact = re.sub(r"\s+", "", text[i:i + 48])
    if any(compact.startswith(opening) for opening in _CALL_OPENINGS):
        return _CALL
    if any(opening.startswith(compact) for opening in _CALL_OPENINGS):
        return _WAIT
    return _TEXT


def _next_candidate(text: str, pos: int) -> int:
    found = [i for i in (text.find(_OPEN_TAG, pos), text.find(_FENCE, pos),
                         text.find("{", pos), text.find("[", pos)) if i >= 0]
    return min(found, default=-1)


class TextCallBuffer:
    """Streams text through, holding back what may be a tool call until it can tell.

    Prose and code blocks in other languages stream as they come; only a ``<tool_call>`` tag,
    a json (or unlabelled) fence opening with ``{``/``[``, or a bare ``{"name"...`` is held
    until the reply ends and parsed then. Text that might still become one of those (``{"na``
    at the end of a delta) waits for the next delta.
    """

    __slots__ = ("_holding", "_pending")

    def __init__(self) -> None:
        self._pending = ""
        self._holding = False

    def feed(self, text: str) -> str:
        """Add a delta; return the part that can be shown now (possibly empty)."""
        buffer = self._pending + text
        if self._holding:
            self._pending = buffer
            return ""
        pos = 0
        while True:
            i = _next_candidate(buffer, pos)
            if i < 0:
                cut = len(buffer) - _partial_marker(buffer[pos:])
                break
            verdict = _classify(buffer, i)
            if verdict != _TEXT:
                self._holding = verdict == _CALL
                cut = i
                break
            pos = i + (len(_FENCE) if buffer.startswith(_FENCE, i) else 1)
        self._pending = buffer[cut:]
        return buffer[:cut]

    def finish(self) -> tuple[str, list[TextCall]]:
        """The held-back text still to show and the calls found in it."""
        held, self._pending, self._holding = self._pending, "", False
        if not held:
            return "", []
        return find_text_calls(held)
