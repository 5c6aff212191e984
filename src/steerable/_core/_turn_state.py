"""Per-turn state: phase machine, queues, interrupt flags and the turn's own messages.

Everything a checkpoint needs to capture is plain data here (messages, iteration, queues), so a
turn can be saved at a safe point and resumed. The state is touched only from the loop's thread;
the AgentLoop marshals calls from other threads onto it.
"""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from steerable._core._cancel import CancelMode, CancelState
from steerable._events import SkipReason, TurnPhase
from steerable._messages import Message
from steerable._receipts import MessageReceipt
from steerable._records import Record, record
from steerable.errors import IllegalTransitionError

__all__ = ["CancelStop", "Interrupt", "QueuedMessage", "TurnState", "check_transition"]

P = TurnPhase
_ALLOWED: dict[TurnPhase, frozenset[TurnPhase]] = {
    # IDLE -> EXECUTING: a composite agent's turn runs its children without a model call, or
    # a turn resumes with tool calls pending. IDLE -> DONE: cancelled before its first call.
    P.IDLE: frozenset({P.THINKING, P.EXECUTING, P.ABORTING, P.DONE, P.ERROR}),
    P.THINKING: frozenset({P.EXECUTING, P.COMPACTING, P.ABORTING, P.DONE, P.ERROR}),
    P.EXECUTING: frozenset({P.THINKING, P.ABORTING, P.DONE, P.ERROR}),
    P.COMPACTING: frozenset({P.THINKING, P.ABORTING, P.ERROR}),
    P.ABORTING: frozenset({P.DONE, P.ERROR}),
    P.DONE: frozenset(),
    P.ERROR: frozenset(),
}


def check_transition(old: TurnPhase, new: TurnPhase) -> None:
    if new not in _ALLOWED[old]:
        raise IllegalTransitionError(f"illegal turn transition {old} -> {new}")


class Interrupt(enum.IntEnum):
    """Ordered: a stronger interrupt replaces a weaker one, never the reverse."""

    NONE = 0
    GRACEFUL = 1
    HARD = 2
    # A hook's ABORT_TURN is not a flag: it ends the turn at once, as an AbortSignal.


@record(kw_only=False)
class QueuedMessage(Record):
    """A steering or follow-up message that a turn did not process."""

    kind: str  # "steering" | "follow_up"
    text: str
    message_id: str = ""
    """The message's id (its receipt's ``message_id``): its state is ``returned``, or
    ``delivered`` for steering a hard abort rolled back."""


@dataclass(slots=True)
class TurnState:
    turn_id: str
    session_id: str
    input: str
    agent: Any  # steerable._core._agent.Agent (Any keeps this module free of imports upward)
    parent_turn_id: str | None = None
    depth: int = 0
    ephemeral: bool = False
    phase: TurnPhase = TurnPhase.IDLE
    iteration: int = 0
    base: Sequence[Message] = ()
    """The session history before this turn: the rollback snapshot."""
    base_rewritten: bool = False
    """True once compression changed ``base``: saving or rolling back must rewrite the store."""
    new: list[Message] = field(default_factory=list)
    """The turn's own messages. ``base`` and ``new`` are append-only: LLM requests hold views
    of them (``MessageView``), so a change other than an append must assign a new list."""
    # Lists, not deques: a deque allocates a 64-slot block (~760 bytes) as it is made, and
    # these queues are empty in nearly every turn (1.5 KB of the ~10 KB a live turn holds).
    steering: list[MessageReceipt] = field(default_factory=list)
    follow_ups: list[MessageReceipt] = field(default_factory=list)
    injected_steering: list[MessageReceipt] = field(default_factory=list)
    carrying: list[MessageReceipt] = field(default_factory=list)
    """Messages taken into the context since the last LLM request: delivered by the next."""
    held: list[MessageReceipt] = field(default_factory=list)
    """Messages waiting for turns of their own after this one (a session's lane: the list is
    the lane's, shared). The turn's checkpoints keep them; see ``_durable.hand_on``."""
    input_receipt: MessageReceipt | None = None
    """The receipt of the message the turn was started with (None for a sub-turn's input)."""
    queues: Any = None
    """The ``_queues.TurnQueues`` holder of the queues (made when a message first arrives)."""
    interrupt: Interrupt = Interrupt.NONE
    hint: str | None = None
    final_call: bool = False
    """True while the last, tool-less call is in flight (graceful interrupts are then no-ops)."""
    running: bool = False
    """True once the turn's task has started running (a cancel before that would skip it)."""
    finishing: bool = False
    """True once the turn is saving its result: interrupts can no longer change anything."""
    last_had_tools: bool = False
    offered: frozenset[str] | None = None
    """Names of the tools the last model call was offered, after ``before_llm`` hooks (None:
    not known, as after a resume: every tool of the agent). A call to any other tool is
    answered with an error, never run: a hook that narrowed the offer narrowed what runs."""
    children: dict[str, Any] = field(default_factory=dict)
    """Running sub-turns (TurnState) by turn id; a child leaves when it ends."""
    parent: Any = None
    """The spawning turn's state (None at top level)."""
    results: list[Any] = field(default_factory=list)
    """Async children's results waiting for the next checkpoint (``_subturn.ChildResult``)."""
    orphans: list[Any] = field(default_factory=list)
    """Top level only: orphaned results held back while this turn runs, written after its save."""
    orphans_closed: bool = False
    """True once this turn wrote its held-back orphans: later ones go straight to the store."""
    dry_run: bool = False
    """Inherited dry-run: set on a sub-turn whose ancestor runs dry, so its tools do too."""
    grace: float | None = None
    """Composite turns: how long running children may take to stop on an IMMEDIATE cancel
    before they are aborted (None: not a composite, IMMEDIATE aborts at once)."""
    grace_timer: asyncio.TimerHandle | None = None
    holds_slot: bool = False
    """True while the turn counts against ``Limits.active_turns``."""
    subturns: Any = None
    """The ``_subturn.Subturns`` scope tools of this turn spawn through (made on first use)."""
    tools_run: list[str] = field(default_factory=list)
    running_tools: dict[asyncio.Future[Any], Any] = field(default_factory=dict)
    """Each running tool's task and its ToolContext: a hard abort cancels them at once."""
    reply_cut: bool = False
    """A graceful interrupt stopped the model's text mid-stream (no tool was running)."""
    usage_in: int = 0
    usage_out: int = 0
    started: float = field(default_factory=time.monotonic)
    created: float = field(default_factory=time.time)
    """Wall-clock start of the turn (of its first run, for a resumed turn)."""
    task: asyncio.Task[Any] | None = None
    cancel: CancelState = field(default_factory=CancelState)
    # -- durability (see _durable.py) --
    durable: bool = False
    """True when the store keeps checkpoints and this turn writes them (never for sub-turns)."""
    origin_turn_id: str = ""
    """The id the turn was first started with; a resumed turn keeps it in its checkpoints."""
    resume: Any = None  # the Checkpoint this turn continues (None for a fresh turn)
    resumed_calls: frozenset[str] = frozenset()
    """Calls that may have been running when the process that wrote the checkpoint died."""
    base_count: int = 0
    base_dropped: int = 0
    batch_results: dict[str, Message] = field(default_factory=dict)
    """Results so far of the tool calls being executed (by call id), for checkpoints."""
    checkpoint_seq: int = 0
    checkpoint_tools: tuple[str, ...] | None = None
    """The agent's tool names, sorted, for its checkpoints (computed once per turn)."""
    checkpoint_saving: asyncio.Future[Any] | None = None
    checkpoint_lock: threading.Lock | None = None
    """Stores that write from a thread: one write at a time, never an older over a newer."""
    released: bool = False
    """True once the turn's checkpoint was dropped or handed on (``_durable.release``)."""
    checkpoint_written: int = 0
    """The highest ``checkpoint_seq`` the store holds (see ``_durable._save``)."""
    asks: Any = None
    """The turn's approvals and questions (``_parking.TurnAsks``, made on first use)."""

    def stop_reason(self) -> SkipReason | None:
        """Why tools not yet started must be skipped now, or None to go on."""
        if self.interrupt is Interrupt.HARD:
            return "aborted"
        if self.interrupt is Interrupt.GRACEFUL:
            return "interrupted"
        if self.steering:
            return "steering"
        return None


class CancelStop(Exception):
    """Raised at a safe point where a requested cancel stops the turn (after its checkpoint
    was written). Private to the engine, like AbortSignal."""

    def __init__(self, mode: CancelMode) -> None:
        super().__init__(mode.label)
        self.mode = mode


class AbortSignal(Exception):
    """Raised inside a turn when a hook asks to end it (ABORT_TURN, or HARD_ABORT from inside).

    Private to the engine: it never leaves the turn's task.
    """

    def __init__(self, hard: bool, reason: str = "") -> None:
        super().__init__(reason)
        self.hard = hard
