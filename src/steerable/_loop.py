"""``AgentLoop``: sessions, turns and the control API on top of the engine.

The loop binds to the asyncio event loop it is first used from. Control methods
(``inject_steering``, ``interrupt_*``, ``resolve_approval``...) may be called from any thread,
hook or tool: off the loop's thread they are marshalled onto it and wait for the answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
from collections.abc import Callable, Generator, Iterable, Mapping
from types import MappingProxyType
from typing import Any, TypeVar

from steerable._config import Limits, Timeouts
from steerable._core._agent import Agent, BaseAgent
from steerable._core._bus import Subscription
from steerable._core._cancel import CancelHandle, CancelMode
from steerable._core._checkpoint import Checkpoint
from steerable._core._composite import CompositeAgent
from steerable._core._durable import restore, write_first_checkpoint
from steerable._core._engine import Engine
from steerable._core._hook_manager import Registration
from steerable._core._permissions import Permissions
from steerable._core._queues import follow_up, hold_restored, steer
from steerable._core._resume import check_agent, check_no_checkpoint, checked_base
from steerable._core._session import InMemorySessionStore, SessionStore
from steerable._core._summarize import needs_summary, summarize_session
from steerable._core._turn import TurnResult, begin_turn, run_turn
from steerable._core._turn_state import TurnState
from steerable._events import ErrorEvent, EventKind, TurnPhase, TurnStatus
from steerable._gateway import InProcessBus, serve_bus
from steerable._lanes import BusyPolicy, Lanes, QueuedTurn, SendAction, check_policy
from steerable._messages import Message
from steerable._receipts import MessageInfo, MessageKind, MessageReceipt, MessageState
from steerable._records import Record, record
from steerable.errors import ConfigurationError, SessionBusyError

__all__ = ["AgentLoop", "LoopStatistics", "TurnHandle", "TurnInfo"]

T = TypeVar("T")
_RECORD_ENV = "STEERABLE_EVENT_LOG"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(6).hex()}"  # what secrets.token_hex does, without its import


def _check_mode(mode: object) -> None:
    if not isinstance(mode, CancelMode):
        raise TypeError(f"mode must be a CancelMode, got {mode!r}")


def _check_session_id(session_id: object) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")


def _check_text(what: str, text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what} must not be empty")
    return text


@record(kw_only=False)
class TurnInfo(Record):
    """A snapshot of a running turn (``AgentLoop.active_turn``)."""

    turn_id: str
    session_id: str
    parent_turn_id: str | None
    phase: TurnPhase
    iteration: int
    started: float
    steering_pending: int
    follow_ups_pending: int
    agent: str = ""
    children: tuple[TurnInfo, ...] = ()
    """The turn's running sub-turns, each with its own children: the turn tree."""


def _turn_info(st: TurnState) -> TurnInfo:
    return TurnInfo(st.turn_id, st.session_id, st.parent_turn_id, st.phase, st.iteration,
                    st.started, len(st.steering), len(st.follow_ups), st.agent.name,
                    tuple(_turn_info(c) for c in list(st.children.values())))


@record(kw_only=False)
class LoopStatistics(Record):
    """Counters of an AgentLoop (``AgentLoop.statistics``)."""

    events_emitted: int
    dropped: Mapping[EventKind, int]
    """Events lost to full subscriber buffers, per kind, across all subscriptions."""
    subscribers: int
    active_turns: int
    turns_started: int
    turns_finished: int


def _wake(waiter: asyncio.Future[None], _task: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


class TurnHandle:
    """A running turn. Await it for the ``TurnResult``; awaiting never cancels the turn."""

    def __init__(self, loop: AgentLoop, state: TurnState, task: asyncio.Task[TurnResult]) -> None:
        self._loop = loop
        self._state = state
        self._task = task

    @property
    def turn_id(self) -> str:
        return self._state.turn_id

    @property
    def session_id(self) -> str:
        return self._state.session_id

    def done(self) -> bool:
        return self._task.done()

    def result(self) -> TurnResult:
        """The result of a finished turn; raises ``asyncio.InvalidStateError`` before that."""
        return self._task.result()

    @property
    def message_id(self) -> str | None:
        """The id of the message the turn was started with (None for a resumed turn that had
        delivered it before its checkpoint)."""
        r = self._state.input_receipt
        return None if r is None else r.message_id

    @property
    def state(self) -> MessageState:
        """The state of that message: ``queued`` until the turn's first LLM request carries it."""
        r = self._state.input_receipt
        return MessageState.DELIVERED if r is None else r.state

    def inject_steering(self, text: str) -> MessageReceipt:
        _check_text("steering text", text)
        return self._loop._call(steer, self._loop._engine, self._state, text)

    def inject_follow_up(self, text: str) -> MessageReceipt:
        _check_text("follow-up text", text)
        return self._loop._call(follow_up, self._loop._engine, self._state, text)

    def interrupt_graceful(self, hint: str | None = None) -> bool:
        return self._loop._call(self._loop._engine.interrupt_graceful, self._state, hint)

    def interrupt_hard(self) -> bool:
        return self._loop._call(self._loop._engine.interrupt_hard, self._state)

    @property
    def action(self) -> SendAction:
        """What ``AgentLoop.send`` did with the message: a handle means a turn was started."""
        return "started"

    def cancel(self, mode: CancelMode = CancelMode.IMMEDIATE) -> CancelHandle:
        """Cancel this turn (see ``AgentLoop.cancel``); after it ended, a handle that did not
        contribute."""
        _check_mode(mode)
        return self._loop._call(self._loop._engine.cancel, self._state, mode)

    def __await__(self) -> Generator[Any, None, TurnResult]:
        # What asyncio.shield does, with one future and one callback instead of two of each:
        # cancelling the awaiting task cancels ``waiter`` only, never the turn.
        task = self._task
        if not task.done():
            waiter = task.get_loop().create_future()
            task.add_done_callback(functools.partial(_wake, waiter))
            yield from waiter
        return task.result()

    def __repr__(self) -> str:
        return f"<TurnHandle {self.turn_id} session={self.session_id} done={self.done()}>"


class AgentLoop:
    """Runs turns of ``agent`` over sessions, with events, hooks, interrupts and steering.

    ``store`` keeps sessions between turns (in memory by default). ``record_events`` (or the
    ``STEERABLE_EVENT_LOG`` environment variable) names a file to write every event to, as
    JSON lines. When the store keeps checkpoints (``JSONLSessionStore``, the in-memory store)
    every turn writes one at each safe point, so a cancelled turn, or one whose process was
    killed, can be resumed (``resume``); ``checkpoints=False`` turns that off.
    """

    def __init__(
        self,
        agent: BaseAgent,
        *,
        store: SessionStore | None = None,
        limits: Limits | None = None,
        timeouts: Timeouts | None = None,
        permissions: Permissions | Iterable[tuple[str, str]] | None = None,
        record_events: str | os.PathLike[str] | None = None,
        busy_policy: BusyPolicy = "steer",
        checkpoints: bool = True,
    ) -> None:
        if not isinstance(agent, BaseAgent):
            raise ConfigurationError(
                f"AgentLoop needs an agent (Agent or a composite), got {type(agent).__name__}")
        if store is not None and not isinstance(store, SessionStore):
            raise ConfigurationError(
                f"store must implement SessionStore (load/append/replace...), got {type(store).__name__}"
            )
        if limits is not None and not isinstance(limits, Limits):
            raise ConfigurationError(f"limits must be a Limits, got {type(limits).__name__}")
        if timeouts is not None and not isinstance(timeouts, Timeouts):
            raise ConfigurationError(f"timeouts must be a Timeouts, got {type(timeouts).__name__}")
        if permissions is None:
            permissions = Permissions()
        elif not isinstance(permissions, Permissions):
            permissions = Permissions(permissions)
        try:
            self.busy_policy: BusyPolicy = check_policy(busy_policy)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self.agent = agent
        self.permissions = permissions
        self._engine = Engine(
            store=store if store is not None else InMemorySessionStore(),
            limits=limits or Limits(),
            timeouts=timeouts or Timeouts(),
            permissions=permissions,
            checkpoints=checkpoints,
        )
        self._engine.runner = functools.partial(run_turn, self._engine)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._observers: dict[Registration, tuple[Subscription, asyncio.Task[None] | None]] = {}
        self._turns_started = 0
        self._turns_finished = 0
        self._summarizing: set[str] = set()
        self._background: set[asyncio.Task[bool]] = set()
        """Summaries under way: owned here, cancelled by aclose."""
        record = record_events if record_events is not None else os.environ.get(_RECORD_ENV)
        # A path, made a Path by the recorder (imported only then: pathlib and the recorder are
        # not needed to run turns, and cost the core's import ~4 ms).
        self._record_path = os.fspath(record) if record else None
        self._recorder: asyncio.Task[None] | None = None
        self._lanes = Lanes(self)

    # -- binding ------------------------------------------------------------------------------

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._engine.bus.bind(loop)
            if self._record_path is not None:
                sub = self._engine.bus.subscribe(None, buffer=65536)
                from steerable._recorder import record_events

                self._recorder = loop.create_task(record_events(sub, self._record_path))
            for reg, (sub, task) in list(self._observers.items()):
                if task is None:
                    self._observers[reg] = (sub, loop.create_task(self._observe(reg, sub)))
        elif loop is not self._loop:
            raise RuntimeError("this AgentLoop is bound to another asyncio event loop")
        return loop

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the loop's thread and return its answer."""
        loop = self._loop
        if loop is None:
            return fn(*args)  # nothing has run yet: there is no other thread to race with
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return fn(*args)
        if loop.is_closed() or not loop.is_running():
            raise RuntimeError("the AgentLoop's event loop is not running")
        answer: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                answer.set_result(fn(*args))
            except BaseException as exc:
                answer.set_exception(exc)

        loop.call_soon_threadsafe(run)
        # Wait as long as the loop lives (its answer needs it), never a fixed time: a loop that
        # stops or closes before running ``run`` fails the call at once instead of after 30 s.
        while True:
            try:
                return answer.result(timeout=0.05)
            except concurrent.futures.TimeoutError:
                if not answer.done() and (loop.is_closed() or not loop.is_running()):
                    raise RuntimeError(
                        "the AgentLoop's event loop stopped before it could answer") from None

    # -- events and hooks ---------------------------------------------------------------------

    def subscribe(self, kinds: Iterable[EventKind] | None = None, buffer: int = 256) -> Subscription:
        """Receive events (all, or only ``kinds``) in a bounded buffer; see ``Subscription``."""
        return self._call(self._engine.bus.subscribe, kinds, buffer)

    def register_hook(self, hook: Any, priority: int = 0, timeout: float | None = None) -> Callable[[], bool]:
        """Register ``hook``; higher priority runs first. Returns a function that unregisters it.

        An observer (``on_event``) gets every event, or only the kinds in its ``event_kinds``
        attribute when it has one (the others then cost it nothing)."""
        reg = self._call(self._engine.hooks.register, hook, priority, timeout)
        if "on_event" in reg.points:
            kinds = getattr(hook, "event_kinds", None)
            sub = self._call(self._engine.bus.subscribe, kinds, 4096)
            task = None
            if self._loop is not None:
                task = self._loop.create_task(self._observe(reg, sub))
            self._observers[reg] = (sub, task)

        def unregister() -> bool:
            return self._call(self._unregister, reg)

        return unregister

    def _unregister(self, reg: Registration) -> bool:
        observed = self._observers.pop(reg, None)
        if observed is not None:
            sub, task = observed
            sub.close()
            if task is not None:
                task.cancel()
        return self._engine.hooks.unregister(reg)

    async def _observe(self, reg: Registration, sub: Subscription) -> None:
        # Observers read a subscription in their own task, so they can never slow a turn.
        async for event in sub:
            # An observer that fails on the report of its own failure must not loop forever.
            quiet = isinstance(event, ErrorEvent) and event.source == "observer"
            await self._engine.hooks.call(reg, "on_event", event, self._engine.timeouts.hook,
                                          source=None if quiet else "observer")

    # -- turns --------------------------------------------------------------------------------

    def start_turn(self, input: str, session_id: str | None = None, *,
                   agent: BaseAgent | None = None, discard_checkpoint: bool = False,
                   receipt: MessageReceipt | None = None) -> TurnHandle:
        """Start a turn and return at once. Raises ``SessionBusyError`` if the session is busy,
        and ``ValueError`` (``CheckpointError``) if it has a pending checkpoint (a cancelled or
        crashed turn: ``resume`` it, or pass ``discard_checkpoint=True`` to drop it)."""
        _check_text("turn input", input)
        if session_id is not None:
            _check_session_id(session_id)
        if agent is not None and not isinstance(agent, BaseAgent):
            raise TypeError(f"agent must be an agent, got {type(agent).__name__}")
        sid = session_id or _new_id("session")
        self._check_idle(sid)
        if session_id is not None and self._engine.durable:
            check_no_checkpoint(self._engine.store, sid, discard_checkpoint)
        st = TurnState(turn_id=_new_id("turn"), session_id=sid, input=input,
                       agent=agent or self.agent)
        r = receipt or MessageReceipt("send", input, sid)
        r.turn_id = st.turn_id
        r._holder = None  # the turn's input now: no longer revocable
        st.input_receipt = r
        handle = self._launch(st)
        if r.message_id not in self._engine.inbox.live:  # (a message send queued is already)
            self._engine.inbox.enqueue(r, "the input of a new turn")
        return handle

    def _check_idle(self, sid: str) -> None:
        if self._closed:
            raise RuntimeError("this AgentLoop is closed")
        if sid in self._engine.active:
            busy = self._engine.active[sid]
            raise SessionBusyError(
                f"session {sid!r} already has an active turn ({busy.turn_id}); steer it, queue "
                "a follow-up, or wait for it to end"
            )

    def _launch(self, st: TurnState) -> TurnHandle:
        loop = self._bind()
        if not st.origin_turn_id:
            st.origin_turn_id = st.turn_id
        # Composite turns run children, not a model loop: they stop at boundaries, keep no
        # checkpoint, and a cancelled one is saved like an interrupted one.
        st.durable = self._engine.durable and not isinstance(st.agent, CompositeAgent)
        self._engine.active[st.session_id] = st
        self._engine.turns[st.turn_id] = st
        self._turns_started += 1
        begin_turn(self._engine, st)
        if st.resume is None:
            write_first_checkpoint(self._engine, st)
        task = loop.create_task(self._drive(st))
        st.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return TurnHandle(self, st, task)

    # -- durable turns ------------------------------------------------------------------------

    def checkpoint(self, session_id: str) -> Checkpoint | None:
        """The pending checkpoint of ``session_id`` (a cancelled turn, or one whose process
        stopped), or None. Raises ``CheckpointError`` when its file cannot be read."""
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        if not self._engine.durable:
            return None
        cp: Checkpoint | None = self._engine.store.load_checkpoint(session_id)  # type: ignore[attr-defined]
        return cp

    def resume(self, session_id: str, *, agent: BaseAgent | None = None,
               force: bool = False) -> TurnHandle | None:
        """Continue the session's pending turn from its checkpoint; None when it has none.

        Responses and tool results the checkpoint holds are not requested or run again; the
        tool calls still pending run; the one call that may have been running when the
        process died runs again with ``ToolContext.resumed`` set. The agent must have the
        name and tools of the one that wrote the checkpoint (``CheckpointError`` otherwise),
        unless ``force``.
        """
        if agent is not None and not isinstance(agent, BaseAgent):
            raise TypeError(f"agent must be an agent, got {type(agent).__name__}")
        self._check_idle(session_id)
        cp = self.checkpoint(session_id)
        if cp is None:
            return None
        agent = agent or self.agent
        if not force:
            check_agent(cp, agent)
        base = self._engine.store.load(session_id)
        if not checked_base(cp, base):
            self._engine.store.delete_checkpoint(session_id)  # type: ignore[attr-defined]
            return None
        st = TurnState(turn_id=_new_id("turn"), session_id=session_id, input=cp.input,
                       agent=agent, resume=cp, origin_turn_id=cp.origin_turn_id,
                       created=cp.created, base=base[cp.base_dropped:],
                       base_rewritten=cp.base_dropped > 0,
                       base_count=len(base) if cp.base_count is None else cp.base_count,
                       base_dropped=cp.base_dropped)
        restore(self._engine, st, cp)  # now: a message for it is checkpointed on top of this
        hold_restored(self._engine, st)
        return self._launch(st)

    async def _drive(self, st: TurnState) -> TurnResult:
        try:
            result = await run_turn(self._engine, st)
        finally:
            self._engine.turns.pop(st.turn_id, None)
            if self._engine.active.get(st.session_id) is st:
                del self._engine.active[st.session_id]
            self._turns_finished += 1
        self._maybe_summarize(st, result)
        return result

    def _maybe_summarize(self, st: TurnState, result: TurnResult) -> None:
        policy = st.agent.summary if isinstance(st.agent, Agent) else None
        if policy is None or self._closed or result.status in (TurnStatus.ABORTED, TurnStatus.ERROR):
            return
        if st.session_id in self._summarizing:
            return
        # The estimate uses what the turn already holds: no store read on the hot path.
        if not needs_summary([*st.base, *st.new], policy):
            return
        self._summarizing.add(st.session_id)
        task = asyncio.get_running_loop().create_task(summarize_session(self._engine, st, policy))
        self._background.add(task)

        def done(t: asyncio.Task[bool]) -> None:
            self._background.discard(t)
            self._summarizing.discard(st.session_id)

        task.add_done_callback(done)

    async def run_turn(self, input: str, session_id: str | None = None, *,
                       agent: BaseAgent | None = None,
                       discard_checkpoint: bool = False) -> TurnResult:
        """Start a turn and wait for it. Cancelling the caller hard-aborts the turn."""
        handle = self.start_turn(input, session_id, agent=agent,
                                 discard_checkpoint=discard_checkpoint)
        try:
            result: TurnResult = await handle
        except asyncio.CancelledError:
            handle.interrupt_hard()
            raise
        return result

    # -- messages from users and channels -----------------------------------------------------

    def send(self, text: str, session_id: str, policy: BusyPolicy | None = None, *,
             agent: Agent | None = None) -> TurnHandle | QueuedTurn:
        """Deliver a user's message: an idle session starts a turn (its ``TurnHandle``); a busy
        one follows ``policy`` (default ``busy_policy``): ``steer``, ``follow_up``,
        ``interrupt``, ``rollback`` or ``reject`` (raises ``SessionBusyError``).

        Either answer has ``.action`` (what was done), ``.turn_id`` and is awaitable for the
        ``TurnResult`` of the turn that took the message. Messages queued here run in order,
        one turn at a time per session, each after the turn before has been saved; the
        follow-ups a turn hands back run before them.
        """
        _check_text("message text", text)
        _check_session_id(session_id)  # here too: a queued message reaches start_turn later
        chosen = self.busy_policy if policy is None else check_policy(policy)
        if agent is not None and not isinstance(agent, Agent):
            raise TypeError(f"agent must be an Agent, got {type(agent).__name__}")
        self._bind_if_running()
        sent: TurnHandle | QueuedTurn = self._call(self._lanes.send, text, session_id, chosen,
                                                   agent)
        return sent

    def busy(self, session_id: str) -> bool:
        """True while the session has a turn running or messages waiting for one."""
        return self._call(self._lanes.busy, session_id)

    def queued(self, session_id: str) -> list[str]:
        """The texts of the messages ``send`` queued for the session, in the order they run."""
        return self._call(self._lanes.queued, session_id)

    def drop_queued(self, session_id: str) -> list[str]:
        """Withdraw the session's queued messages (their awaitables raise); their texts."""
        return self._call(self._lanes.drop_queued, session_id)

    async def wait_session(self, session_id: str) -> TurnResult | None:
        """Wait until the session has no turn running and nothing queued. Returns the result
        of the last turn ``send`` ran for it (None if none; the last 1,024 sessions are kept)."""
        return await self._lanes.wait_session(session_id)

    async def run(self, bus: InProcessBus, *, max_sessions: int = 64,
                  forward_events: bool = True) -> None:
        """Serve ``bus``: each inbound message goes through ``send`` with its policy, and gets
        one ``OutboundReply`` when its turn ends; events go outbound too (unless
        ``forward_events`` is False). At most ``max_sessions`` sessions work at once. Returns
        once the bus is closed and every message taken has been answered."""
        if not isinstance(bus, InProcessBus):
            raise TypeError(f"bus must be an InProcessBus, got {type(bus).__name__}")
        self._bind()
        await serve_bus(self, bus, max_sessions, forward_events)

    def _bind_if_running(self) -> None:
        if self._loop is not None:
            return  # bound already: _call runs the work on that loop's thread
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("send needs a running asyncio event loop") from None
        self._bind()

    # -- control ------------------------------------------------------------------------------

    def _resolve(self, session_id: str | None) -> TurnState | None:
        active = self._engine.active
        if session_id is not None:
            return active.get(session_id)
        if not active:
            return None
        if len(active) > 1:
            raise ValueError(
                f"{len(active)} turns are active (sessions {sorted(active)}); pass session_id"
            )
        return next(iter(active.values()))

    def _control(self, method: Callable[..., bool], session_id: str | None, *args: Any) -> bool:
        def act() -> bool:
            st = self._resolve(session_id)
            return False if st is None else method(st, *args)

        return self._call(act)

    def _message(self, put: Callable[[Engine, TurnState, str], MessageReceipt],
                 kind: MessageKind, text: str, session_id: str | None) -> MessageReceipt:
        def act() -> MessageReceipt:
            st = self._resolve(session_id)
            if st is None:
                r = MessageReceipt(kind, text, session_id or "")
                return self._engine.inbox.reject(r, "no turn is active")
            return put(self._engine, st, text)

        return self._call(act)

    def inject_steering(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Add a user message to the running turn; it reaches the model at the next checkpoint.
        The receipt is falsy when the turn cannot take it (none active, ending, queue full)."""
        _check_text("steering text", text)
        return self._message(steer, "steer", text, session_id)

    def inject_follow_up(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Queue a message to run as a new turn after the running one (see TurnResult.follow_ups)."""
        _check_text("follow-up text", text)
        return self._message(follow_up, "follow_up", text, session_id)

    def queued_messages(self, session_id: str) -> list[MessageInfo]:
        """The session's messages not yet terminal, in the order they were accepted: steering
        and follow-ups of its running turn, messages ``send`` queued, a turn's input until its
        first LLM request."""
        _check_session_id(session_id)
        return self._call(self._engine.inbox.queued, session_id)

    def revoke_message(self, message_id: str) -> bool:
        """Withdraw a queued message (it becomes ``revoked``); False once it is no longer
        queued (delivered, handed back, or already taken into a turn's context)."""
        if not isinstance(message_id, str):
            raise TypeError(f"message_id must be a str, got {type(message_id).__name__}")
        return self._call(self._engine.inbox.revoke, message_id)

    def edit_message(self, message_id: str, text: str) -> bool:
        """Change the text of a queued message (it keeps its id and place); False once it is
        no longer queued."""
        if not isinstance(message_id, str):
            raise TypeError(f"message_id must be a str, got {type(message_id).__name__}")
        _check_text("message text", text)
        return self._call(self._engine.inbox.edit, message_id, text)

    def interrupt_graceful(self, session_id: str | None = None, hint: str | None = None) -> bool:
        """Skip tools not started, then one last call without tools; the turn ends interrupted."""
        if hint is not None and not isinstance(hint, str):
            raise TypeError(f"hint must be a str or None, got {type(hint).__name__}")
        return self._control(self._engine.interrupt_graceful, session_id, hint)

    def interrupt_hard(self, session_id: str | None = None) -> bool:
        """Cancel the LLM call and every tool now, roll the session back; the turn ends aborted."""
        return self._control(self._engine.interrupt_hard, session_id)

    def cancel(self, session_id: str | None = None,
               mode: CancelMode = CancelMode.IMMEDIATE) -> CancelHandle | None:
        """Cancel the running turn; None when no turn is active. ``IMMEDIATE`` is
        ``interrupt_hard``; ``AFTER_MODEL`` and ``AFTER_TOOLS`` stop it at a safe point with
        status ``cancelled``, keeping its checkpoint for ``resume``. Repeated cancels combine,
        the strongest wins. ``await handle.wait()``; ``handle.contributed``."""
        _check_mode(mode)

        def act() -> CancelHandle | None:
            st = self._resolve(session_id)
            return None if st is None else self._engine.cancel(st, mode)

        return self._call(act)

    def resolve_approval(self, request_id: str, approved: bool, reason: str = "") -> bool:
        """Answer an APPROVAL_REQUESTED; False when no such request is open."""
        if not isinstance(request_id, str):
            raise TypeError(f"request_id must be a str, got {type(request_id).__name__}")
        if not isinstance(approved, bool):
            raise TypeError(f"approved must be a bool, got {type(approved).__name__}")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        return self._call(self._engine.broker.resolve, request_id, approved, reason)

    def active_turn(self, session_id: str | None = None) -> TurnInfo | None:
        """The session's running top-level turn, with its running sub-turns in ``children``."""
        def info() -> TurnInfo | None:
            st = self._resolve(session_id)
            return None if st is None else _turn_info(st)

        return self._call(info)

    def turn_handle(self, turn_id: str) -> TurnHandle | None:
        """A handle on any running turn, sub-turns included (by ``turn_id``, e.g. a
        ``SUBTURN_SPAWN``'s ``child_turn_id``), to steer or interrupt it; None once it ended."""
        if not isinstance(turn_id, str):
            raise TypeError(f"turn_id must be a str, got {type(turn_id).__name__}")

        def find() -> TurnHandle | None:
            st = self._engine.turns.get(turn_id)
            if st is None or st.task is None or st.task.done():
                return None
            return TurnHandle(self, st, st.task)

        return self._call(find)

    # -- sessions and statistics --------------------------------------------------------------

    def session_messages(self, session_id: str) -> list[Message]:
        """The persisted history of a session (no system message); [] for an unknown one."""
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        return self._engine.store.load(session_id)

    @property
    def store(self) -> SessionStore:
        return self._engine.store

    def statistics(self) -> LoopStatistics:
        bus = self._engine.bus
        return LoopStatistics(
            events_emitted=bus.emitted,
            dropped=MappingProxyType(bus.dropped),
            subscribers=bus.subscriber_count,
            active_turns=len(self._engine.turns),
            turns_started=self._turns_started,
            turns_finished=self._turns_finished,
        )

    async def wait_idle(self) -> None:
        """Wait until no turn runs and no background summary is under way (a turn's end may
        start a summary, so this waits until both are done together)."""
        subturns = self._engine.subturn_tasks
        while self._tasks or self._background or subturns:
            await asyncio.wait([*self._tasks, *self._background, *subturns])

    # -- shutdown -----------------------------------------------------------------------------

    async def aclose(self, grace: float = 1.0) -> None:
        """Abort running turns, end every subscription and observer, and wait for them."""
        if self._closed:
            return
        self._closed = True
        self._lanes.close()
        turns = self._engine.turns
        for st in list(turns.values()):
            # Top-level turns cascade to their children; async children whose parent has
            # ended are aborted on their own.
            if st.parent_turn_id is None or st.parent_turn_id not in turns:
                self._engine.interrupt_hard(st)
        running = [*self._tasks, *self._engine.subturn_tasks]
        if running:
            await asyncio.wait(running, timeout=grace)
        await self._lanes.aclose(grace)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.wait(list(self._background), timeout=grace)
        self._engine.bus.close()
        waiting: list[asyncio.Task[Any]] = [t for _, t in self._observers.values() if t is not None]
        if self._recorder is not None:
            waiting.append(self._recorder)
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=grace)
        await self._engine.reaper.aclose(grace)

    async def __aenter__(self) -> AgentLoop:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AgentLoop agent={self.agent.name} active={len(self._engine.active)}>"

