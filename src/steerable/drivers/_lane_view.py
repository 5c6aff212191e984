"""``EngineView``: the lanes' narrow view of the engine (``_lanes.LaneEngine``), the one place
that knows how what the lanes ask for is done in the engine's state."""

from __future__ import annotations

from steerable._core._agent import Agent, BaseAgent
from steerable._core._durable import sync_held
from steerable._core._engine import Engine
from steerable._core._queues import offer_steering
from steerable._core._turn_state import TurnState
from steerable._events import FollowUpQueued
from steerable._parts import Part
from steerable._receipts import MessageReceipt, MessageState
from steerable.drivers._commands import StartTurn
from steerable.drivers._handle import Submits, TurnHandle

__all__ = ["EngineView"]


class EngineView:
    """The engine as the lanes of one loop see it; turns start through ``front`` (the loop's
    ``submit``), so interceptors see them like every other command."""

    def __init__(self, engine: Engine, agent: BaseAgent, front: Submits) -> None:
        self._engine = engine
        self._agent = agent
        self._front = front

    def running(self, session_id: str) -> TurnState | None:
        return self._engine.active.get(session_id)

    def start(self, text: str, session_id: str, agent: Agent | None,
              message_id: str | None, parts: tuple[Part, ...] = ()) -> TurnHandle:
        handle: TurnHandle = self._front.submit(
            StartTurn(text, session_id, agent, by_lane=True, message_id=message_id,
                      parts=parts))
        return handle

    def has_slot(self) -> bool:
        return self._engine.slots.has_room()

    async def wait_slot(self) -> None:
        await self._engine.slots.room()

    def steer(self, st: TurnState, r: MessageReceipt) -> bool:
        return offer_steering(self._engine, st, r) is None

    def interrupt(self, st: TurnState, *, hard: bool) -> None:
        if hard:
            self._engine.interrupt_hard(st)
        else:
            self._engine.interrupt_graceful(st, None)

    def follow_up_queued(self, st: TurnState, text: str) -> None:
        self._engine.emit(st, FollowUpQueued, text=text)

    def hold(self, session_id: str, receipts: list[MessageReceipt], *, sync: bool,
             agent: Agent | None = None) -> None:
        # ``Engine.waiting`` and each turn's ``held`` share one list, so a turn's checkpoints
        # hold what its session's lane holds.
        engine = self._engine
        held = engine.waiting.get(session_id)
        if held is None:
            held = engine.waiting[session_id] = []
        held[:] = receipts
        st = engine.active.get(session_id)
        if st is not None:
            st.inbound.held = held
        if sync:
            # The first held message's turn runs with the agent it names, else the root's.
            sync_held(engine, session_id, agent or self._agent)
        if not held:
            del engine.waiting[session_id]

    def accept(self, r: MessageReceipt, detail: str) -> None:
        self._engine.inbox.enqueue(r, detail)

    def settle(self, r: MessageReceipt, state: MessageState, detail: str) -> None:
        self._engine.inbox.settle(r, state, detail)

    def reject(self, r: MessageReceipt, reason: str) -> None:
        self._engine.inbox.reject(r, reason)
