"""The storage form of a checkpoint: one versioned JSON object, shared by every backend.

    {"v": 1, "type": "checkpoint", "session_id": ..., "turn_id": ..., "origin_turn_id": ...,
     "agent": ..., "tools": [...], "input": ..., "stage": "model" | "tools", "iteration": N,
     "messages": [<message record>...], "results": [<message record>...],
     "steering": [...], "follow_ups": [...], "injected_steering": [...],
     "input_id": ..., "steering_ids": [...], "follow_up_ids": [...], "injected_ids": [...],
     "carrying": [...], "held": [...], "held_ids": [...] (each present only when not empty),
     "requests": [{"id", "kind", "call_id", "question"..., "answer"?}...] (only when parked),
     "tools_run": ["read", ["bash", 3], ...] (run-length coded), "base_count": N | null, "base_dropped": N, "last_had_tools": bool, "tools_run": [...],
     "usage_in": N, "usage_out": N, "cached_tokens": N, "cache_write_tokens": N,
     "tool_calls": N, "cost_usd": x (these four only when not 0 / null), "cancel_mode": null | "after_model" | "after_tools",
     "seq": N, "created": t, "updated": t}

``v`` is ``CHECKPOINT_VERSION`` (the checkpoint's own schema; messages inside use the session
message schema of ``_records``). A reader decodes every version it knows, refuses newer ones
("upgrade steerable") and ones too old to resume ("discard it"). A backend stores the object
as it likes (a row, a Redis value); the JSONL store splits ``messages`` into lines of their own
so that each checkpoint appends only what changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from steerable._core._checkpoint import Checkpoint
from steerable._core._requests import request_from_record, request_to_record
from steerable._messages import Message
from steerable.errors import CheckpointError
from steerable.storage._records import (
    SCHEMA_VERSION,
    RecordError,
    message_from_record,
    message_to_record,
)

__all__ = ["CHECKPOINT_VERSION", "checkpoint_from_record", "checkpoint_to_record"]

CHECKPOINT_VERSION = 1

_STR_LISTS = ("tools", "steering", "follow_ups", "injected_steering")
_ID_LISTS = ("steering_ids", "follow_up_ids", "injected_ids", "carrying", "held", "held_ids")
"""Messages and their ids (added in the same version: absent means none, as in older files)."""
_INTS = ("iteration", "base_dropped", "usage_in", "usage_out", "seq")
_SPENT = ("cached_tokens", "cache_write_tokens", "tool_calls")
"""What the turn spent beyond tokens (written only when not 0: absent in older files)."""


def checkpoint_to_record(cp: Checkpoint, *, messages: bool = True) -> dict[str, Any]:
    """The JSON object for ``cp``; without ``messages`` it carries only their ``count``."""
    out: dict[str, Any] = {
        "v": CHECKPOINT_VERSION, "type": "checkpoint", "session_id": cp.session_id,
        "turn_id": cp.turn_id, "origin_turn_id": cp.origin_turn_id, "agent": cp.agent,
        "input": cp.input, "stage": cp.stage, "last_had_tools": cp.last_had_tools,
        "cancel_mode": cp.cancel_mode, "created": cp.created, "updated": cp.updated,
        "results": [message_to_record(m) for m in cp.results],
    }
    for name in _STR_LISTS:
        out[name] = list(getattr(cp, name))
    for name in _ID_LISTS:  # written only when there is one: a safe point stays short
        ids = getattr(cp, name)
        if ids:
            out[name] = list(ids)
    if cp.input_id:
        out["input_id"] = cp.input_id
    if cp.requests:  # a parked turn's approvals and questions (absent: none, as before)
        out["requests"] = [request_to_record(r) for r in cp.requests]
    out["tools_run"] = _runs(cp.tools_run)
    for name in _INTS:
        out[name] = getattr(cp, name)
    out["base_count"] = cp.base_count
    for name in _SPENT:
        if getattr(cp, name):
            out[name] = getattr(cp, name)
    if cp.cost_usd is not None:
        out["cost_usd"] = cp.cost_usd
    if messages:
        out["messages"] = [message_to_record(m) for m in cp.messages]
    else:
        out["count"] = len(cp.messages)
    return out


def _runs(names: Sequence[str]) -> list[Any]:
    """``tools_run`` run-length coded (``["read", ["noop", 200]]``): it grows with every tool
    the turn runs and is written at every safe point, so a long turn of one tool stays short."""
    out: list[Any] = []
    for name in names:
        last = out[-1] if out else None
        if last == name:
            out[-1] = [name, 2]
        elif isinstance(last, list) and last[0] == name:
            last[1] += 1
        else:
            out.append(name)
    return out


def _unruns(raw: Any) -> tuple[str, ...]:
    out: list[str] = []
    for item in raw:
        if isinstance(item, list) and len(item) == 2 and isinstance(item[1], int):
            out += [str(item[0])] * item[1]
        else:
            out.append(str(item))
    return tuple(out)


def _from_v1(raw: Mapping[str, Any], messages: Sequence[Message] | None) -> Checkpoint:
    if messages is None:
        messages = [message_from_record(m, SCHEMA_VERSION) for m in raw["messages"]]
    stage = raw["stage"]
    if stage not in ("model", "tools"):
        raise RecordError(f"unknown stage {stage!r}")
    mode = raw.get("cancel_mode")
    if mode not in (None, "after_model", "after_tools"):
        raise RecordError(f"unknown cancel_mode {mode!r}")
    fields: dict[str, Any] = {name: tuple(str(x) for x in raw.get(name, ()))
                              for name in (*_STR_LISTS, *_ID_LISTS)}
    for name in (*_INTS, *_SPENT):
        value = raw.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{name} must be an int")
        fields[name] = value
    cost = raw.get("cost_usd")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float))):
        raise RecordError("cost_usd must be a number or null")
    base_count = raw.get("base_count")
    if base_count is not None and (isinstance(base_count, bool) or not isinstance(base_count, int)):
        raise RecordError("base_count must be an int or null")
    return Checkpoint(
        session_id=str(raw["session_id"]), turn_id=str(raw["turn_id"]),
        origin_turn_id=str(raw["origin_turn_id"]), agent=str(raw["agent"]),
        input=str(raw["input"]), stage=stage, messages=tuple(messages),
        results=tuple(message_from_record(m, SCHEMA_VERSION) for m in raw.get("results", ())),
        last_had_tools=bool(raw.get("last_had_tools", False)), cancel_mode=mode,
        created=float(raw.get("created", 0.0)), updated=float(raw.get("updated", 0.0)),
        base_count=base_count, tools_run=_unruns(raw.get("tools_run", ())),
        input_id=str(raw.get("input_id", "")),
        cost_usd=None if cost is None else float(cost),
        requests=tuple(request_from_record(r) for r in raw.get("requests", ())), **fields,
    )


_DECODERS: dict[int, Callable[[Mapping[str, Any], Sequence[Message] | None], Checkpoint]] = {
    1: _from_v1,
}


def checkpoint_from_record(raw: Any, *, where: str,
                           messages: Sequence[Message] | None = None) -> Checkpoint:
    """Decode a checkpoint object (``messages`` given separately when the backend stores
    them apart). ``where`` names the file or key in the error, which says what to do."""
    if not isinstance(raw, Mapping) or raw.get("type") != "checkpoint":
        raise CheckpointError(
            f"{where} is not a steerable checkpoint; delete it (the session itself is "
            "unaffected) or start the next turn with discard_checkpoint=True")
    version = raw.get("v")
    if isinstance(version, int) and version > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"{where} was written by a newer steerable (checkpoint schema v{version}, this one "
            f"reads up to v{CHECKPOINT_VERSION}); upgrade steerable to resume it")
    decode = _DECODERS.get(version) if isinstance(version, int) else None
    if decode is None:
        raise CheckpointError(
            f"{where} uses checkpoint schema v{version}, which this steerable cannot resume; "
            "start the next turn with discard_checkpoint=True to drop it (the session's "
            "history is unaffected)")
    try:
        return decode(raw, messages)
    except (KeyError, TypeError, ValueError) as exc:  # RecordError is a ValueError
        raise CheckpointError(
            f"{where} is corrupt ({type(exc).__name__}: {exc}); delete it or start the next "
            "turn with discard_checkpoint=True (the session's history is unaffected)") from None
