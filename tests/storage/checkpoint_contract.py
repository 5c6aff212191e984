"""What every ``CheckpointStore`` must do. Backends' tests call ``check_checkpoint_store``
with a fresh store (the memory and JSONL stores here; SQLite and Redis in their own tests)."""

from __future__ import annotations

from typing import Any

from steerable import Message, ToolCall
from steerable.storage import Checkpoint, CheckpointStore


def sample_checkpoint(session_id: str = "s1", **overrides: Any) -> Checkpoint:
    call_a = ToolCall("c1", "read", {"path": "a.txt"})
    call_b = ToolCall("c2", "write", {"path": "b.txt", "text": "é\n\"x\""})
    fields: dict[str, Any] = {
        "session_id": session_id, "turn_id": "turn_2", "origin_turn_id": "turn_1", "agent": "main",
        "tools": ("read", "write"), "input": "do it", "stage": "tools", "iteration": 2,
        "messages": (Message("user", "do it"), Message("assistant", "", tool_calls=(call_a,)),
                  Message("tool", "A", tool_call_id="c1", name="read"),
                  Message("assistant", "next", tool_calls=(call_a, call_b))),
        "results": (Message("tool", "A again", tool_call_id="c1", name="read"),),
        "steering": ("also this",), "follow_ups": ("then that",), "injected_steering": ("early",),
        "base_count": 4, "base_dropped": 1, "last_had_tools": True, "tools_run": ("read",),
        "usage_in": 10, "usage_out": 5, "cancel_mode": "after_tools", "seq": 3, "created": 1.5, "updated": 2.5,
    }
    fields.update(overrides)
    return Checkpoint(**fields)


def check_checkpoint_store(store: Any) -> None:
    assert isinstance(store, CheckpointStore)
    assert store.load_checkpoint("s1") is None
    assert store.delete_checkpoint("s1") is False
    cp = sample_checkpoint()
    store.save_checkpoint(cp)
    assert store.load_checkpoint("s1") == cp
    assert store.load_checkpoint("s2") is None  # per session
    # A later checkpoint of the same turn replaces it, growing or not.
    grown = sample_checkpoint(seq=4, results=(*cp.results, Message(
        "tool", "B", tool_call_id="c2", name="write")), cancel_mode=None)
    store.save_checkpoint(grown)
    loaded = store.load_checkpoint("s1")
    assert loaded == grown and loaded.pending_calls == ()
    later = sample_checkpoint(seq=5, stage="model", iteration=3, results=(),
                              messages=(*grown.messages, *grown.results))
    store.save_checkpoint(later)
    assert store.load_checkpoint("s1") == later
    # Another turn (e.g. after a discard) replaces it whole, even with fewer messages.
    other = sample_checkpoint(origin_turn_id="turn_9", turn_id="turn_9", seq=1, stage="model",
                              iteration=0, messages=(Message("user", "new"),), results=())
    store.save_checkpoint(other)
    assert store.load_checkpoint("s1") == other
    assert store.delete_checkpoint("s1") is True
    assert store.load_checkpoint("s1") is None
    assert store.delete_checkpoint("s1") is False
