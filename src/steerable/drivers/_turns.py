"""The turns an ``AgentLoop`` runs: started (``StartTurn``), resumed from a checkpoint
(``Resume``), driven to their end, each in one task owned here.

A turn's task is created in ``launch`` and kept in ``tasks`` until it ends; ``aclose`` aborts
what still runs and waits for it. A turn's end may start a background summary
(``_background.Summaries``), owned here too.
"""

from __future__ import annotations

import asyncio
from types import MappingProxyType
from typing import Any

from steerable._core._agent import BaseAgent
from steerable._core._checkpoint import Checkpoint
from steerable._core._composite import CompositeAgent
from steerable._core._durable import restore, write_first_checkpoint
from steerable._core._engine import Engine
from steerable._core._queues import hold_restored
from steerable._core._resume import check_agent, check_no_checkpoint, checked_base
from steerable._core._turn import TurnResult, begin_turn, run_turn
from steerable._core._turn_state import TurnState
from steerable._ids import random_hex
from steerable._receipts import MessageReceipt
from steerable.drivers._answers import Answers
from steerable.drivers._background import Summaries
from steerable.drivers._binding import LoopBinding
from steerable.drivers._commands import Resume, StartTurn
from steerable.drivers._handle import LoopStatistics, Submits, TurnHandle, TurnInfo, turn_info
from steerable.errors import SessionBusyError

__all__ = ["Turns", "new_id", "resolve"]


def resolve(engine: Engine, session_id: str | None) -> TurnState | None:
    """The session's running top-level turn; with no session, the one turn running (None when
    none, ``ValueError`` when several)."""
    active = engine.active
    if session_id is not None:
        return active.get(session_id)
    if not active:
        return None
    if len(active) > 1:
        raise ValueError(
            f"{len(active)} turns are active (sessions {sorted(active)}); pass session_id")
    return next(iter(active.values()))


def new_id(prefix: str) -> str:
    return f"{prefix}_{random_hex(6)}"


class Turns:
    """Starts, resumes and drives the turns of one loop (on the loop's thread). Handles it
    gives out act on their turn through ``front`` (the loop's ``submit``)."""

    def __init__(self, engine: Engine, agent: BaseAgent, binding: LoopBinding,
                 front: Submits) -> None:
        self.engine = engine
        self.agent = agent
        self._binding = binding
        self._front = front
        self.tasks: set[asyncio.Task[TurnResult]] = set()
        self.started = 0
        self.finished = 0
        self.closed = False
        self.summaries = Summaries(engine)
        self.answers = Answers(engine, agent, self.resume)
        """Answers to approvals and questions, live or parked (``_answers``)."""
        self._on_end = self._ended
        """Bound once: a bound method made per turn is one more object per live turn."""

    # -- starting -----------------------------------------------------------------------------

    def start(self, cmd: StartTurn) -> TurnHandle:
        sid = cmd.session_id or new_id("session")
        self.check_idle(sid)
        engine = self.engine
        # The checkpoint the last turn handed on to the messages queued behind it is replaced
        # by this turn's first one, which holds them too.
        if cmd.session_id is not None and engine.durable \
                and engine.successors.pop(sid, None) is None:
            check_no_checkpoint(engine.store, sid, cmd.discard_checkpoint)
        st = TurnState(turn_id=new_id("turn"), session_id=sid, input=cmd.input,
                       agent=cmd.agent or self.agent)
        inbox = engine.inbox
        queued = inbox.live.get(cmd.message_id) if cmd.message_id else None
        r = queued or MessageReceipt("send", cmd.input, sid, message_id=cmd.message_id,
                                     parts=cmd.parts, origin_id=cmd.origin_id)
        r.turn_id = st.turn_id
        r._holder = None  # the turn's input now: no longer revocable
        st.inbound.input_receipt = r
        handle = self.launch(st)
        if queued is None:
            inbox.enqueue(r, "the input of a new turn")
        return handle

    def check_idle(self, sid: str) -> None:
        if self.closed:
            raise RuntimeError("this AgentLoop is closed")
        busy = self.engine.active.get(sid)
        if busy is not None:
            raise SessionBusyError(
                f"session {sid!r} already has an active turn ({busy.turn_id}); steer it, queue "
                "a follow-up, or wait for it to end"
            )

    def launch(self, st: TurnState) -> TurnHandle:
        loop = self._binding.bind()
        engine = self.engine
        if not st.durability.origin_turn_id:
            st.durability.origin_turn_id = st.turn_id
        # Composite turns run children, not a model loop: they stop at boundaries, keep no
        # checkpoint, and a cancelled one is saved like an interrupted one.
        st.durability.durable = engine.durable and not isinstance(st.agent, CompositeAgent)
        held = engine.waiting.get(st.session_id)
        if held is not None:  # messages its session's lane holds: in its checkpoints too
            st.inbound.held = held
        engine.active[st.session_id] = st
        engine.turns[st.turn_id] = st
        self.started += 1
        begin_turn(engine, st)
        if st.resume is None:
            write_first_checkpoint(engine, st)
        # The turn's task runs run_turn itself, which calls ``_ended`` as its last step: no
        # coroutine of ours around it and no done callback (an object and a loop callback
        # per turn).
        task = loop.create_task(run_turn(engine, st, self._on_end))
        st.control.task = task
        self.tasks.add(task)
        return TurnHandle(self._front, st, task, direct=True)

    def _ended(self, st: TurnState, result: TurnResult | None) -> None:
        """The turn's last step (its task is done right after, in the same step)."""
        engine = self.engine
        engine.turns.pop(st.turn_id, None)
        if engine.active.get(st.session_id) is st:
            del engine.active[st.session_id]
        self.finished += 1
        if st.control.task is not None:
            self.tasks.discard(st.control.task)
        if result is None:  # its end was cancelled (the event loop shutting down)
            return
        # Once the session runs nothing: an answer that came while the turn parked is applied
        # as one from outside is (a running session's answers are refused as too late).
        self.answers.after_turn(st)
        if not self.closed:
            self.summaries.maybe_start(st, result)

    # -- resuming -----------------------------------------------------------------------------

    def checkpoint(self, session_id: str) -> Checkpoint | None:
        store = self.engine.checkpoints
        return None if store is None else store.load_checkpoint(session_id)

    def resume(self, cmd: Resume) -> TurnHandle | None:
        session_id, engine = cmd.session_id, self.engine
        self.check_idle(session_id)
        if session_id in engine.successors:
            raise SessionBusyError(
                f"session {session_id!r} has messages queued by send about to run; its "
                "checkpoint holds them until then (wait_session, or drop_queued)")
        cp = self.checkpoint(session_id)
        if cp is None:
            return None
        agent = cmd.agent or self.agent
        if not cmd.force:
            check_agent(cp, agent)
        base = engine.store.load(session_id)
        if not checked_base(cp, base):
            assert engine.checkpoints is not None  # it gave the checkpoint
            engine.checkpoints.delete_checkpoint(session_id)
            return None
        st = TurnState(turn_id=new_id("turn"), session_id=session_id, input=cp.input,
                       agent=agent, resume=cp, created=cp.created)
        restore(engine, st, cp, base)  # now: a message for it is checkpointed on top
        hold_restored(engine, st)
        return self.launch(st)

    # -- questions ----------------------------------------------------------------------------

    def info(self, session_id: str | None) -> TurnInfo | None:
        """The session's running top-level turn with its sub-turns (``AgentLoop.active_turn``)."""
        st = resolve(self.engine, session_id)
        return None if st is None else turn_info(st)

    def statistics(self) -> LoopStatistics:
        bus = self.engine.bus
        return LoopStatistics(
            events_emitted=bus.emitted, dropped=MappingProxyType(bus.dropped),
            subscribers=bus.subscriber_count, active_turns=self.engine.slots.running,
            turns_started=self.started, turns_finished=self.finished)

    # -- finding, waiting, stopping -----------------------------------------------------------

    def find(self, turn_id: str) -> TurnHandle | None:
        """A handle on a running turn (sub-turns too); None once it ended."""
        st = self.engine.turns.get(turn_id)
        if st is None or st.control.task is None or st.control.task.done():
            return None
        return TurnHandle(self._front, st, st.control.task)

    async def wait_idle(self) -> None:
        """Until no turn runs and no summary is under way (a turn's end may start one)."""
        subturns, summaries = self.engine.subturn_tasks, self.summaries.tasks
        while self.tasks or summaries or subturns:
            await asyncio.wait([*self.tasks, *summaries, *subturns])

    def abort_all(self) -> list[asyncio.Task[Any]]:
        """Start no more turns, hard-abort every running one; the tasks to wait for."""
        self.closed = True
        turns = self.engine.turns
        for st in list(turns.values()):
            # Top-level turns cascade to their children; async children whose parent has
            # ended are aborted on their own.
            if st.parent_turn_id is None or st.parent_turn_id not in turns:
                self.engine.interrupt_hard(st)
        return [*self.tasks, *self.engine.subturn_tasks]

    async def stop_summaries(self, grace: float) -> None:
        tasks = list(self.summaries.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
