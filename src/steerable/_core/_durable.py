"""Writing a turn's checkpoints, stopping at safe points, and restoring a turn from one.

A durable turn writes a checkpoint (through the store's ``CheckpointStore`` side) when it has
something to lose: as it starts (before ``start_turn`` returns), before its first LLM call, before an LLM call whose context steering
changed, after every LLM response that asks for tools, after every tool call that ends, and
where a safe-point cancel stops it. A write finishes before the turn moves on, so what a
checkpoint says has happened has happened exactly once; the one call that may have been
running when the process died is run again with ``ToolContext.resumed`` set (at-least-once).

A failed write is reported (ERROR, source ``checkpoint``) and the turn goes on: it is still
correct, only less durable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence

from steerable._core._agent import Agent, BaseAgent
from steerable._core._budget import restore_spent
from steerable._core._cancel import CancelMode, SafePoint
from steerable._core._checkpoint import Checkpoint, Stage
from steerable._core._engine import Engine
from steerable._core._parking import check_answered, restore_requests
from steerable._core._turn_state import CancelStop, TurnState
from steerable._history import MessageView
from steerable._ids import random_hex
from steerable._messages import Message
from steerable._receipts import MessageKind, MessageReceipt, MessageState

__all__ = ["capture", "persist_now", "release", "restore", "safe_point",
           "settle_writes", "stage_now", "successor", "sync_held", "write_checkpoint",
           "write_first_checkpoint"]


def capture(st: TurnState, stage: Stage, cancel_mode: CancelMode | None = None, *,
            first: bool = False) -> Checkpoint:
    agent = st.model_agent
    tr, inb, dur, ledger = st.transcript, st.inbound, st.durability, st.ledger
    tools = dur.tools
    if tools is None:  # once per turn, not per checkpoint
        tools = dur.tools = tuple(sorted(agent.tools_by_name))
    return Checkpoint(
        session_id=st.session_id, turn_id=st.turn_id, origin_turn_id=dur.origin_turn_id,
        agent=agent.name, tools=tools, input=st.input,
        # Views, not copies (O(1) per checkpoint whatever the turn's length): ``tr.new`` and
        # ``tr.tools_run`` only grow at the end, and the view is bounded to their length now.
        stage=stage, iteration=tr.iteration, messages=MessageView.of(tr.new),
        results=tuple(tr.batch_results.values()) if stage == "tools" else (),
        # (the queues are empty nearly always: no tuple() call for them then)
        steering=tuple(r.text for r in inb.steering) if inb.steering else (),
        steering_ids=tuple(r.message_id for r in inb.steering) if inb.steering else (),
        follow_ups=tuple(r.text for r in inb.follow_ups) if inb.follow_ups else (),
        follow_up_ids=tuple(r.message_id for r in inb.follow_ups) if inb.follow_ups else (),
        injected_steering=tuple(r.text for r in inb.injected_steering)
        if inb.injected_steering else (),
        injected_ids=tuple(r.message_id for r in inb.injected_steering)
        if inb.injected_steering else (),
        carrying=tuple(r.message_id for r in inb.carrying) if inb.carrying else (),
        held=tuple(r.text for r in inb.held) if inb.held else (),
        held_ids=tuple(r.message_id for r in inb.held) if inb.held else (),
        input_id="" if inb.input_receipt is None else inb.input_receipt.message_id,
        base_count=None if first else tr.base_count, base_dropped=tr.base_dropped,
        last_had_tools=tr.last_had_tools, tools_run=MessageView.of(tr.tools_run),
        usage_in=tr.usage_in, usage_out=tr.usage_out, cached_tokens=ledger.cached,
        cache_write_tokens=ledger.cache_write, cost_usd=ledger.cost, tool_calls=ledger.tool_calls,
        cancel_mode=None if cancel_mode is None else cancel_mode.label,
        requests=tuple(st.requests.values()) if st.requests else (),
        seq=dur.seq, created=st.created, updated=time.time(),
    )


async def write_checkpoint(engine: Engine, st: TurnState, stage: Stage,
                           cancel_mode: CancelMode | None = None) -> None:
    if not st.durable:
        return
    store = engine.checkpoints
    assert store is not None  # st.durable says the store keeps checkpoints
    if not store.checkpoint_blocking:
        st.seq += 1
        failure = _save(engine, st, capture(st, stage, cancel_mode))
    else:
        # Parallel tools end together: one write at a time, each capturing the state when it
        # starts, so the last write on disk is the newest state.
        while st.saving is not None and not st.saving.done():
            await asyncio.shield(st.saving)
        st.seq += 1
        cp = capture(st, stage, cancel_mode)
        if st.lock is None:
            st.lock = threading.Lock()
        saving = asyncio.ensure_future(asyncio.to_thread(_save, engine, st, cp))
        st.saving = saving
        # Shielded: a hard abort does not tear a write; ``settle_writes`` waits for it.
        failure = await asyncio.shield(saving)
    if failure is not None:
        engine.error(st, f"writing the checkpoint of session {st.session_id!r} failed: "
                     f"{failure}; the turn goes on without it", "checkpoint")


def write_first_checkpoint(engine: Engine, st: TurnState) -> None:
    """Called as the turn starts (synchronously, before ``start_turn`` returns): from then on
    a crash cannot lose the turn. It has not read the session yet: ``base_count`` is None."""
    if not st.durable:
        return
    st.seq += 1
    r = st.input_receipt
    st.new.append(Message("user", st.input if r is None else r.content()))
    try:
        cp = capture(st, "model", first=True)
    finally:
        st.new = []  # run_turn adds the input again once it has read the session
    failure = _save(engine, st, cp)
    if failure is not None:
        engine.error(st, f"writing the checkpoint of session {st.session_id!r} failed: "
                     f"{failure}; the turn goes on without it", "checkpoint")


def stage_now(st: TurnState) -> Stage:
    last = st.new[-1]
    return "tools" if last.role == "assistant" and last.tool_calls else "model"


def persist_now(engine: Engine, st: TurnState) -> None:
    """Write the turn's checkpoint now, from the loop's thread, before returning: a message
    the turn took in (or a revoke or an edit of one) is in the store before it is
    acknowledged. Between safe points the turn's state is still consistent: the next thing
    it does is call the model, or run the last response's tool calls."""
    if not st.durable or st.finishing:
        return
    if not st.new:  # not running yet: a first checkpoint (write_first_checkpoint)
        write_first_checkpoint(engine, st)
        return
    store = engine.checkpoints
    assert store is not None
    if store.checkpoint_blocking and st.lock is None:
        st.lock = threading.Lock()
    st.seq += 1
    failure = _save(engine, st, capture(st, stage_now(st)))
    if failure is not None:
        engine.error(st, f"writing the checkpoint of session {st.session_id!r} failed: "
                     f"{failure}; the message is held in memory only", "checkpoint")


def successor(session_id: str, agent: Agent, held: Sequence[MessageReceipt]) -> Checkpoint:
    """The checkpoint of the turn the first held message will start: what the store keeps
    between a turn and the next one a lane runs, so a crash in between loses none of them.
    It has the shape of a turn's first checkpoint (it has not read the session)."""
    first, rest = held[0], held[1:]
    now = time.time()
    turn_id = f"turn_{random_hex(6)}"
    return Checkpoint(
        session_id=session_id, turn_id=turn_id, origin_turn_id=turn_id, agent=agent.name,
        tools=tuple(sorted(agent.tools_by_name)), input=first.text, stage="model",
        iteration=0, messages=(Message("user", first.text),), input_id=first.message_id,
        held=tuple(r.text for r in rest), held_ids=tuple(r.message_id for r in rest),
        base_count=None, seq=1, created=now, updated=now)


async def release(engine: Engine, st: TurnState) -> None:
    """As a turn ends: drop its checkpoint, or, when messages are held behind it, replace it
    by their successor's (never dropped first: a crash in between would lose them)."""
    if not st.durable:
        return
    await settle_writes(st)
    store = engine.checkpoints
    assert store is not None
    try:
        if not st.held:
            if store.checkpoint_blocking:
                await asyncio.shield(asyncio.to_thread(store.delete_checkpoint, st.session_id))
            else:
                store.delete_checkpoint(st.session_id)
    except Exception as exc:
        engine.error(st, f"deleting the checkpoint of session {st.session_id!r} failed: {exc}; "
                     "the next turn will ask to discard it", "checkpoint")
    try:
        if st.held:  # (also when one came in while the delete ran)
            agent = st.model_agent  # (a durable turn is never a composite's)
            # Named before the write: if it fails, the checkpoint left in the store is this
            # turn's own, which must not stop the next turn from starting (it would refuse
            # the held messages as "a pending turn"); that turn's first write replaces it.
            engine.successors[st.session_id] = agent
            cp = successor(st.session_id, agent, st.held)
            if store.checkpoint_blocking:
                await asyncio.shield(asyncio.to_thread(store.save_checkpoint, cp))
            else:
                store.save_checkpoint(cp)
    except Exception as exc:
        engine.error(st, f"writing the checkpoint of session {st.session_id!r} failed: {exc}; "
                     "the messages queued behind the turn are held in memory only",
                     "checkpoint")
    finally:
        st.released = True


def sync_held(engine: Engine, session_id: str, agent: BaseAgent) -> None:
    """A session's held messages changed (queued, revoked, edited, taken): the store follows
    before the call that changed them returns. ``agent`` runs the first of them when no turn is
    left. A composite's turns keep no checkpoint, so neither do the messages waiting for one:
    they are held in memory, as that turn will be."""
    st = engine.active.get(session_id)
    if st is not None and not st.finishing:
        persist_now(engine, st)
        return
    store = engine.checkpoints
    if store is None or (st is not None and not st.released):
        return  # a turn is ending: its ``release`` writes what it holds then
    held = engine.waiting.get(session_id) or []
    runner = agent if isinstance(agent, Agent) else None
    try:
        if session_id in engine.successors:
            if held and runner is not None:
                store.save_checkpoint(successor(session_id, runner, held))
                engine.successors[session_id] = runner
            else:
                store.delete_checkpoint(session_id)
                del engine.successors[session_id]
            return
        cp = store.load_checkpoint(session_id)
        if cp is None:
            if held and runner is not None:
                store.save_checkpoint(successor(session_id, runner, held))
                engine.successors[session_id] = runner
        elif held or cp.held_ids:  # a turn waiting for resume keeps what waits behind it
            store.save_checkpoint(dataclasses.replace(
                cp, held=tuple(r.text for r in held),
                held_ids=tuple(r.message_id for r in held), updated=time.time()))
    except Exception as exc:
        engine.error(st, f"writing the checkpoint of session {session_id!r} failed: {exc}; "
                     "the queued messages are held in memory only", "checkpoint")


def _save(engine: Engine, st: TurnState, cp: Checkpoint) -> str | None:
    """Write ``cp``; returns what went wrong instead of raising (it may run in a thread).

    A store written from threads gets one write at a time, and a write older than the one it
    holds is dropped: a message's write from the loop's thread (``persist_now``) is never
    overwritten by a safe point's write that captured the turn before the message came."""
    store = engine.checkpoints
    assert store is not None
    lock = st.lock
    try:
        if lock is None:
            store.save_checkpoint(cp)
        else:
            with lock:
                if cp.seq <= st.written:
                    return None
                store.save_checkpoint(cp)
                st.written = cp.seq
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


async def settle_writes(st: TurnState) -> None:
    """Wait for a checkpoint write still under way (a hard abort does not wait for it)."""
    saving = st.saving
    if saving is not None and not saving.done():
        await asyncio.wait((saving,))


async def safe_point(engine: Engine, st: TurnState, point: SafePoint, stage: Stage,
                     write: bool = False) -> None:
    """Stop here if a cancel says so (after writing the checkpoint it resumes from);
    otherwise write a checkpoint when ``write``."""
    mode = None if st.cancel is None else st.cancel.stops_at(point)
    if mode is not None:
        await write_checkpoint(engine, st, stage, mode)
        raise CancelStop(mode)
    if write:
        await write_checkpoint(engine, st, stage)


def restore(engine: Engine, st: TurnState, cp: Checkpoint, base: Sequence[Message]) -> None:
    """Put the checkpoint's state back into a fresh TurnState, on the session's history
    ``base`` (checked against it by the caller), and its queued messages back into the inbox
    under the ids they were acknowledged with. A parked turn resumes once every request has
    its answer (``CheckpointError`` otherwise)."""
    check_answered(engine, cp)
    tr = st.transcript
    tr.base = base[cp.base_dropped:]
    tr.base_rewritten = cp.base_dropped > 0
    tr.base_count = len(base) if cp.base_count is None else cp.base_count
    tr.base_dropped = cp.base_dropped
    tr.new = list(cp.messages)
    tr.iteration = cp.iteration
    tr.last_had_tools = cp.last_had_tools
    tr.tools_run = list(cp.tools_run)
    tr.usage_in, tr.usage_out = cp.usage_in, cp.usage_out
    restore_spent(st, cp)
    tr.batch_results = {m.tool_call_id or "": m for m in cp.results}
    st.seq = cp.seq
    st.origin_turn_id = cp.origin_turn_id
    _restore_queues(engine, st, cp)
    if cp.input_id and (cp.iteration == 0 or cp.input_id in cp.carrying):
        r = _receipt(engine, st, "send", cp.input, cp.input_id)
        st.input_receipt = r
        st.carrying += (r,)
    carrying = frozenset(cp.carrying)
    st.carrying += tuple(r for r in st.injected_steering
                                 if r.message_id in carrying)
    asked = restore_requests(engine, st, cp)
    if asked is not None:  # parked: the calls that asked ran before, and see ``resumed``
        st.resumed_calls = asked


def _receipt(engine: Engine, st: TurnState, kind: MessageKind, text: str,
             message_id: str | None) -> MessageReceipt:
    """The receipt of a message the checkpoint holds: the one its caller has, when this
    process accepted it (a cancelled turn resumed here), else a new one under its id."""
    r = engine.inbox.live.get(message_id) if message_id else None
    if r is None:
        r = MessageReceipt(kind, text, st.session_id, message_id=message_id or None)
        engine.inbox.adopt(r)
    r.turn_id, r.parent_turn_id = st.turn_id, st.parent_turn_id
    return r


def _restore_queues(engine: Engine, st: TurnState, cp: Checkpoint) -> None:
    def made(kind: MessageKind, texts: tuple[str, ...],
             ids: tuple[str, ...]) -> tuple[MessageReceipt, ...]:
        if len(ids) != len(texts):  # an older checkpoint: new ids
            ids = ("",) * len(texts)
        return tuple(_receipt(engine, st, kind, t, i) for t, i in zip(texts, ids, strict=True))

    st.steering = made("steer", cp.steering, cp.steering_ids)
    # Messages queued behind the turn by a lane that is gone: after it, as its follow-ups.
    here = {r.message_id for r in engine.waiting.get(st.session_id, ())}
    held = [(t, i) for t, i in zip(cp.held, cp.held_ids, strict=False) if i not in here]
    st.follow_ups = (*made("follow_up", cp.follow_ups, cp.follow_up_ids),
                             *made("send", tuple(t for t, _ in held), tuple(i for _, i in held)))
    ids = cp.injected_ids if len(cp.injected_ids) == len(cp.injected_steering) \
        else ("",) * len(cp.injected_steering)
    # Delivered already (unless carried): kept only to be handed back by a rollback.
    injected = [
        MessageReceipt("steer", t, st.session_id, turn_id=st.turn_id, message_id=i or None)
        for t, i in zip(cp.injected_steering, ids, strict=True)]
    carried = frozenset(cp.carrying)
    for i, r in enumerate(injected):
        if r.message_id in carried:
            injected[i] = _receipt(engine, st, "steer", r.text, r.message_id)
        else:
            r.state = MessageState.DELIVERED
    st.injected_steering = tuple(injected)
