"""``AgentLoop``: the front of the driver layer, a thin one over its parts.

The loop binds to the asyncio event loop it is first used from (``_binding``). Every message,
control and answer becomes one command (``_commands``) run by the one table of verbs
(``_controls.VERBS``) on that loop's thread: from any other thread, hook or tool the call is
marshalled there and waits for the answer. Turns are started, resumed and driven by
``_turns``; ``send``'s busy policies live in the lanes (``_lanes``), which see the engine only
through a narrow view (``_lane_view``); ``on_event`` observers and the event log read their
own subscriptions (``_observers``).
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from steerable._config import Limits, Timeouts
from steerable._core._agent import Agent, BaseAgent
from steerable._core._bus import Observer, Subscription
from steerable._core._cancel import CancelHandle, CancelMode
from steerable._core._checkpoint import Checkpoint
from steerable._core._engine import Engine
from steerable._core._permissions import Permissions
from steerable._core._requests import PendingRequest
from steerable._core._session import InMemorySessionStore, SessionStore
from steerable._core._turn import TurnResult, run_turn
from steerable._events import Event, EventKind
from steerable._messages import Message
from steerable._parts import Part
from steerable._receipts import MessageInfo, MessageReceipt
from steerable.drivers import _commands as cmd
from steerable.drivers._answers import check_park
from steerable.drivers._binding import LoopBinding
from steerable.drivers._checks import (
    check_busy_policy,
    check_config,
    check_content,
    check_session_id,
    check_str,
)
from steerable.drivers._controls import Dispatcher, Interceptor, LoopParts
from steerable.drivers._handle import LoopStatistics, TurnHandle, TurnInfo
from steerable.drivers._lane_view import EngineView
from steerable.drivers._lanes import BusyPolicy, Lanes, QueuedTurn
from steerable.drivers._observers import Observers
from steerable.drivers._turns import Turns

if TYPE_CHECKING:
    from steerable.drivers._gateway import InProcessBus

__all__ = ["AgentLoop"]

_RECORD_ENV = "STEERABLE_EVENT_LOG"


class AgentLoop:
    """Runs turns of ``agent`` over sessions, with events, hooks, interrupts and steering.

    ``store`` keeps sessions between turns (in memory by default). ``record_events`` (or the
    ``STEERABLE_EVENT_LOG`` environment variable) names a file to write every event to, as
    JSON lines. When the store keeps checkpoints (``JSONLSessionStore``, the in-memory store)
    every turn writes one at each safe point, so a cancelled turn, or one whose process was
    killed, can be resumed (``resume``); ``checkpoints=False`` turns that off.
    """

    def __init__(self, agent: BaseAgent, *, store: SessionStore | None = None,
                 limits: Limits | None = None, timeouts: Timeouts | None = None,
                 permissions: Permissions | Iterable[tuple[str, str]] | None = None,
                 record_events: str | os.PathLike[str] | None = None,
                 busy_policy: BusyPolicy = "steer", checkpoints: bool = True,
                 park: bool = False) -> None:
        self.permissions = check_config(agent, store, limits, timeouts, permissions)
        policy = check_busy_policy(busy_policy)
        self.agent = agent
        self._engine = engine = Engine(
            store=store if store is not None else InMemorySessionStore(),
            limits=limits or Limits(), timeouts=timeouts or Timeouts(),
            permissions=self.permissions, checkpoints=checkpoints)
        engine.runner = functools.partial(run_turn, engine)
        engine.park = check_park(park, engine.durable)  # see docs/concepts/parking.md
        record = record_events if record_events is not None else os.environ.get(_RECORD_ENV)
        self._observers = Observers(engine, os.fspath(record) if record else None)
        self._binding = LoopBinding(engine.bus.bind, self._observers.start)
        self._turns = Turns(engine, agent, self._binding, self)
        self._lanes = Lanes(EngineView(engine, agent, self))
        self._commands = Dispatcher(LoopParts(engine, self._binding, self._turns, self._lanes,
                                              policy))

    @property
    def busy_policy(self) -> BusyPolicy:
        """What ``send`` does with a message for a busy session when it names no policy."""
        return self._commands.parts.busy_policy

    # -- the one way in -----------------------------------------------------------------------

    def submit(self, command: cmd.Command) -> Any:
        """Check an inbound command (``steerable.drivers._commands``), run it on the loop's
        thread and return its answer: what the method that builds it returns. Every message
        and control enters the loop here, past the interceptors (``intercept_commands``)."""
        if not isinstance(command, cmd.Command):
            raise TypeError(f"not a command: {command!r}")
        command.check()
        return self._binding.call(self._commands.run, command)

    def intercept_commands(self, interceptor: Interceptor) -> Callable[[], None]:
        """Wrap every command: ``interceptor(command, proceed)`` runs on the loop's thread and
        returns the answer (normally ``proceed(command)``'s). Returns a function that removes
        it. The event recorder sees what comes in this way."""
        return self._commands.intercept(interceptor)

    # -- events and hooks ---------------------------------------------------------------------

    def subscribe(self, kinds: Iterable[EventKind] | None = None, buffer: int = 256) -> Subscription:
        """Receive events (all, or only ``kinds``) in a bounded buffer; see ``Subscription``."""
        return self._binding.call(self._engine.bus.subscribe, kinds, buffer)

    def observe(self, fn: Callable[[Event], object],
                kinds: Iterable[EventKind] | None = None) -> Observer:
        """Call ``fn`` with each event (all, or only ``kinds``) as it is emitted, on the loop's
        thread, in order, none dropped. For readers whose work per event is a few microseconds
        and never waits (the server's SSE hub): ``fn`` runs inside the turn that emits, so
        anything slower reads a ``subscribe``. A ``fn`` that raises is detached (the error in
        ``Observer.error``). ``Observer.close()`` detaches it."""
        return self._binding.call(self._engine.bus.observe, fn, kinds)

    def register_hook(self, hook: Any, priority: int = 0, timeout: float | None = None) -> Callable[[], bool]:
        """Register ``hook``; higher priority runs first. Returns a function that unregisters it.
        An ``on_event`` observer gets every event, or only the kinds in its ``event_kinds``."""
        call = self._binding.call
        reg = call(self._observers.register, hook, priority, timeout)
        return lambda: call(self._observers.unregister, reg)

    # -- turns --------------------------------------------------------------------------------

    def start_turn(self, input: str | Sequence[Part], session_id: str | None = None, *,
                   agent: BaseAgent | None = None, discard_checkpoint: bool = False) -> TurnHandle:
        """Start a turn and return at once. ``input`` is text, or content parts (``TextPart``,
        ``ImagePart``, ``FilePart``). Raises ``SessionBusyError`` if the session is busy,
        and ``ValueError`` (``CheckpointError``) if it has a pending checkpoint (a cancelled or
        crashed turn: ``resume`` it, or pass ``discard_checkpoint=True`` to drop it)."""
        text, parts = check_content("turn input", input)
        return cast(TurnHandle, self.submit(cmd.StartTurn(text, session_id, agent,
                                                          discard_checkpoint, parts=parts)))

    async def run_turn(self, input: str | Sequence[Part], session_id: str | None = None, *,
                       agent: BaseAgent | None = None,
                       discard_checkpoint: bool = False) -> TurnResult:
        """Start a turn and wait for it. Cancelling the caller hard-aborts the turn."""
        handle = self.start_turn(input, session_id, agent=agent,
                                 discard_checkpoint=discard_checkpoint)
        # Kept while the turn runs: what aborting it needs (its ids) and what gives its
        # result, not the handle (one object fewer for the collector per awaited turn).
        sid, turn_id, waiting = handle.session_id, handle.turn_id, handle._awaited()
        del handle
        try:
            result: TurnResult = await waiting
        except asyncio.CancelledError:
            self.submit(cmd.Interrupt(sid, turn_id, hard=True))
            raise
        return result

    def checkpoint(self, session_id: str) -> Checkpoint | None:
        """The pending checkpoint of ``session_id`` (a cancelled turn, or one whose process
        stopped), or None. Raises ``CheckpointError`` when its file cannot be read."""
        check_str("session_id", session_id)
        return self._turns.checkpoint(session_id)

    def resume(self, session_id: str, *, agent: BaseAgent | None = None,
               force: bool = False) -> TurnHandle | None:
        """Continue the session's pending turn from its checkpoint; None when it has none.
        What the checkpoint holds is not requested or run again; a call that may have been
        running when the process died runs again with ``ToolContext.resumed``. The agent must
        match the checkpoint's (name and tools; ``CheckpointError``) unless ``force``."""
        return cast("TurnHandle | None", self.submit(cmd.Resume(session_id, agent, force)))

    # -- messages from users and channels -----------------------------------------------------

    def send(self, text: str | Sequence[Part], session_id: str,
             policy: BusyPolicy | None = None, *,
             agent: Agent | None = None) -> TurnHandle | QueuedTurn:
        """Deliver a user's message: an idle session starts a turn (its ``TurnHandle``); a busy
        one follows ``policy`` (default ``busy_policy``): ``steer``, ``follow_up``,
        ``interrupt``, ``rollback`` or ``reject`` (``SessionBusyError``). Either answer has
        ``.action``, ``.turn_id``, ``.message_id`` and awaits the ``TurnResult`` of the turn
        that took the message. Queued messages run in order, one turn at a time per session
        (see ``_lanes``). A message with content parts (images, files) starts a turn of its
        own: a busy session refuses it with ``SessionBusyError`` whatever the policy (it is not
        queued, nothing is lost)."""
        body, parts = check_content("message text", text)
        return cast("TurnHandle | QueuedTurn",
                    self.submit(cmd.Send(body, session_id, policy, agent, parts=parts)))

    def busy(self, session_id: str) -> bool:
        """True while the session has a turn running or messages waiting for one."""
        return self._binding.call(self._lanes.busy, session_id)

    def queued(self, session_id: str) -> list[str]:
        """The texts of the messages ``send`` queued for the session, in the order they run."""
        return self._binding.call(self._lanes.queued, session_id)

    def drop_queued(self, session_id: str) -> list[str]:
        """Withdraw the session's queued messages (their awaitables raise); their texts."""
        return self._binding.call(self._lanes.drop_queued, session_id)

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
        self._binding.bind()
        # Imported by the loops that serve a bus only: the core's import stays smaller.
        from steerable.drivers._gateway import serve_bus

        await serve_bus(self, bus, max_sessions, forward_events)

    # -- control ------------------------------------------------------------------------------

    def inject_steering(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Add a user message to the running turn; it reaches the model at the next checkpoint.
        The receipt is falsy when the turn cannot take it (none active, ending, queue full)."""
        return cast(MessageReceipt,
                    self.submit(cmd.Steer(text, session_id)))

    def inject_follow_up(self, text: str, session_id: str | None = None) -> MessageReceipt:
        """Queue a message to run as a new turn after the running one (see TurnResult.follow_ups)."""
        return cast(MessageReceipt,
                    self.submit(cmd.FollowUp(text, session_id)))

    def queued_messages(self, session_id: str) -> list[MessageInfo]:
        """The session's messages not yet terminal, in the order they were accepted: steering
        and follow-ups of its running turn, messages ``send`` queued, a turn's input until its
        first LLM request."""
        check_session_id(session_id)
        return self._binding.call(self._engine.inbox.queued, session_id)

    def revoke_message(self, message_id: str) -> bool:
        """Withdraw a queued message (it becomes ``revoked``); False once it is no longer
        queued (delivered, handed back, or already taken into a turn's context)."""
        return bool(self.submit(cmd.Revoke(message_id)))

    def edit_message(self, message_id: str, text: str) -> bool:
        """Change the text of a queued message (it keeps its id and place); False once it is
        no longer queued."""
        return bool(self.submit(cmd.Edit(message_id, text)))

    def interrupt_graceful(self, session_id: str | None = None, hint: str | None = None) -> bool:
        """Skip tools not started, then one last call without tools; the turn ends interrupted."""
        return bool(self.submit(cmd.Interrupt(session_id, hint=hint)))

    def interrupt_hard(self, session_id: str | None = None) -> bool:
        """Cancel the LLM call and every tool now, roll the session back; the turn ends aborted."""
        # The command ``Interrupt(session_id, hard=True)``, by its shortest path (its check
        # has nothing to refuse: there is no hint).
        return self._binding.call(self._commands.abort, session_id, None)

    def cancel(self, session_id: str | None = None,
               mode: CancelMode = CancelMode.IMMEDIATE) -> CancelHandle | None:
        """Cancel the running turn (None when none is active). ``IMMEDIATE`` is
        ``interrupt_hard``; ``AFTER_MODEL``/``AFTER_TOOLS`` stop it at a safe point, status
        ``cancelled``, its checkpoint kept for ``resume``. The strongest of repeated cancels
        wins. ``await handle.wait()``; ``handle.contributed``."""
        return cast("CancelHandle | None", self.submit(cmd.Cancel(session_id, mode=mode)))

    def resolve_approval(self, request_id: str, approved: bool,
                         reason: str = "") -> bool | TurnHandle:
        """Answer an APPROVAL_REQUESTED; False when no such request exists. A parked turn's
        approval is answered from any loop over its store, once (``RequestClosedError`` for
        a second answer); the last answer a parked turn waits for resumes it: its
        ``TurnHandle`` is returned."""
        return cast("bool | TurnHandle",
                    self.submit(cmd.AnswerApproval(request_id, approved, reason)))

    def answer(self, request_id: str, value: Any) -> bool | TurnHandle:
        """Answer a QUESTION_ASKED with ``value`` (a str, one of its ``choices``, or JSON data
        fitting its ``schema``): ``InvalidAnswerError`` leaves it open, a second answer is
        ``RequestClosedError``, an id never issued ``UnknownRequestError``. True, or the
        resumed turn's ``TurnHandle`` when a parked turn waited for this answer last."""
        return cast("bool | TurnHandle", self.submit(cmd.AnswerQuestion(request_id, value)))

    def pending_requests(self, session_id: str | None = None) -> list[PendingRequest]:
        """Approvals and questions waiting for a person, oldest first: those of running turns,
        and parked ones across every session of the store (or only ``session_id``'s)."""
        return self._binding.call(self._turns.answers.pending, session_id)

    # -- questions ----------------------------------------------------------------------------

    def active_turn(self, session_id: str | None = None) -> TurnInfo | None:
        """The session's running top-level turn, with its running sub-turns in ``children``."""
        return self._binding.call(self._turns.info, session_id)

    def turn_handle(self, turn_id: str) -> TurnHandle | None:
        """A handle on any running turn, sub-turns included (by ``turn_id``, e.g. a
        ``SUBTURN_SPAWN``'s ``child_turn_id``), to steer or interrupt it; None once it ended."""
        check_str("turn_id", turn_id)
        return self._binding.call(self._turns.find, turn_id)

    def session_messages(self, session_id: str) -> list[Message]:
        """The persisted history of a session (no system message); [] for an unknown one."""
        check_str("session_id", session_id)
        return self._engine.store.load(session_id)

    @property
    def store(self) -> SessionStore:
        return self._engine.store

    def statistics(self) -> LoopStatistics:
        return self._turns.statistics()

    async def wait_idle(self) -> None:
        """Wait until no turn runs and no background summary is under way (a turn's end may
        start a summary, so this waits until both are done together)."""
        await self._turns.wait_idle()

    # -- shutdown -----------------------------------------------------------------------------

    async def aclose(self, grace: float = 1.0) -> None:
        """Abort running turns, end every subscription and observer, and wait for them."""
        if self._turns.closed:
            return
        self._lanes.close()
        running = self._turns.abort_all()
        if running:
            await asyncio.wait(running, timeout=grace)
        await self._lanes.aclose(grace)
        await self._turns.stop_summaries(grace)
        self._engine.bus.close()
        await self._observers.aclose(grace)
        await self._engine.reaper.aclose(grace)

    async def __aenter__(self) -> AgentLoop:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AgentLoop agent={self.agent.name} active={len(self._engine.active)}>"
