"""How a replayed event is compared with the recorded one.

Two runs of the same turn differ in a few fields by nature: times and durations (``time``,
``duration``), the loop-wide ``seq`` (compared by position instead, as is a message's
``request_seq``) and random ids (``turn_id``, ``parent_turn_id``, ``child_turn_id``,
``request_id``, ``message_id``, ``origin_id``). Ids are not ignored but mapped: the first
time a replayed id appears where the recording has another, the pair is remembered, and every
later appearance (in id fields and inside text, such as a spawn result naming its child) must
agree with it. Everything else must be equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["IGNORED_FIELDS", "IdMap", "first_difference"]

IGNORED_FIELDS = frozenset({"time", "seq", "duration", "request_seq"})
_ID_FIELDS = ("turn_id", "parent_turn_id", "child_turn_id", "request_id", "message_id",
              "origin_id")


class IdMap:
    """Replayed id -> recorded id, learned from the events as they come."""

    def __init__(self) -> None:
        self._map: dict[str, str] = {}

    def learn(self, replayed: Mapping[str, Any], recorded: Mapping[str, Any]) -> None:
        for name in _ID_FIELDS:
            new, old = replayed.get(name), recorded.get(name)
            if isinstance(new, str) and isinstance(old, str) and new not in self._map:
                self._map[new] = old

    def apply(self, value: Any) -> Any:
        """``value`` with every known replayed id replaced by its recorded counterpart."""
        if isinstance(value, str):
            if value in self._map:
                return self._map[value]
            for new, old in self._map.items():
                if new in value:
                    value = value.replace(new, old)
            return value
        if isinstance(value, Mapping):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.apply(v) for v in value]
        return value

    def recorded_id(self, replayed: str) -> str:
        return self._map.get(replayed, replayed)

    def replayed_id(self, recorded: str) -> str | None:
        for new, old in self._map.items():
            if old == recorded:
                return new
        return None


def _short(value: Any, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_difference(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """None when the two events agree (ignored fields aside), else the first difference."""
    if expected.get("kind") != actual.get("kind"):
        return f"kind: recorded {expected.get('kind')!r}, replayed {actual.get('kind')!r}"
    for key in sorted(set(expected) | set(actual)):
        if key in IGNORED_FIELDS:
            continue
        # A field added to an event since the recording (or dropped since) compares equal
        # while it holds its default, None: old recordings keep replaying.
        if key not in actual:
            if expected[key] is None:
                continue
            return f"field {key!r} is missing from the replayed event"
        if key not in expected:
            if actual[key] is None:
                continue
            return f"field {key!r} is not in the recorded event"
        if expected[key] != actual[key]:
            return f"{key}: recorded {_short(expected[key])}, replayed {_short(actual[key])}"
    return None


def first_request_difference(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """None when two LLM requests agree, else where they first differ (message by message)."""
    tools = _tool_difference(expected.get("tools") or [], actual.get("tools") or [])
    if tools is not None:
        return tools
    for key in ("model", "params"):
        if expected.get(key) != actual.get(key):
            return f"{key}: recorded {_short(expected.get(key))}, replayed {_short(actual.get(key))}"
    old, new = list(expected.get("messages", [])), list(actual.get("messages", []))
    for i, (a, b) in enumerate(zip(old, new, strict=False)):
        if a != b:
            return f"message {i}: recorded {_short(a)}, replayed {_short(b)}"
    if len(old) != len(new):
        return f"the recorded request has {len(old)} messages, the replayed one {len(new)}"
    return None


def _tool_difference(expected: list[Any], actual: list[Any]) -> str | None:
    """Tools are compared whole; a recording made before they were (names only) is compared
    by name."""
    if all(isinstance(t, str) for t in expected):
        actual = [t["name"] if isinstance(t, Mapping) else t for t in actual]
    names = [t["name"] if isinstance(t, Mapping) else t for t in expected]
    got = [t["name"] if isinstance(t, Mapping) else t for t in actual]
    if names != got:
        return f"tools: recorded {_short(names)}, replayed {_short(got)}"
    for old, new in zip(expected, actual, strict=True):
        if old != new:
            fields = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
            return (f"tools: the definition of {old['name']!r} changed ({', '.join(fields)}): "
                    f"recorded {_short(old)}, replayed {_short(new)}")
    return None
