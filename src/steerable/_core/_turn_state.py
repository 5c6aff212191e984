"""Per-turn state, split by owner: identity, transcript, control, inbound messages, the turn
tree and checkpoint bookkeeping; plus the phase machine and interrupt levels.

Everything a checkpoint needs to capture is plain data here (messages, iteration, queues), so a
turn can be saved at a safe point and resumed. The state is touched only from the loop's thread;
the AgentLoop marshals calls from other threads onto it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import threading
import time
from collections.abc import Sequence
from dataclasses import field
from typing import Any, Generic, TypeVar, cast, dataclass_transform

from steerable._core._agent import Agent, BaseAgent
from steerable._core._cancel import CancelMode, CancelState
from steerable._core._checkpoint import Checkpoint
from steerable._core._requests import LiveRequest, PendingRequest
from steerable._events import SkipReason, TurnPhase, TurnStatus
from steerable._messages import Message
from steerable._receipts import MessageHolder, MessageReceipt
from steerable._records import Record, record, state
from steerable.errors import IllegalTransitionError
from steerable.tools._base import Subturns, ToolContext

__all__ = ["OWNERS", "Asks", "CancelStop", "Control", "Delivery", "Durability", "Inbound",
           "Interrupt", "Ledger", "QueuedMessage", "Transcript", "TurnState", "TurnTree",
           "check_transition"]

P = TurnPhase
_P = TypeVar("_P")
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


# -- the parts of a turn's state, each written by the modules its docstring names ----------
# A part declares its fields; ``TurnState`` inherits them all and holds them in its own slots,
# and ``st.transcript`` (and each part's name) is the state itself, typed as that part. One
# object per turn instead of eight: with 10,000 turns in flight every full collection walks
# each of them (see docs/performance.md, 2026-12-08).


@dataclass_transform(kw_only_default=True)
def _part(cls: type[_P]) -> type[_P]:
    """Make ``cls`` a part: its fields, for ``TurnState`` to inherit, and no instance layout of
    its own (empty slots, so ``TurnState`` can inherit several and keeps no ``__dict__``)."""
    body = {k: v for k, v in vars(cls).items() if k not in ("__dict__", "__weakref__")}
    body["__slots__"] = ()
    slotless: Any = type(cls.__name__, cls.__bases__, body)
    slotless.__qualname__ = cls.__qualname__
    return cast("type[_P]", dataclasses.dataclass(init=False, repr=False, eq=False,
                                                  kw_only=True)(slotless))


# ``tests/test_turn_state_owners.py`` checks it: a write to a part's field (an assignment, an
# augmented one, an item store, a mutating method call) from any other module fails the suite.
# A part's owners are in its ``OWNERS`` entry below (module names, or a package's prefix).


@_part
class Transcript:
    """What the turn has said and done: its messages, iterations, tools and usage.

    Owners: ``_turn`` (the iteration loop), ``_model_call`` (responses, compression, usage),
    ``_tool_exec`` (tool results), ``_queues`` (steering drained into the context),
    ``_subturn`` (children's results delivered), ``_composite`` (a composite's answer),
    ``_durable`` (restoring a checkpoint), ``_budget`` (a sub-turn's usage added to its
    ancestors') and ``_answer`` (asking again for an answer that did not validate)."""

    base: Sequence[Message] = ()
    """The session history before this turn: the rollback snapshot."""
    base_rewritten: bool = False
    """True once compression changed ``base``: saving or rolling back must rewrite the store."""
    new: list[Message] = field(default_factory=list)
    """The turn's own messages. ``base`` and ``new`` are append-only: LLM requests hold views
    of them (``MessageView``), so a change other than an append must assign a new list."""
    iteration: int = 0
    last_had_tools: bool = False
    offered: frozenset[str] | None = None
    """Names of the tools the last model call was offered, after ``before_llm`` hooks (None:
    not known, as after a resume: every tool of the agent). A call to any other tool is
    answered with an error, never run: a hook that narrowed the offer narrowed what runs."""
    tools_run: list[str] | tuple[()] = ()
    """The tools that started, in order: a list made at the first (most live turns have run
    none yet, and an empty list is an object the collector tracks)."""
    usage_in: int = 0
    usage_out: int = 0
    base_count: int = 0
    """Messages the session held when the turn began (its checkpoints say so to ``resume``)."""
    base_dropped: int = 0
    """Of those, how many compression dropped during the turn."""
    batch_results: dict[str, Message] = field(default_factory=dict)
    """Results so far of the tool calls being executed (by call id), for checkpoints."""


@_part
class Control:
    """Where the turn is and what it was told: phase, interrupts, cancel, its task. (Whether it
    holds an active-turn slot is for ``TurnSlots`` to know: one count of running turns.)

    Owners: ``_engine`` (phase machine, interrupts, the grace timer), ``_turn`` (running,
    finishing, the final call), ``_model_call`` (a reply cut short),
    ``_composite`` (grace), ``_tool_exec`` (running tools), ``_subturn`` (a child's task),
    ``_budget`` (a budget reached stops the turn as a graceful interrupt does)
    and the driver that starts a turn's task (``drivers``)."""

    phase: TurnPhase = TurnPhase.IDLE
    interrupt: Interrupt = Interrupt.NONE
    hint: str | None = None
    final_call: bool = False
    """True while the last call (no tool may be called) is in flight (graceful interrupts are
    then no-ops)."""
    running: bool = False
    """True once the turn's task has started running (a cancel before that would skip it)."""
    finishing: bool = False
    """True once the turn is saving its result: interrupts can no longer change anything."""
    reply_cut: bool = False
    """A graceful interrupt stopped the model's text mid-stream (no tool was running)."""
    cancel: CancelState | None = None
    """The cancel requests, made at the first (nearly no turn is cancelled, and the state is
    an object the collector tracks per live turn)."""
    grace: float | None = None
    """Composite turns: how long running children may take to stop on an IMMEDIATE cancel
    before they are aborted (None: not a composite, IMMEDIATE aborts at once)."""
    grace_timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[Any] | None = None
    running_tools: dict[asyncio.Future[Any], ToolContext] = field(default_factory=dict)
    """Each running tool's task and its ToolContext: a hard abort cancels them at once."""
    waiter: asyncio.Future[Any] | None = None
    """The future of the first caller awaiting the turn (``TurnHandle``), given the
    ``TurnResult`` as ``run_turn``'s last step (a slot, not a one-item tuple: nearly every
    turn has one or none, and a tuple is an object the collector tracks per live turn)."""
    waiters: tuple[asyncio.Future[Any], ...] = ()
    """The other callers' futures, likewise."""


@_part
class Inbound:
    """Messages given to the turn: its queues, what it carries to the next request, its input.

    Owners: ``_queues`` (queueing, draining, settling), ``_turn`` (the input taken in),
    ``_durable`` (restoring a checkpoint's queues) and the drivers (the input's receipt, the
    lane's held list: ``drivers``)."""

    # Tuples, replaced on each change (as ``TurnTree.results``): these queues are empty in
    # nearly every turn, and the empty tuple is shared, where each empty list is an object
    # the collector tracks (5 of the ~63 per live turn: with 10,000 turns in flight, every
    # full collection walks them) and 56 bytes.
    steering: tuple[MessageReceipt, ...] = ()
    follow_ups: tuple[MessageReceipt, ...] = ()
    injected_steering: tuple[MessageReceipt, ...] = ()
    carrying: tuple[MessageReceipt, ...] = ()
    """Messages taken into the context since the last LLM request: delivered by the next."""
    held: Sequence[MessageReceipt] = ()
    """Messages waiting for turns of their own after this one (a session's lane: the list is
    the lane's, shared). The turn's checkpoints keep them; see ``_durable.hand_on``."""
    input_receipt: MessageReceipt | None = None
    """The receipt of the message the turn was started with (None for a sub-turn's input)."""
    holder: MessageHolder | None = None
    """The ``_queues.TurnQueues`` revoke and edit reach the queues through (made when a
    message first arrives)."""


@_part
class TurnTree:
    """The turn's place among turns: its parent, running children and their results.

    Owner: ``_subturn``."""

    parent: TurnState | None = None
    """The spawning turn's state (None at top level)."""
    children: dict[str, TurnState] = field(default_factory=dict)
    """Running sub-turns by turn id; a child leaves when it ends."""
    # Tuples, replaced on each change: nearly every turn has none, and an empty tuple is
    # shared where an empty list costs 56 bytes per turn.
    results: tuple[Delivery, ...] = ()
    """Async children's results waiting for the next checkpoint."""
    orphans: tuple[Delivery, ...] = ()
    """Top level only: orphaned results held back while this turn runs, written after its save."""
    orphans_closed: bool = False
    """True once this turn wrote its held-back orphans: later ones go straight to the store."""
    subturns: Subturns | None = None
    """The ``_subturn.Subturns`` scope tools of this turn spawn through (made on first use)."""


@_part
class Ledger:
    """What the turn spent beyond its token counts, the budget that stopped it, and its checked
    structured answer.

    Owners: ``_budget`` (cache counts, cost, tool calls, the limit reached) and ``_answer``
    (the answer's value and its retries)."""

    cached: int = 0
    cache_write: int = 0
    cost: float | None = None
    """The cost of the calls whose price is known (None: none was)."""
    tool_calls: int = 0
    """Tool calls admitted (counted only while ``Limits.max_tool_calls`` is set)."""
    refused: str | None = None
    """Set when calls were refused for ``max_tool_calls``: the turn stops at its next
    checkpoint."""
    exceeded: str | None = None
    """The limit that ended the turn (its status is then ``budget_exceeded``)."""
    unpriced: frozenset[str] = frozenset()
    """Models with no known price, reported once per turn while a cost limit is set."""
    output: Any = None
    """The answer as a value of the agent's ``output_type``, once it validated."""
    output_retries: int = 0
    """How many times the answer was asked for again."""


@_part
class Durability:
    """Checkpoint bookkeeping (see ``_durable``).

    Owners: ``_durable``, ``_turn`` (released at the end), ``_tool_exec`` (calls resumed) and
    the driver that decides whether a turn writes checkpoints (``drivers``)."""

    durable: bool = False
    """True when the store keeps checkpoints and this turn writes them (never for sub-turns)."""
    origin_turn_id: str = ""
    """The id the turn was first started with; a resumed turn keeps it in its checkpoints."""
    resumed_calls: frozenset[str] = frozenset()
    """Calls that may have been running when the process that wrote the checkpoint died."""
    seq: int = 0
    tools: tuple[str, ...] | None = None
    """The agent's tool names, sorted, for its checkpoints (computed once per turn)."""
    saving: asyncio.Future[str | None] | None = None
    lock: threading.Lock | None = None
    """Stores that write from a thread: one write at a time, never an older over a newer."""
    written: int = 0
    """The highest ``seq`` the store holds (see ``_durable._save``)."""
    released: bool = False
    """True once the turn's checkpoint was dropped or handed on (``_durable.release``)."""



@_part
class Asks:
    """The turn's approvals and questions: what it asked, what was answered, what parked.

    Owner: ``_parking``. Nearly every turn asks nothing: its tables are made on first use (an
    empty dict costs 64 bytes per turn)."""

    requests: dict[str, PendingRequest] | None = None
    """By id: those restored from a parked checkpoint (with their answers), and those opened
    since; a request leaves when its call has ended."""
    fresh: frozenset[str] = frozenset()
    """Answered while the turn was parked: their ``*_RESOLVED``/``QUESTION_ANSWERED`` is
    emitted as the resumed turn uses them."""
    asked: dict[str, int] | None = None
    """Per call id, how many times its tool called ``ask`` in this run (replay order)."""
    live: dict[str, LiveRequest] | None = None
    """Requests of this run that parked: their live entry, dropped as the turn ends."""

OWNERS: dict[str, tuple[str, ...]] = {
    "transcript": ("_core._turn", "_core._model_call", "_core._tool_exec", "_core._queues",
                   "_core._subturn", "_core._composite", "_core._durable", "_core._budget",
                   "_core._answer"),
    "control": ("_core._engine", "_core._turn", "_core._model_call", "_core._composite",
                "_core._tool_exec", "_core._subturn", "_core._budget", "drivers"),
    "inbound": ("_core._queues", "_core._turn", "_core._durable", "drivers"),
    "tree": ("_core._subturn",),
    "durability": ("_core._durable", "_core._turn", "_core._tool_exec", "drivers"),
    "ledger": ("_core._budget", "_core._answer"),
    "asks": ("_core._parking",),
}
"""Which modules (under ``steerable.``; a package's name covers its modules) may write each
part's fields. The identity fields of ``TurnState`` itself are written by its constructor
only."""


class _Part(Generic[_P]):
    """A part's name on ``TurnState``: the state itself, typed as that part."""

    __slots__ = ()

    def __get__(self, st: object, owner: object = None) -> _P:
        return cast("_P", st)


@state(kw_only=True)
class TurnState(Transcript, Control, Inbound, TurnTree, Durability, Ledger, Asks):
    """One turn's state: who it is (set once, as it is made) and the fields of every part.

    The parts (``st.transcript``, ``st.control``...) are views of this one object, each typed
    as its part; the hot paths read and write the fields on the state itself (``st.iteration``:
    a part's property is a Python call, ~35 an iteration). Either way a field belongs to its
    part, and only the part's owners write it (``tests/test_turn_state_owners.py`` checks
    both forms). A live turn is one object, not eight."""

    turn_id: str
    session_id: str
    input: str
    agent: BaseAgent
    parent_turn_id: str | None = None
    depth: int = 0
    ephemeral: bool = False
    dry_run: bool = False
    """Inherited dry-run: set on a sub-turn whose ancestor runs dry, so its tools do too."""
    resume: Checkpoint | None = None
    """The checkpoint this turn continues (None for a fresh turn)."""
    started: float = field(default_factory=time.monotonic)
    created: float = field(default_factory=time.time)
    """Wall-clock start of the turn (of its first run, for a resumed turn)."""
    model_agent: Agent = field(init=False, repr=False, compare=False)
    """``agent`` as the ``Agent`` of a turn that calls a model: every turn but a composite
    agent's, which runs its children instead, never reaches the model or tool phases, and
    has this slot unset (reading it would raise ``AttributeError``). Narrowed once, here, so
    the hot paths read a typed attribute instead of checking the agent's class each time."""

    # The parts: the state itself, one name per owner (``OWNERS``).
    transcript = _Part[Transcript]()
    control = _Part[Control]()
    inbound = _Part[Inbound]()
    tree = _Part[TurnTree]()
    durability = _Part[Durability]()
    ledger = _Part[Ledger]()
    asks = _Part[Asks]()

    def __post_init__(self) -> None:
        if isinstance(self.agent, Agent):
            self.model_agent = self.agent

    def stop_reason(self) -> SkipReason | None:
        """Why tools not yet started must be skipped now, or None to go on."""
        interrupt = self.interrupt
        if interrupt is Interrupt.HARD:
            return "aborted"
        if interrupt is Interrupt.GRACEFUL:
            return "budget" if self.exceeded else "interrupted"
        if self.steering:
            return "steering"
        return None


@record(kw_only=False)
class Delivery(Record):
    """An async child's result on its way to the parent's context (or the session)."""

    parent: TurnState
    child_turn_id: str
    agent: str
    task: str
    status: TurnStatus
    text: str

    def message(self) -> Message:
        task = " ".join(self.task.split())
        if len(task) > _TASK_PREVIEW:
            task = task[: _TASK_PREVIEW - 1] + "…"
        head = (f"[Result of sub-agent {self.agent} (turn {self.child_turn_id}), "
                f"{self.status.value}; task: {task}]")
        return Message("user", f"{head}\n{self.text}" if self.text else head)


_TASK_PREVIEW = 120


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
