"""``AgentLoop``: sessions, turns and the control API on top of the engine.

The loop binds to the asyncio event loop it is first used from. Control methods
(``inject_steering``, ``interrupt_*``, ``resolve_approval``...) may be called from any thread,
hook or tool: off the loop's thread they are marshalled onto it and wait for the answer.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Any, TypeVar, cast

from steerable._answers import Answers, PendingRequest, check_park, check_types
from steerable._background import Summaries
from steerable._binding import call_on
from steerable._commands import (
    AnswerApproval,
    AnswerQuestion,
    Cancel,
    Command,
    Edit,
    FollowUp,
    Interrupt,
    Resume,
    Revoke,
    Send,
    StartTurn,
    Steer,
)
from steerable._config import Limits, Timeouts
from steerable._controls import CONTROLS, resolve
from steerable._core._agent import Agent, BaseAgent
from steerable._core._bus import Subscription
from steerable._core._cancel import CancelHandle, CancelMode
from steerable._core._checkpoint import Checkpoint
from steerable._core._composite import CompositeAgent
from steerable._core._durable import restore, write_first_checkpoint
from steerable._core._engine import Engine
from steerable._core._hook_manager import Registration
from steerable._core._permissions import Permissions
from steerable._core._queues import hold_restored
from steerable._core._resume import check_agent, check_no_checkpoint, checked_base
from steerable._core._session import InMemorySessionStore, SessionStore
from steerable._core._turn import TurnResult, begin_turn, run_turn
from steerable._core._turn_state import TurnState
from steerable._events import EventKind
from steerable._gateway import InProcessBus, serve_bus
from steerable._handle import (
    LoopStatistics,
    TurnHandle,
    TurnInfo,
    check_mode,
    check_session_id,
    check_text,
    turn_info,
)
from steerable._lanes import BusyPolicy, Lanes, QueuedTurn, check_policy
from steerable._messages import Message
from steerable._observers import Observers
from steerable._receipts import MessageInfo, MessageReceipt
from steerable.errors import ConfigurationError, SessionBusyError

__all__ = ["AgentLoop", "Interceptor", "LoopStatistics", "TurnHandle", "TurnInfo"]

T = TypeVar("T")
Interceptor = Callable[..., Any]
"""``interceptor(command, *, proceed) -> answer`` (see ``AgentLoop.intercept_commands``)."""
_RECORD_ENV = "STEERABLE_EVENT_LOG"


def _new_id(prefix: str) -> str:
    return f"{prefix}_{os.urandom(6).hex()}"  # what secrets.token_hex does, without its import


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
        park: bool = False,
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
        self._engine.park = check_park(park, self._engine.durable)
        self._answers = Answers(self, self._engine)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._turns_started = 0
        self._turns_finished = 0
        self._summaries = Summaries(self._engine)
        record = record_events if record_events is not None else os.environ.get(_RECORD_ENV)
        self._observers = Observers(self._engine, os.fspath(record) if record else None)
        self._lanes = Lanes(self)
        self._interceptors: list[Interceptor] = []
        # The one table of verbs: a command class (``_commands``) and what runs it.
        self._handlers: dict[type[Command], Callable[[Any], Any]] = {
            StartTurn: self._start, Resume: self._resume, Send: self._send,
            **{cls: functools.partial(run, self._engine) for cls, run in CONTROLS.items()},
            **self._answers.handlers,
        }

    # -- binding ------------------------------------------------------------------------------

    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
            self._engine.bus.bind(loop)
            self._observers.start(loop)
        elif loop is not self._loop:
            raise RuntimeError("this AgentLoop is bound to another asyncio event loop")
        return loop

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on the loop's thread and return its answer."""
        return call_on(self._loop, fn, *args)

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
            self._call(self._observers.add, reg, hook)

        def unregister() -> bool:
            return self._call(self._unregister, reg)

        return unregister

    def _unregister(self, reg: Registration) -> bool:
        self._observers.remove(reg)
        return self._engine.hooks.unregister(reg)

    # -- turns --------------------------------------------------------------------------------

    def start_turn(self, input: str, session_id: str | None = None, *,
                   agent: BaseAgent | None = None, discard_checkpoint: bool = False) -> TurnHandle:
        """Start a turn and return at once. Raises ``SessionBusyError`` if the session is busy,
        and ``ValueError`` (``CheckpointError``) if it has a pending checkpoint (a cancelled or
        crashed turn: ``resume`` it, or pass ``discard_checkpoint=True`` to drop it)."""
        check_text("turn input", input)
        if session_id is not None:
            check_session_id(session_id)
        if agent is not None and not isinstance(agent, BaseAgent):
            raise TypeError(f"agent must be an agent, got {type(agent).__name__}")
        handle: TurnHandle = self.submit(StartTurn(input, session_id, agent, discard_checkpoint))
        return handle

    def _start(self, cmd: StartTurn) -> TurnHandle:
        sid = cmd.session_id or _new_id("session")
        self._check_idle(sid)
        # The checkpoint the last turn handed on to the messages queued behind it is replaced
        # by this turn's first one, which holds them too.
        if cmd.session_id is not None and self._engine.durable \
                and self._engine.successors.pop(sid, None) is None:
            check_no_checkpoint(self._engine.store, sid, cmd.discard_checkpoint)
        st = TurnState(turn_id=_new_id("turn"), session_id=sid, input=cmd.input,
                       agent=cmd.agent or self.agent)
        inbox = self._engine.inbox
        queued = inbox.live.get(cmd.message_id) if cmd.message_id else None
        r = queued or MessageReceipt("send", cmd.input, sid, message_id=cmd.message_id)
        r.turn_id = st.turn_id
        r._holder = None  # the turn's input now: no longer revocable
        st.inbound.input_receipt = r
        handle = self._launch(st)
        if queued is None:
            inbox.enqueue(r, "the input of a new turn")
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
        if not st.durability.origin_turn_id:
            st.durability.origin_turn_id = st.turn_id
        # Composite turns run children, not a model loop: they stop at boundaries, keep no
        # checkpoint, and a cancelled one is saved like an interrupted one.
        st.durability.durable = self._engine.durable and not isinstance(st.agent, CompositeAgent)
        held = self._engine.waiting.get(st.session_id)
        if held is not None:  # messages its session's lane holds: in its checkpoints too
            st.inbound.held = held
        self._engine.active[st.session_id] = st
        self._engine.turns[st.turn_id] = st
        self._turns_started += 1
        begin_turn(self._engine, st)
        if st.resume is None:
            write_first_checkpoint(self._engine, st)
        task = loop.create_task(self._drive(st))
        st.control.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return TurnHandle(self, st, task)

    # -- durable turns ------------------------------------------------------------------------

    def checkpoint(self, session_id: str) -> Checkpoint | None:
        """The pending checkpoint of ``session_id`` (a cancelled turn, or one whose process
        stopped), or None. Raises ``CheckpointError`` when its file cannot be read."""
        if not isinstance(session_id, str):
            raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
        store = self._engine.checkpoints
        return None if store is None else store.load_checkpoint(session_id)

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
        handle: TurnHandle | None = self.submit(Resume(session_id, agent, force))
        return handle

    def _resume(self, cmd: Resume) -> TurnHandle | None:
        session_id, agent = cmd.session_id, cmd.agent
        self._check_idle(session_id)
        if session_id in self._engine.successors:
            raise SessionBusyError(
                f"session {session_id!r} has messages queued by send about to run; its "
                "checkpoint holds them until then (wait_session, or drop_queued)")
        cp = self.checkpoint(session_id)
        if cp is None:
            return None
        agent = agent or self.agent
        if not cmd.force:
            check_agent(cp, agent)
        base = self._engine.store.load(session_id)
        if not checked_base(cp, base):
            assert self._engine.checkpoints is not None  # it gave the checkpoint
            self._engine.checkpoints.delete_checkpoint(session_id)
            return None
        st = TurnState(turn_id=_new_id("turn"), session_id=session_id, input=cp.input,
                       agent=agent, resume=cp, created=cp.created)
        restore(self._engine, st, cp, base)  # now: a message for it is checkpointed on top
        hold_restored(self._engine, st)
        return self._launch(st)

    async def _drive(self, st: TurnState) -> TurnResult:
        try:
            result = await run_turn(self._engine, st)
            self._answers.after_turn(st)
        finally:
            self._engine.turns.pop(st.turn_id, None)
            if self._engine.active.get(st.session_id) is st:
                del self._engine.active[st.session_id]
            self._turns_finished += 1
        if not self._closed:
            self._summaries.maybe_start(st, result)
        return result

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
        check_text("message text", text)
        check_session_id(session_id)  # here too: a queued message reaches start_turn later
        if policy is not None:
            check_policy(policy)
        if agent is not None and not isinstance(agent, Agent):
            raise TypeError(f"agent must be an Agent, got {type(agent).__name__}")
        self._bind_if_running()
        sent: TurnHandle | QueuedTurn = self.submit(Send(text, session_id, policy, agent))
        return sent

    def _send(self, cmd: Send) -> TurnHandle | QueuedTurn:
        policy = self.busy_policy if cmd.policy is None else check_policy(cmd.policy)
        sent: TurnHandle | QueuedTurn = self._lanes.send(cmd.text, cmd.session_id, policy,
                                                         cmd.agent)
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

    def inject_steering(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Add a user message to the running turn; it reaches the model at the next checkpoint.
        The receipt is falsy when the turn cannot take it (none active, ending, queue full)."""
        check_text("steering text", text)
        receipt: MessageReceipt = self.submit(Steer(text, session_id))
        return receipt

    def inject_follow_up(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Queue a message to run as a new turn after the running one (see TurnResult.follow_ups)."""
        check_text("follow-up text", text)
        receipt: MessageReceipt = self.submit(FollowUp(text, session_id))
        return receipt

    def queued_messages(self, session_id: str) -> list[MessageInfo]:
        """The session's messages not yet terminal, in the order they were accepted: steering
        and follow-ups of its running turn, messages ``send`` queued, a turn's input until its
        first LLM request."""
        check_session_id(session_id)
        return self._call(self._engine.inbox.queued, session_id)

    def revoke_message(self, message_id: str) -> bool:
        """Withdraw a queued message (it becomes ``revoked``); False once it is no longer
        queued (delivered, handed back, or already taken into a turn's context)."""
        if not isinstance(message_id, str):
            raise TypeError(f"message_id must be a str, got {type(message_id).__name__}")
        return bool(self.submit(Revoke(message_id)))

    def edit_message(self, message_id: str, text: str) -> bool:
        """Change the text of a queued message (it keeps its id and place); False once it is
        no longer queued."""
        if not isinstance(message_id, str):
            raise TypeError(f"message_id must be a str, got {type(message_id).__name__}")
        check_text("message text", text)
        return bool(self.submit(Edit(message_id, text)))

    def interrupt_graceful(self, session_id: str | None = None, hint: str | None = None) -> bool:
        """Skip tools not started, then one last call without tools; the turn ends interrupted."""
        if hint is not None and not isinstance(hint, str):
            raise TypeError(f"hint must be a str or None, got {type(hint).__name__}")
        return bool(self.submit(Interrupt(session_id, hint=hint)))

    def interrupt_hard(self, session_id: str | None = None) -> bool:
        """Cancel the LLM call and every tool now, roll the session back; the turn ends aborted."""
        return bool(self.submit(Interrupt(session_id, hard=True)))

    def cancel(self, session_id: str | None = None,
               mode: CancelMode = CancelMode.IMMEDIATE) -> CancelHandle | None:
        """Cancel the running turn; None when no turn is active. ``IMMEDIATE`` is
        ``interrupt_hard``; ``AFTER_MODEL`` and ``AFTER_TOOLS`` stop it at a safe point with
        status ``cancelled``, keeping its checkpoint for ``resume``. Repeated cancels combine,
        the strongest wins. ``await handle.wait()``; ``handle.contributed``."""
        check_mode(mode)
        handle: CancelHandle | None = self.submit(Cancel(session_id, mode=mode))
        return handle

    def resolve_approval(self, request_id: str, approved: bool,
                         reason: str = "") -> bool | TurnHandle:
        """Answer an APPROVAL_REQUESTED (False: no such request), or resume a parked turn."""
        check_types(request_id=(request_id, str), approved=(approved, bool), reason=(reason, str))
        return cast("bool | TurnHandle", self.submit(AnswerApproval(request_id, approved, reason)))

    def answer(self, request_id: str, value: Any) -> bool | TurnHandle:
        """Answer a QUESTION_ASKED (see ``steerable._answers``): True, or the resumed turn."""
        check_types(request_id=(request_id, str))
        return cast("bool | TurnHandle", self.submit(AnswerQuestion(request_id, value)))

    def pending_requests(self, session_id: str | None = None) -> list[PendingRequest]:
        """Approvals and questions waiting for a person (live, and parked in the store)."""
        return self._call(self._answers.pending, session_id)

    # -- the one way in -----------------------------------------------------------------------

    def submit(self, command: Command) -> Any:
        """Run an inbound command (``steerable._commands``) on the loop's thread and return its
        answer: what the method that builds it returns. Every message and control enters the
        loop here, past the interceptors (``intercept_commands``)."""
        return self._call(self._run_command, command)

    def intercept_commands(self, interceptor: Interceptor) -> Callable[[], None]:
        """Wrap every command: ``interceptor(command, proceed)`` runs on the loop's thread and
        returns the answer (normally ``proceed(command)``'s). Returns a function that removes
        it. The event recorder sees what comes in this way."""
        self._interceptors.append(interceptor)

        def remove() -> None:
            if interceptor in self._interceptors:
                self._interceptors.remove(interceptor)

        return remove

    def _run_command(self, command: Command) -> Any:
        proceed: Callable[[Command], Any] = self._dispatch
        for interceptor in reversed(self._interceptors):
            proceed = functools.partial(interceptor, proceed=proceed)
        return proceed(command)

    def _dispatch(self, command: Command) -> Any:
        handler = self._handlers.get(type(command))
        if handler is None:
            raise TypeError(f"not a command: {command!r}")
        return handler(command)

    def active_turn(self, session_id: str | None = None) -> TurnInfo | None:
        """The session's running top-level turn, with its running sub-turns in ``children``."""
        def info() -> TurnInfo | None:
            st = resolve(self._engine, session_id)
            return None if st is None else turn_info(st)

        return self._call(info)

    def turn_handle(self, turn_id: str) -> TurnHandle | None:
        """A handle on any running turn, sub-turns included (by ``turn_id``, e.g. a
        ``SUBTURN_SPAWN``'s ``child_turn_id``), to steer or interrupt it; None once it ended."""
        if not isinstance(turn_id, str):
            raise TypeError(f"turn_id must be a str, got {type(turn_id).__name__}")

        def find() -> TurnHandle | None:
            st = self._engine.turns.get(turn_id)
            if st is None or st.control.task is None or st.control.task.done():
                return None
            return TurnHandle(self, st, st.control.task)

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
            active_turns=self._engine.slots.running,
            turns_started=self._turns_started,
            turns_finished=self._turns_finished,
        )

    async def wait_idle(self) -> None:
        """Wait until no turn runs and no background summary is under way (a turn's end may
        start a summary, so this waits until both are done together)."""
        subturns = self._engine.subturn_tasks
        while self._tasks or self._summaries.tasks or subturns:
            await asyncio.wait([*self._tasks, *self._summaries.tasks, *subturns])

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
        for task in list(self._summaries.tasks):
            task.cancel()
        if self._summaries.tasks:
            await asyncio.wait(list(self._summaries.tasks), timeout=grace)
        self._engine.bus.close()
        waiting = self._observers.tasks()
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

