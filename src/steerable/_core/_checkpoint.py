"""Durable turns: the checkpoint value and the narrow protocol of a store that keeps them.

A checkpoint is a turn's state at a safe point, as plain data: the turn's own messages so far
(not yet history), the tool calls of the last response still to run and the results already
in, the iteration, the queues, and what resume needs to check it is continuing the right
thing (the agent, its tools, the session's length when the turn began). A store keeps at most
one checkpoint per session: the turn that is running, or was cancelled, or was running when
its process died. It is not history: the session's history changes only when the turn ends.

``CheckpointStore`` is all a backend implements (JSONL, memory, SQLite, Redis...):
``save_checkpoint`` replaces the session's checkpoint atomically (a crash mid-write leaves the
previous one), ``load_checkpoint`` returns it or None, ``delete_checkpoint`` removes it. The
storage form (a versioned JSON object) is ``steerable.storage.checkpoint_to_record`` /
``checkpoint_from_record``; the value here never sees JSON.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from steerable._core._requests import PendingRequest
from steerable._messages import Message, ToolCall
from steerable._records import Record, record

__all__ = ["Checkpoint", "CheckpointStore", "Stage", "unresolved_calls"]

Stage = Literal["model", "tools"]
"""What the turn does next: call the model (``model``) or run the last response's tool calls
(``tools``)."""


@record
class Checkpoint(Record):
    """A turn's state at a safe point. Every field is plain data (str, int, messages)."""

    session_id: str
    turn_id: str
    """The turn that wrote it (a resumed turn has a new id; ``origin_turn_id`` stays)."""
    origin_turn_id: str
    """The id of the turn as first started, kept across resumes."""
    agent: str
    tools: tuple[str, ...]
    """Names of the agent's tools, sorted: resume checks it runs with the same ones."""
    input: str
    stage: Stage
    iteration: int
    """LLM calls made so far (the next call is number ``iteration + 1``)."""
    messages: Sequence[Message]
    """The turn's messages so far (read-only: a tuple, or a view the loop made in O(1)), starting with its user input. With ``stage == "tools"``
    the last one is the assistant message whose tool calls are being run."""
    results: tuple[Message, ...] = ()
    """Tool results of the last response already in (``stage == "tools"``), any order."""
    steering: tuple[str, ...] = ()
    follow_ups: tuple[str, ...] = ()
    injected_steering: tuple[str, ...] = ()
    input_id: str = ""
    """The message id of the turn's input ("" when it had none, or in an older checkpoint)."""
    steering_ids: tuple[str, ...] = ()
    """Message ids of ``steering``, ``follow_ups`` and ``injected_steering``, position by
    position (empty in a checkpoint written before messages had ids: new ones are made)."""
    follow_up_ids: tuple[str, ...] = ()
    injected_ids: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    """Messages waiting for turns of their own after this one (queued by ``send`` behind it):
    a resumed turn hands them back as follow-ups."""
    held_ids: tuple[str, ...] = ()
    carrying: tuple[str, ...] = ()
    """Ids of the messages taken into the context but not yet sent to the model: the resumed
    turn's next LLM request delivers them."""
    base_count: int | None = 0
    """Messages the session held when the turn began (resume checks it still does); None in
    the first checkpoint, written as the turn starts, before it has read the session."""
    base_dropped: int = 0
    """Of those, how many context compression dropped during the turn."""
    last_had_tools: bool = False
    tools_run: Sequence[str] = ()
    usage_in: int = 0
    usage_out: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    """What the turn's calls cost so far (None: no price was known): a resumed turn goes on
    counting ``Limits.max_turn_cost_usd`` from here, not from zero."""
    tool_calls: int = 0
    """Tool calls admitted under ``Limits.max_tool_calls`` so far (0 while it is unset)."""
    cancel_mode: str | None = None
    """Set when a safe-point cancel stopped the turn (``after_model`` / ``after_tools``);
    None while running (or when its process died)."""
    requests: tuple[PendingRequest, ...] = ()
    """Approvals and questions of this turn's calls: those still open park the turn
    (``TurnStatus.WAITING``); answered ones keep their answer for the re-run tool's ``ask``."""
    seq: int = 0
    """How many checkpoints this turn has written, this one included."""
    created: float = 0.0
    updated: float = 0.0

    @property
    def checkpoint_id(self) -> str:
        return f"{self.origin_turn_id}.{self.seq}"

    @property
    def pending_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls of the last response that have no result yet (run on resume)."""
        return unresolved_calls(self.messages, self.results) if self.stage == "tools" else ()

    @property
    def waiting(self) -> tuple[PendingRequest, ...]:
        """The requests still open: the turn is parked until each has an answer."""
        return tuple(r for r in self.requests if not r.answered)

    @property
    def reason(self) -> str:
        """``cancelled`` (a safe-point cancel), ``waiting`` (parked: requests are open) or
        ``interrupted`` (the process stopped)."""
        if self.cancel_mode is not None:
            return "cancelled"
        return "waiting" if self.waiting else "interrupted"


def unresolved_calls(messages: Sequence[Message], results: Sequence[Message]) -> tuple[ToolCall, ...]:
    if not messages or messages[-1].role != "assistant":
        return ()
    done = {r.tool_call_id for r in results}
    return tuple(c for c in messages[-1].tool_calls if c.id not in done)


@runtime_checkable
class CheckpointStore(Protocol):
    """A store that keeps one checkpoint per session.

    ``checkpoint_blocking`` tells the loop to call the three methods from a worker thread
    (a database, a network); False means they are quick enough for the loop's thread (the
    memory store; the JSONL store, whose safe points append a few hundred bytes and never
    fsync): a turn makes two or more calls per iteration, and a thread hop each costs more
    than the write itself."""

    checkpoint_blocking: bool

    def save_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Replace the session's checkpoint; a crash mid-write leaves the previous one."""
        ...

    def load_checkpoint(self, session_id: str) -> Checkpoint | None:
        """The session's checkpoint, None if it has none; ``CheckpointError`` if unreadable."""
        ...

    def delete_checkpoint(self, session_id: str) -> bool:
        """Remove it; False when there was none."""
        ...
