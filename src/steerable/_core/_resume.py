"""Checks made before a turn is resumed from a checkpoint: same agent, same session history.

A checkpoint is only valid on top of the history it was taken over. ``checked_base`` tells
apart the one harmless mismatch, a turn that finished and was saved but whose process died
before it could delete its checkpoint (the history then holds the turn, starting with its
input), from a session changed some other way, which is refused with a clear message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from steerable._core._checkpoint import Checkpoint
from steerable._messages import Message
from steerable.errors import CheckpointError

__all__ = ["check_agent", "check_no_checkpoint", "checked_base"]

log = logging.getLogger("steerable")


def check_agent(cp: Checkpoint, agent: Any) -> None:
    """Raise ``CheckpointError`` unless ``agent`` has the name and tools of the writer."""
    tools = tuple(sorted(agent.tools_by_name))
    if cp.agent == agent.name and cp.tools == tools:
        return
    raise CheckpointError(
        f"the checkpoint of session {cp.session_id!r} was written by agent {cp.agent!r} with "
        f"tools {list(cp.tools)}; this agent is {agent.name!r} with tools {list(tools)}. Resume "
        "with the same agent, pass force=True to go on anyway (calls to a missing tool get an "
        "error result), or start a new turn with discard_checkpoint=True"
    )


def checked_base(cp: Checkpoint, base: Sequence[Message]) -> bool:
    """True when ``base`` is the history the checkpoint was taken over; False when the turn
    is already in it (the checkpoint is stale); ``CheckpointError`` otherwise."""
    if cp.base_count is None or len(base) == cp.base_count:
        return True  # None: written as the turn started, before it read the session
    first = cp.messages[0] if cp.messages else None
    if (first is not None and len(base) > cp.base_count and cp.base_dropped == 0
            and base[cp.base_count] == first):
        log.warning("session %s already holds the turn of checkpoint %s (its process stopped "
                    "between saving the turn and deleting the checkpoint); dropping the "
                    "checkpoint", cp.session_id, cp.checkpoint_id)
        return False
    raise CheckpointError(
        f"session {cp.session_id!r} changed since its checkpoint was written (it has "
        f"{len(base)} messages, the checkpoint expects {cp.base_count}); the pending turn "
        "cannot continue on top of it: start a new turn with discard_checkpoint=True"
    )


def check_no_checkpoint(store: Any, session_id: str, discard: bool) -> None:
    """Before a new turn: drop the pending checkpoint (``discard``) or refuse to start."""
    if discard:
        store.delete_checkpoint(session_id)
        return
    try:
        cp = store.load_checkpoint(session_id)
    except CheckpointError as exc:
        raise CheckpointError(f"{exc} (session {session_id!r} cannot start a new turn until "
                              "then)") from None
    if cp is not None:
        raise CheckpointError(
            f"session {session_id!r} has a pending turn ({cp.reason} at iteration "
            f"{cp.iteration}, checkpoint {cp.checkpoint_id}): resume it with "
            f"loop.resume({session_id!r}), or pass discard_checkpoint=True to drop it and start "
            "a new turn"
        )
