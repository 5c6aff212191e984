"""Parking: a turn whose approval or question stays open stops, and waits in its checkpoint.

With ``AgentLoop(park=True)`` and a store that keeps checkpoints, a request of a top-level turn
that is still open ``Timeouts.park_after`` seconds after it was made (default 0: at once)
parks its call: the call stops (a tool that asked is cancelled inside its ``ask``), the other
calls of its group finish, and the turn writes a checkpoint that records its requests, adds
the open ones to the store's index of waiting requests (``RequestIndex``), and ends with
``TurnStatus.WAITING``. No task, timer or process is left waiting.

An answer, from any process, is written to the index first (exclusively: one answer counts);
once every open request of the checkpoint has one, the answering loop resumes the turn. On
resume, ``restore_requests`` puts the answers back: an approved call runs once (the approvers
are not asked again), a denied one is skipped, and a tool that asked runs again from the
start with ``ToolContext.resumed`` set; each of its ``ask`` calls returns the answer recorded
for it, in order, at once (the rule for tool authors: no side effect before an ``ask`` that
could not safely happen twice).

Sub-turns and turns of a loop without ``park`` never park: their requests are live waits
(approvals deny after ``Timeouts.approval``; questions fail the tool after as long).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from steerable._core._checkpoint import Checkpoint
from steerable._core._engine import Engine
from steerable._core._requests import (
    LiveRequest,
    PendingRequest,
    RequestKind,
    check_answer,
    check_question,
)
from steerable._core._turn_state import TurnState
from steerable._events import ApprovalRequested, ApprovalResolved, QuestionAnswered, QuestionAsked
from steerable._receipts import MessageKind, MessageReceipt
from steerable.errors import (
    CheckpointError,
    InvalidAnswerError,
    RequestClosedError,
    RequestError,
    ToolError,
    UnknownRequestError,
)

__all__ = [
    "PARKED",
    "ParkStop",
    "RequestIndex",
    "ask_question",
    "can_park",
    "check_answered",
    "close_in_index",
    "forget_requests",
    "hold_for_parked",
    "index_parked",
    "open_requests",
    "parked_requests",
    "record_answer",
    "recorded_approval",
    "restore_requests",
    "take_live",
    "wait_approval",
    "waiting_in_store",
]

PARKED: Any = object()
"""What a wait returns when its request parked instead of being answered."""


class ParkStop(Exception):
    """Raised by the EXECUTING phase after the group in which a call parked (its checkpoint,
    with the requests, was written). Private to the engine, like ``CancelStop``."""


@runtime_checkable
class RequestIndex(Protocol):
    """The store's index of waiting requests: what ``pending_requests`` lists across sessions
    and how an answer finds its turn. Each method is atomic on its own."""

    def index_requests(self, session_id: str, request_ids: Sequence[str]) -> None:
        """Record that these requests of ``session_id``'s parked turn wait for answers."""
        ...

    def request_session(self, request_id: str) -> str | None:
        """The session a request belongs to (None: never indexed, or closed)."""
        ...

    def answer_request(self, request_id: str, answer: Mapping[str, Any]) -> bool:
        """Record the answer unless one is recorded already (False then): exactly once."""
        ...

    def request_answers(self, request_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The answers recorded for those of ``request_ids`` that have one."""
        ...

    def waiting_requests(self) -> list[tuple[str, str]]:
        """``(request_id, session_id)`` of every indexed request with no answer yet."""
        ...

    def claim_resume(self, checkpoint_id: str) -> bool:
        """True for the first caller only: that one resumes the parked turn."""
        ...

    def close_requests(self, request_ids: Sequence[str]) -> None:
        """These requests' answers were used: they no longer wait, and their answers stay
        only as a record that they were answered (a later answer is refused, not unknown)."""
        ...


def _requests(st: TurnState) -> dict[str, PendingRequest]:
    """The turn's table of requests, made on first use (``Asks``: this module owns it)."""
    if st.requests is None:
        st.requests = {}
    return st.requests


def can_park(engine: Engine, st: TurnState) -> bool:
    return engine.park and st.durable and st.parent_turn_id is None


def _pending(st: TurnState, request_id: str, kind: Any, call_id: str, tool_name: str,
             **fields: Any) -> PendingRequest:
    return PendingRequest(request_id=request_id, kind=kind, session_id=st.session_id,
                          turn_id=st.origin_turn_id or st.turn_id, call_id=call_id,
                          tool_name=tool_name, created=time.time(), **fields)


async def _wait(engine: Engine, st: TurnState, req: LiveRequest, park: Callable[[], None],
                live_timeout: float | None) -> Any:
    """The answer, or ``PARKED`` (after calling ``park``), or ``TimeoutError`` when a live
    wait (no parking) runs past ``live_timeout``."""
    if not can_park(engine, st):
        try:
            return await asyncio.wait_for(asyncio.shield(req.future), live_timeout)
        except TimeoutError:
            engine.broker.discard(req.request_id)
            raise
    if engine.timeouts.park_after > 0:
        try:
            return await asyncio.wait_for(asyncio.shield(req.future),
                                          engine.timeouts.park_after)
        except TimeoutError:
            pass
    if req.future.done():
        return req.future.result()
    req.parked = True
    if st.live is None:
        st.live = {}
    st.live[req.request_id] = req
    park()
    return PARKED


def recorded_approval(engine: Engine, st: TurnState, call_id: str) -> tuple[bool, str] | None:
    """The answer a parked approval of this call got (None: it has none)."""
    for req in (st.requests or {}).values():
        if req.kind == "approval" and req.call_id == call_id and req.answered:
            _announce(engine, st, req)
            return bool(req.value), req.reason
    return None


async def wait_approval(engine: Engine, st: TurnState, call_id: str, tool_name: str,
                        arguments: Mapping[str, Any], open_ids: set[str],
                        park: Callable[[], None]) -> Any:
    """``ctx.ask_human`` inside an approver: ``(approved, reason)`` or ``PARKED``."""
    req = engine.broker.open("approval")
    rid = req.request_id
    open_ids.add(rid)
    _requests(st)[rid] = _pending(st, rid, "approval", call_id, tool_name,
                                  arguments=dict(arguments))
    engine.emit(st, ApprovalRequested, request_id=rid, call_id=call_id, tool_name=tool_name,
                arguments=arguments)
    try:
        answer = await _wait(engine, st, req, park, None)
    except asyncio.CancelledError:
        if rid in open_ids and not req.parked:
            open_ids.remove(rid)
            engine.broker.discard(rid)
            engine.emit(st, ApprovalResolved, request_id=rid, call_id=call_id,
                        tool_name=tool_name, approved=False, reason="cancelled")
        raise
    if answer is PARKED:
        open_ids.discard(rid)  # it stays open, in the checkpoint: no RESOLVED now
        return PARKED
    approved, reason = answer
    open_ids.discard(rid)
    _record(st, rid, approved, reason)
    engine.emit(st, ApprovalResolved, request_id=rid, call_id=call_id, tool_name=tool_name,
                approved=approved, reason=reason)
    return approved, reason


async def ask_question(engine: Engine, st: TurnState, call_id: str, tool_name: str,
                       park: Callable[[], None], question: Any, choices: Any,
                       schema: Any) -> Any:
    """``ToolContext.ask``: the recorded answer on a re-run, else ask (and wait or park)."""
    question, choices, schema = check_question(question, choices, schema)
    if st.asked is None:
        st.asked = {}
    index = st.asked.get(call_id, 0)
    st.asked[call_id] = index + 1
    requests = _requests(st)
    for req in requests.values():
        if req.kind == "question" and req.call_id == call_id and req.index == index \
                and req.answered:
            _announce(engine, st, req)
            return req.value
    live = engine.broker.open("question", choices=choices, schema=schema)
    rid = live.request_id
    requests[rid] = _pending(st, rid, "question", call_id, tool_name, question=question,
                                  choices=choices, schema=schema, index=index)
    engine.emit(st, QuestionAsked, request_id=rid, call_id=call_id, tool_name=tool_name,
                question=question, choices=choices, schema=schema)
    try:
        answer = await _wait(engine, st, live, park,
                             engine.timeouts.approval)
    except TimeoutError:
        engine.emit(st, QuestionAnswered, request_id=rid, call_id=call_id,
                    tool_name=tool_name, outcome="timed out")
        raise ToolError(f"Nobody answered the question within "
                        f"{engine.timeouts.approval:g} s.") from None
    except asyncio.CancelledError:
        if not live.parked:
            engine.broker.discard(rid)
            engine.emit(st, QuestionAnswered, request_id=rid, call_id=call_id,
                        tool_name=tool_name, outcome="cancelled")
        raise
    if answer is PARKED:
        await asyncio.Event().wait()  # the executor cancels this call now; it resumes later
    _record(st, rid, answer, "")
    engine.emit(st, QuestionAnswered, request_id=rid, call_id=call_id, tool_name=tool_name,
                value=answer)
    return answer


def _record(st: TurnState, request_id: str, value: Any, reason: str) -> None:
    """An answer that came in time: kept, so a re-run of its call after a later park replays
    it."""
    requests = _requests(st)
    req = requests.get(request_id)
    if req is not None:
        requests[request_id] = _answered(req, value, reason)


def _answered(req: PendingRequest, value: Any, reason: str) -> PendingRequest:
    return PendingRequest(**{**{n: getattr(req, n) for n in req._names},
                             "answered": True, "value": value, "reason": reason})


def _announce(engine: Engine, st: TurnState, req: PendingRequest) -> None:
    """An answer given while the turn was parked reaches its turn: say so, once."""
    if req.request_id not in st.fresh:
        return
    st.fresh = st.fresh - {req.request_id}
    if req.kind == "approval":
        engine.emit(st, ApprovalResolved, request_id=req.request_id, call_id=req.call_id,
                    tool_name=req.tool_name, approved=bool(req.value), reason=req.reason)
    else:
        engine.emit(st, QuestionAnswered, request_id=req.request_id, call_id=req.call_id,
                    tool_name=req.tool_name, value=req.value)


def open_requests(st: TurnState, pending_calls: Sequence[str]) -> tuple[PendingRequest, ...]:
    """What the park checkpoint records: every request of the calls still to run (answered
    ones too: a re-run tool replays them)."""
    calls = set(pending_calls)
    return tuple(r for r in (st.requests or {}).values() if r.call_id in calls)


def index_parked(engine: Engine, st: TurnState, requests: Sequence[PendingRequest]) -> None:
    """After the park checkpoint is written: the open requests join the store's index."""
    index = engine.checkpoints
    waiting = [r.request_id for r in requests if not r.answered]
    if waiting and isinstance(index, RequestIndex):
        index.index_requests(st.session_id, waiting)


def restore_requests(engine: Engine, st: TurnState, cp: Checkpoint) -> frozenset[str] | None:
    """A resumed turn takes its checkpoint's requests, with the answers the index holds.
    Returns the calls that asked (they ran before: their tools see ``resumed``), or None
    when the checkpoint has no requests."""
    if not cp.requests:
        return None
    requests = _requests(st)
    fresh = set(st.fresh)
    index = engine.checkpoints
    open_ids = [r.request_id for r in cp.requests if not r.answered]
    answers: dict[str, dict[str, Any]] = index.request_answers(open_ids) \
        if open_ids and isinstance(index, RequestIndex) else {}
    for req in cp.requests:
        got = answers.get(req.request_id)
        if got is not None:
            req = _answered(req, got.get("value"), str(got.get("reason", "")))
            fresh.add(req.request_id)
        requests[req.request_id] = req
    st.fresh = frozenset(fresh)
    return frozenset(r.call_id for r in cp.requests if r.kind == "question")


def forget_requests(st: TurnState, done_calls: Sequence[str]) -> list[str]:
    """The calls ended (with results the next checkpoint holds): their requests leave the
    turn. Returns their ids, for ``close_in_index`` once that checkpoint is written."""
    requests = st.requests
    if not requests:
        return []
    calls = set(done_calls)
    gone = [rid for rid, r in requests.items() if r.call_id in calls]
    for rid in gone:
        del requests[rid]
    return gone


def close_in_index(engine: Engine, st: TurnState, request_ids: Sequence[str]) -> None:
    index = engine.checkpoints
    if request_ids and isinstance(index, RequestIndex):
        try:
            index.close_requests(request_ids)
        except Exception as exc:  # stale entries are harmless: answers to them are refused
            engine.error(st, f"closing answered requests in the store failed: {exc}",
                         "checkpoint")


def check_answered(engine: Engine, cp: Checkpoint) -> None:
    """Before a parked turn is resumed: every open request has an answer in the index."""
    waiting = cp.waiting
    if not waiting:
        return
    index = engine.checkpoints
    answers: dict[str, dict[str, Any]] = index.request_answers([r.request_id for r in waiting]) \
        if isinstance(index, RequestIndex) else {}
    missing = [r.request_id for r in waiting if r.request_id not in answers]
    if missing:
        raise CheckpointError(
            f"session {cp.session_id!r} waits for answers to {', '.join(missing)}: answer "
            "them (loop.answer / loop.resolve_approval resume the turn), or start a new turn "
            "with discard_checkpoint=True to drop it")


def take_live(st: TurnState) -> list[LiveRequest]:
    """As a parked turn ends: the live entries of its parked requests (the caller drops them
    from the table, and applies an answer that came while the turn was parking)."""
    live = st.live
    st.live = None
    return [] if live is None else list(live.values())


def parked_requests(st: TurnState) -> tuple[PendingRequest, ...]:
    """A parked turn's open requests (its ``TurnResult.pending``)."""
    return tuple(r for r in (st.requests or {}).values() if not r.answered)


def waiting_in_store(store: Any, session_id: str | None) -> list[PendingRequest]:
    """The parked requests a store holds with no answer yet: across sessions (through its
    index), or ``session_id``'s (its checkpoint alone, when the store has no index)."""
    sessions: dict[str, set[str] | None] = {}
    if isinstance(store, RequestIndex):
        for rid, sid in store.waiting_requests():
            if session_id is None or sid == session_id:
                ids = sessions.setdefault(sid, set())
                assert ids is not None
                ids.add(rid)
    elif session_id is not None:
        sessions[session_id] = None
    out: list[PendingRequest] = []
    for sid, ids in sessions.items():
        cp = store.load_checkpoint(sid)
        if cp is not None:
            out += [r for r in cp.waiting if ids is None or r.request_id in ids]
    return sorted(out, key=lambda r: r.created)


def record_answer(store: Any, request_id: str, kind: RequestKind, value: Any, reason: str, *,
                  running: Container[str] = (),
                  before_claim: Callable[[Checkpoint], None] | None = None
                  ) -> Checkpoint | None:
    """Answer a parked request in ``store`` (any process, any loop over it): checked against
    the request its checkpoint holds, then written to the index exclusively.

    Returns the parked turn's checkpoint when this answer was the last one it waited for and
    this caller claimed it (the caller resumes the turn), else None (recorded: others still
    wait, or another caller resumes it). ``running``: sessions with a turn running in this
    process. A ``RequestError`` says why an answer is refused; nothing is recorded then."""
    index = store if isinstance(store, RequestIndex) else None
    session_id = None if index is None else index.request_session(request_id)
    if index is not None and session_id is None and index.request_answers([request_id]):
        raise RequestClosedError(f"request {request_id} was answered already (an answer "
                                 "counts once)")
    if index is None or session_id is None:
        raise UnknownRequestError(
            f"no open request {request_id!r}: it was never issued here, or its turn was "
            "discarded (pending_requests lists what waits)")
    if session_id in running:
        raise RequestClosedError(f"request {request_id} was answered already: its turn is "
                                 "running")
    cp = store.load_checkpoint(session_id)
    req = None if cp is None else \
        next((r for r in cp.requests if r.request_id == request_id), None)
    if cp is None or req is None or req.answered:
        raise RequestClosedError(
            f"request {request_id} is no longer open: it was answered, or its turn moved on")
    if req.kind != kind:
        how = "loop.answer" if req.kind == "question" else "loop.resolve_approval"
        what = "a question" if req.kind == "question" else "an approval"
        raise RequestError(f"request {request_id} is {what}; answer it with {how}")
    if kind == "question":
        value = check_answer(value, req.choices, req.schema)
    elif not isinstance(value, bool):
        raise InvalidAnswerError("an approval's answer is True or False")
    if not index.answer_request(request_id, {"value": value, "reason": reason}):
        raise RequestClosedError(f"request {request_id} was answered already (an answer "
                                 "counts once)")
    waiting = [r.request_id for r in cp.waiting]
    if len(index.request_answers(waiting)) < len(waiting):
        return None
    if before_claim is not None:
        before_claim(cp)  # (a refusal here leaves the turn claimable by a loop that can)
    return cp if index.claim_resume(cp.checkpoint_id) else None


def hold_for_parked(engine: Engine, kind: MessageKind, text: str,
                    session_id: str | None) -> MessageReceipt | None:
    """A steer or a follow-up for a session whose turn is parked: kept with the turn, in its
    checkpoint (durable before acknowledged), and taken in when it resumes (a steer reaches
    the model with the resumed turn's next call). None when the session has no parked turn.
    (Written by this process: a resume another process starts at the same moment may miss
    it; a Redis group routes steering to the lease holder instead, and has none here.)"""
    store = engine.checkpoints
    if store is None or not session_id or session_id in engine.successors:
        return None
    try:
        cp = store.load_checkpoint(session_id)
    except CheckpointError:
        return None
    if cp is None or not cp.waiting:
        return None
    r = MessageReceipt(kind, text, session_id, turn_id=cp.turn_id)
    if kind == "steer":
        cp = dataclasses.replace(
            cp, steering=(*cp.steering, text),
            steering_ids=(*_ids(cp.steering_ids, cp.steering), r.message_id))
    else:
        cp = dataclasses.replace(
            cp, follow_ups=(*cp.follow_ups, text),
            follow_up_ids=(*_ids(cp.follow_up_ids, cp.follow_ups), r.message_id))
    store.save_checkpoint(dataclasses.replace(cp, updated=time.time()))
    return engine.inbox.enqueue(r, f"kept with the parked turn {cp.origin_turn_id}: it "
                                   "comes in when the turn resumes")


def _ids(ids: tuple[str, ...], texts: tuple[str, ...]) -> tuple[str, ...]:
    return ids if len(ids) == len(texts) else ("",) * len(texts)
