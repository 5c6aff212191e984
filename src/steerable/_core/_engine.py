"""The engine's shared services: bus, hooks, approvals, reaper, store, limits, active turns.

One Engine serves every turn of an AgentLoop (top-level turns and sub-turns alike); the phase
modules take it as their first argument. It also owns the two small helpers every phase uses:
``emit`` (fills the fields every event has) and ``set_phase`` (the checked state machine).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from steerable._config import Limits, Timeouts
from steerable._core._agent import Agent
from steerable._core._bus import EventBus
from steerable._core._cancel import CancelHandle, CancelMode, CancelState
from steerable._core._checkpoint import CheckpointStore
from steerable._core._hook_manager import HookManager
from steerable._core._inbox import Inbox
from steerable._core._permissions import Permissions
from steerable._core._reaper import Reaper
from steerable._core._requests import RequestTable
from steerable._core._session import SessionStore, TurnRecord
from steerable._core._slots import TurnSlots
from steerable._core._turn_state import Interrupt, TurnState, check_transition
from steerable._core._watchdog import IdleTimer
from steerable._events import (
    ErrorEvent,
    ErrorSource,
    Event,
    InterruptReceived,
    StateChanged,
    TurnPhase,
)
from steerable._messages import Message
from steerable._receipts import MessageReceipt

__all__ = ["Engine"]


class Engine:
    def __init__(
        self,
        *,
        store: SessionStore,
        limits: Limits,
        timeouts: Timeouts,
        permissions: Permissions,
        runner: Callable[[TurnState], Awaitable[Any]] | None = None,
        checkpoints: bool = True,
    ) -> None:
        self.bus = EventBus()
        self.reaper = Reaper()
        self.hooks = HookManager(self.reaper, self._report_hook_error)
        self.broker = RequestTable()
        self.park = False
        """Top-level durable turns park on an open request (``AgentLoop(park=True)``)."""
        self.store = store
        self.limits = limits
        self.timeouts = timeouts
        self.permissions = permissions
        self.checkpoints: CheckpointStore | None = (
            store if checkpoints and isinstance(store, CheckpointStore) else None)
        """The store's checkpoint side, when top-level turns write checkpoints."""
        self.durable = self.checkpoints is not None
        """True when top-level turns write checkpoints (the store keeps them, not turned off)."""
        self.inbox = Inbox(self.bus)
        """Every message given to the loop that is not yet terminal (SPEC 10)."""
        self.waiting: dict[str, list[MessageReceipt]] = {}
        """Per session, the receipts a lane holds for turns of their own (its queue, in
        order): each top-level turn's ``held`` is this list."""
        self.successors: dict[str, Agent] = {}
        """Sessions whose checkpoint is the successor (``_durable.release``) this process
        wrote for its lanes' messages, and the agent it names: the next turn replaces it."""
        self.turns: dict[str, TurnState] = {}
        """Every running turn, top-level and sub-turn, by turn id."""
        self.active: dict[str, TurnState] = {}
        """The running top-level turn of each session."""
        self.runner = runner
        """Runs a begun turn to its end (``run_turn`` bound to this engine): how sub-turns run
        on the same engine. Given by the driver, since the turn module sits above this one."""
        self.slots = TurnSlots(limits.active_turns)
        self.idle_timer = IdleTimer()
        """The one timer of every model call's idle watchdog (see ``_watchdog``)."""
        self.subturn_tasks: set[asyncio.Task[Any]] = set()
        """Tasks of running sub-turns: owned here, so an async child outlives its parent."""

    # -- events -------------------------------------------------------------------------------

    def emit(self, st: TurnState | None, cls: type[Event], /, **fields: Any) -> None:
        bus = self.bus
        # next_seq() and listens(), inlined: this runs for every event (~6 an iteration), and
        # most are of kinds nobody reads.
        bus._seq += 1
        seq = bus._seq
        if not bus._by_kind[cls.kind]:
            # Every consumer (subscribers, on_event observers, the recorder, bus observers)
            # reads the bus: an event of a kind nobody reads is counted and numbered, never built.
            bus.emitted += 1
            return
        if st is None:
            event = cls(turn_id="", parent_turn_id=None, session_id="", seq=seq,
                        time=time.time(), **fields)
        else:
            event = cls(turn_id=st.turn_id, parent_turn_id=st.parent_turn_id,
                        session_id=st.session_id, seq=seq, time=time.time(), **fields)
        bus.emit(event)

    def error(self, st: TurnState | None, message: str, source: ErrorSource) -> None:
        self.emit(st, ErrorEvent, message=message, source=source)

    def _report_hook_error(self, message: str, ctx: Any, source: ErrorSource) -> None:
        # Every hook context and every event carries its turn's ids: report on that turn.
        self.bus.emit(ErrorEvent(
            turn_id=ctx.turn_id, parent_turn_id=ctx.parent_turn_id, session_id=ctx.session_id,
            seq=self.bus.next_seq(), time=time.time(), message=message, source=source,
        ))

    def set_phase(self, st: TurnState, new: TurnPhase) -> None:
        old = st.phase
        if old is new:
            return
        check_transition(old, new)
        st.phase = new
        self.emit(st, StateChanged, old=old, new=new)

    # -- storage ------------------------------------------------------------------------------

    async def load(self, session_id: str) -> list[Message]:
        if self.store.blocking:
            return await asyncio.to_thread(self.store.load, session_id)
        return self.store.load(session_id)

    async def history(self, session_id: str) -> Sequence[Message]:
        """The session's messages for a turn's ``base``: never edited in place by the turn.

        A store with ``snapshot()`` (the in-memory one) hands out an O(1) read-only view, so
        starting a turn does not copy the whole history; others are loaded as usual."""
        snapshot = getattr(self.store, "snapshot", None)
        if snapshot is not None:
            return cast("Sequence[Message]", snapshot(session_id))
        return await self.load(session_id)

    async def save(self, st: TurnState, status: str, rollback: bool) -> None:
        """Append the turn's messages, or on rollback write nothing of the turn."""
        store = self.store
        if rollback:
            if not st.base_rewritten:
                return  # (an abort's usual case: nothing to write, nothing to build)
            op: Any = (store.replace, st.session_id, list(st.base))
        elif st.base_rewritten:
            op = (store.replace, st.session_id, [*st.base, *st.new])
        else:
            record = TurnRecord(st.turn_id, status, st.iteration)
            op = (store.append, st.session_id, list(st.new), record)
        if store.blocking:
            # Shielded: a save already under way finishes even if the turn is cancelled now.
            await asyncio.shield(asyncio.to_thread(*op))
        else:
            op[0](*op[1:])

    # -- control ------------------------------------------------------------------------------
    # These run on the loop's thread (the AgentLoop marshals calls from other threads).

    def interrupt_graceful(self, st: TurnState, hint: str | None) -> bool:
        ctl = st.control
        if ctl.finishing or ctl.final_call or ctl.interrupt is not Interrupt.NONE:
            return False
        ctl.interrupt = Interrupt.GRACEFUL
        ctl.hint = hint
        self.emit(st, InterruptReceived, mode="graceful", hint=hint)
        return True

    def interrupt_hard(self, st: TurnState) -> bool:
        """Cascade to sub-turns first, then cancel this turn's task (it rolls back itself)."""
        if not self._mark_hard(st):
            return False
        # Before the task runs, cancelling it would skip TURN_START/END: the flag is enough,
        # run_turn checks it first thing.
        if st.running and st.task is not None and not st.task.done():
            # The tools first, so they see CancelledError on the very next loop cycle instead
            # of one cycle after the turn's task has woken up and passed the cancel on.
            for task, ctx in st.running_tools.items():
                ctx.cancel()
                task.cancel()
            st.task.cancel()
        return True

    def abort(self, st: TurnState) -> bool:
        """``interrupt_hard`` for a command from outside the turn, its tools first.

        An abort mostly comes while a tool runs, after the loop sat idle: every step then runs
        on cold caches (~5x slower). So when tools run (and no sub-turn, whose cascade keeps
        its order), they are cancelled first (their ``cancelled`` flags set), then
        INTERRUPT_RECEIVED is emitted and the turn's task cancelled: in the next loop pass the
        tools see their cancel, and the turn unwinds right after them, in the same pass (it
        used to be cancelled by a callback of that pass, and to unwind in the pass after).
        No sub-turn can start from then on (``_subturn.spawn`` refuses a turn marked hard)."""
        ctl = st.control
        tools = ctl.running_tools
        if not tools or st.children or ctl.finishing or ctl.interrupt is not Interrupt.NONE:
            return self.interrupt_hard(st)
        for task, ctx in tools.items():
            ctx.cancel()  # set when the tool sees its CancelledError: it may look
            task.cancel()
        ctl.interrupt = Interrupt.HARD  # a second abort, a graceful one: refused from now on
        # Emitted before the turn's task is cancelled: whatever is already scheduled, every
        # event of the unwinding comes after it.
        self.emit(st, InterruptReceived, mode="hard", hint=None)
        if ctl.task is not None and not ctl.task.done():
            ctl.task.cancel()
        return True

    def cancel(self, st: TurnState, mode: CancelMode) -> CancelHandle:
        """Record a cancel; IMMEDIATE is the hard abort. See ``_cancel`` for the modes."""
        ctl = st.control
        open_ = not ctl.finishing and ctl.interrupt is not Interrupt.HARD
        if ctl.cancel is None:
            ctl.cancel = CancelState()
        handle = ctl.cancel.request(mode, st.turn_id, open_)
        if handle.contributed:
            if mode is CancelMode.IMMEDIATE and not (ctl.grace is not None and st.children):
                self.interrupt_hard(st)  # emits INTERRUPT_RECEIVED(mode="hard")
            else:
                self.emit(st, InterruptReceived, mode=f"cancel_{mode.label}", hint=None)
                if ctl.grace is not None:
                    self._cancel_children(st, mode)
        return handle

    def _cancel_children(self, st: TurnState, mode: CancelMode) -> None:
        """A composite turn passes a cancel on to its running children. IMMEDIATE gives them
        ``grace`` seconds to stop at a safe point (as AFTER_MODEL) before the hard abort."""
        soft = CancelMode.AFTER_MODEL if mode is CancelMode.IMMEDIATE else mode
        for child in list(st.children.values()):
            self.cancel(child, soft)
        ctl = st.control
        if mode is CancelMode.IMMEDIATE and ctl.grace is not None and ctl.grace_timer is None:
            loop = asyncio.get_running_loop()
            ctl.grace_timer = loop.call_later(ctl.grace, self.interrupt_hard, st)

    def hard_abort_inside(self, st: TurnState, reason: str) -> None:
        """A hard abort asked for from inside the turn's own task (a hook's HARD_ABORT)."""
        self._mark_hard(st, reason)

    def _mark_hard(self, st: TurnState, hint: str | None = None) -> bool:
        if st.finishing or st.interrupt is Interrupt.HARD:
            return False
        st.interrupt = Interrupt.HARD
        self.emit(st, InterruptReceived, mode="hard", hint=hint)
        for child in list(st.children.values()):
            self.interrupt_hard(child)
        return True
