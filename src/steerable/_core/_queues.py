"""Messages into a running turn: its steering and follow-up queues, and each message's fate.

A steering or follow-up message is a ``MessageReceipt`` in one of the turn's queues. Taking one
in writes the turn's checkpoint before the call returns (when the turn is durable), so an
acknowledged message survives a ``kill -9``. Steering is drained into the context at a
checkpoint (``drain_steering``) and becomes ``DELIVERED`` with the ``LLM_REQUEST`` that carries
it (``deliver``); what the turn never got to is ``RETURNED`` when it ends (``settle``), except
in a cancelled durable turn, whose checkpoint keeps it queued for ``resume``.

Runs on the loop's thread only.
"""

from __future__ import annotations

from steerable._core._durable import persist_now
from steerable._core._engine import Engine
from steerable._core._turn_state import Interrupt, QueuedMessage, TurnState
from steerable._events import FollowUpQueued, SteeringInjected, TurnStatus
from steerable._messages import Message
from steerable._receipts import MessageHolder, MessageReceipt, MessageState

__all__ = ["TurnQueues", "deliver", "drain_steering", "follow_up", "hold_restored", "offer_follow_up",
           "offer_steering", "settle", "steer"]


class TurnQueues:
    """The ``MessageHolder`` of one turn's queues: revoke and edit reach them through it."""

    __slots__ = ("engine", "st")

    def __init__(self, engine: Engine, st: TurnState) -> None:
        self.engine = engine
        self.st = st

    def withdraw(self, receipt: MessageReceipt) -> bool:
        inbound = self.st.inbound
        if receipt in inbound.steering:
            inbound.steering = _without(inbound.steering, receipt)
        elif receipt in inbound.follow_ups:
            inbound.follow_ups = _without(inbound.follow_ups, receipt)
        else:
            return False
        persist_now(self.engine, self.st)
        return True

    def edited(self) -> None:
        persist_now(self.engine, self.st)


def _without(queue: tuple[MessageReceipt, ...], receipt: MessageReceipt
             ) -> tuple[MessageReceipt, ...]:
    i = queue.index(receipt)
    return queue[:i] + queue[i + 1:]


def _holder(engine: Engine, st: TurnState) -> MessageHolder:
    holder = st.holder
    if holder is None:
        holder = st.holder = TurnQueues(engine, st)
    return holder


def hold_restored(engine: Engine, st: TurnState) -> None:
    """A resumed turn's queued messages (``_durable.restore``) can be revoked and edited."""
    holder = _holder(engine, st)
    for r in (*st.steering, *st.follow_ups):
        r._holder = holder


def _refusal(engine: Engine, st: TurnState, queue: tuple[MessageReceipt, ...], limit: int,
             what: str) -> str | None:
    if st.finishing or st.interrupt is Interrupt.HARD:
        return f"turn {st.turn_id} is ending"
    if len(queue) >= limit:
        engine.error(st, f"{what} queue full ({limit} messages); message refused", "queue")
        return f"{what} queue full ({limit} messages)"
    return None


def _hold(engine: Engine, st: TurnState, r: MessageReceipt, detail: str) -> None:
    """``r``, just put in one of the turn's queues, is the turn's now."""
    r.turn_id = st.turn_id
    r.parent_turn_id = st.parent_turn_id
    r._holder = _holder(engine, st)
    persist_now(engine, st)  # durable before acknowledged
    engine.inbox.enqueue(r, detail)


def offer_steering(engine: Engine, st: TurnState, r: MessageReceipt) -> str | None:
    """Put ``r`` in the turn's steering queue; the reason when the turn cannot take it (``r``
    is then left as it was: the caller decides, e.g. a lane queues it for a turn of its own)."""
    reason = _refusal(engine, st, st.steering, engine.limits.steering_queue, "steering")
    if reason is None:
        st.steering += (r,)
        _hold(engine, st, r, "steering")
    return reason


def offer_follow_up(engine: Engine, st: TurnState, r: MessageReceipt) -> str | None:
    reason = _refusal(engine, st, st.follow_ups, engine.limits.follow_up_queue, "follow-up")
    if reason is None:
        st.follow_ups += (r,)
        _hold(engine, st, r, "follow_up")
        engine.emit(st, FollowUpQueued, text=r.text)
    return reason


def steer(engine: Engine, st: TurnState, text: str,
          message_id: str | None = None) -> MessageReceipt:
    """A steering message for ``st``: its receipt, falsy when refused. A message accepted
    elsewhere (``message_id``) is not rejected when refused: it is its caller's to queue."""
    r = MessageReceipt("steer", text, st.session_id, turn_id=st.turn_id,
                       parent_turn_id=st.parent_turn_id, message_id=message_id)
    reason = offer_steering(engine, st, r)
    if reason is None:
        return r
    if message_id is not None:
        r.accepted = False  # falsy, yet still queued: one lifecycle, under its own id
        r.detail = reason
        return r
    return engine.inbox.reject(r, reason)


def follow_up(engine: Engine, st: TurnState, text: str) -> MessageReceipt:
    r = MessageReceipt("follow_up", text, st.session_id, turn_id=st.turn_id,
                       parent_turn_id=st.parent_turn_id)
    reason = offer_follow_up(engine, st, r)
    return r if reason is None else engine.inbox.reject(r, reason)


def drain_steering(engine: Engine, st: TurnState) -> bool:
    """At a checkpoint: pending steering becomes user messages of the turn (no longer
    revocable); it is delivered with the next LLM request."""
    if not st.steering:
        return False
    inbound = st.inbound
    taken, inbound.steering = inbound.steering, ()
    inbound.injected_steering += taken
    inbound.carrying += taken
    for r in taken:
        r._holder = None
        st.new.append(Message("user", r.text))
        engine.emit(st, SteeringInjected, text=r.text)
    return True


def deliver(engine: Engine, st: TurnState, request_seq: int | None, detail: str) -> None:
    """The messages the turn took in since its last LLM request are in this one's context."""
    inbox = engine.inbox
    carried, st.carrying = st.carrying, ()
    for r in carried:
        inbox.settle(r, MessageState.DELIVERED, detail, request_seq)


def settle(engine: Engine, st: TurnState, status: TurnStatus, rollback: bool
           ) -> tuple[list[MessageReceipt], list[QueuedMessage]]:
    """As the turn ends: its follow-ups (completed turns), or what it hands back unprocessed.

    Every message the turn still holds becomes ``RETURNED``, except in a cancelled durable
    turn (or a parked one): its checkpoint keeps them queued, and ``resume`` continues with
    them."""
    inbox = engine.inbox
    if status in (TurnStatus.CANCELLED, TurnStatus.WAITING) and st.durable:
        for r in (*st.steering, *st.follow_ups):
            r._holder = None  # in the checkpoint now: a revoke could not reach it there
        return [], []
    follow_ups: list[MessageReceipt] = []
    unprocessed: list[QueuedMessage] = []
    if status in (TurnStatus.COMPLETED, TurnStatus.MAX_ITERATIONS):
        # Steering the model never saw (the budget ran out) becomes a follow-up.
        steering, st.steering = st.steering, ()
        st.follow_ups += steering
        for r in steering:
            engine.emit(st, FollowUpQueued, text=r.text)
        follow_ups = list(st.follow_ups)
    else:
        if rollback:  # delivered steering is rolled back with the turn: hand it back too
            unprocessed += [QueuedMessage("steering", r.text, r.message_id)
                            for r in st.injected_steering]
        else:  # taken in, never sent: the model has not seen it
            unprocessed += [QueuedMessage("steering", r.text, r.message_id)
                            for r in st.carrying if r is not st.input_receipt]
        unprocessed += [QueuedMessage("steering", r.text, r.message_id)
                        for r in st.steering]
        unprocessed += [QueuedMessage("follow_up", r.text, r.message_id)
                        for r in st.follow_ups]
    why = f"turn {st.turn_id} ended ({status.value}) before it was delivered"
    for r in (*st.carrying, *st.steering, *st.follow_ups):
        inbox.settle(r, MessageState.RETURNED, why)
    if st.input_receipt is not None:  # ended before its task took the input in
        inbox.settle(st.input_receipt, MessageState.RETURNED, why)
    st.carrying = ()
    return follow_ups, unprocessed
