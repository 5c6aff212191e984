"""Answering approvals and questions, live or parked, from any loop over the same store.

An answer first goes to the request's live wait in this process, if it has one. Otherwise the
request is parked (``_core/_parking``): the store's index names its session, the session's
checkpoint holds the request (its choices, its schema), the answer is checked, then written to
the index exclusively (a second answer, from this process or another, is refused). When that
was the last open request of the parked turn, this loop claims the turn (exactly one loop
does) and resumes it: the answer returns the resumed turn's ``TurnHandle``.

Every refusal is a ``RequestError`` saying why, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from steerable._commands import AnswerApproval, AnswerQuestion, Command, Resume
from steerable._core._checkpoint import Checkpoint
from steerable._core._engine import Engine
from steerable._core._parking import RequestIndex, waiting_in_store
from steerable._core._requests import PendingRequest, RequestKind, check_answer
from steerable._core._resume import check_agent
from steerable._core._turn_state import TurnState
from steerable.errors import (
    InvalidAnswerError,
    RequestClosedError,
    RequestError,
    UnknownRequestError,
)

__all__ = ["Answers"]


class _Host(Protocol):
    agent: Any

    def _dispatch(self, command: Command) -> Any: ...


class Answers:
    """The loop's handlers for ``AnswerApproval`` and ``AnswerQuestion``, and the listing of
    what waits (``pending_requests``)."""

    def __init__(self, host: _Host, engine: Engine) -> None:
        self.host = host
        self.engine = engine

    @property
    def handlers(self) -> Mapping[type[Command], Callable[[Any], Any]]:
        return {AnswerApproval: self.approval, AnswerQuestion: self.question}

    def _index(self) -> RequestIndex | None:
        index = self.engine.checkpoints
        return index if isinstance(index, RequestIndex) else None

    # -- answering ----------------------------------------------------------------------------

    def approval(self, cmd: AnswerApproval) -> Any:
        """True (a live or parked approval answered), the resumed turn's handle, or False
        when no such request exists (as ``resolve_approval`` always answered)."""
        if self.engine.broker.resolve(cmd.request_id, cmd.approved, cmd.reason):
            return True
        try:
            return self._parked(cmd.request_id, "approval", cmd.approved, cmd.reason)
        except UnknownRequestError:
            return False

    def question(self, cmd: AnswerQuestion) -> Any:
        """True (answered), the resumed turn's handle, or a ``RequestError``."""
        if self.engine.broker.answer(cmd.request_id, cmd.value):
            return True
        return self._parked(cmd.request_id, "question", cmd.value, "")

    def _parked(self, request_id: str, kind: RequestKind, value: Any, reason: str) -> Any:
        index = self._index()
        session_id = None if index is None else index.request_session(request_id)
        if index is not None and session_id is None and index.request_answers([request_id]):
            raise RequestClosedError(f"request {request_id} was answered already (an answer "
                                     "counts once)")
        if index is None or session_id is None:
            raise UnknownRequestError(
                f"no open request {request_id!r}: it was never issued here, or its turn was "
                "discarded (pending_requests lists what waits)")
        if session_id in self.engine.active:
            raise RequestClosedError(f"request {request_id} was answered already: its turn "
                                     "is running")
        cp = self.engine.checkpoints.load_checkpoint(session_id) \
            if self.engine.checkpoints is not None else None
        req = None if cp is None else \
            next((r for r in cp.requests if r.request_id == request_id), None)
        if cp is None or req is None or req.answered:
            raise RequestClosedError(
                f"request {request_id} is no longer open: it was answered, or its turn moved on")
        if req.kind != kind:
            verb = "loop.answer" if req.kind == "question" else "loop.resolve_approval"
            raise RequestError(f"request {request_id} is {'a question' if req.kind == 'question' else 'an approval'}: answer it with {verb}")
        if kind == "question":
            value = check_answer(value, req.choices, req.schema)
        elif not isinstance(value, bool):
            raise InvalidAnswerError("an approval's answer is True or False")
        if not index.answer_request(request_id, {"value": value, "reason": reason}):
            raise RequestClosedError(f"request {request_id} was answered already (an answer "
                                     "counts once)")
        return self._maybe_resume(index, cp)

    def _maybe_resume(self, index: RequestIndex, cp: Checkpoint) -> Any:
        waiting = [r.request_id for r in cp.waiting]
        if len(index.request_answers(waiting)) < len(waiting):
            return True  # others of the same turn still wait
        check_agent(cp, self.host.agent)  # before the claim: a refusal leaves it claimable
        if not index.claim_resume(cp.checkpoint_id):
            return True  # another loop answered the last one at the same moment: it resumes
        return self.host._dispatch(Resume(cp.session_id))

    # -- after a turn -------------------------------------------------------------------------

    def after_turn(self, st: TurnState) -> None:
        """A parked turn ended: its requests leave the live table; an answer that came while
        it was writing its checkpoint is applied now, as if it came from outside."""
        asks = st.asks
        if asks is None or not asks.live:
            return
        live, asks.live = asks.live, {}
        for req in live.values():
            self.engine.broker.discard(req.request_id)
        for req in live.values():
            for answer in req.late:
                value, reason = answer if req.kind == "approval" else (answer, "")
                try:
                    self._parked(req.request_id, req.kind, value, reason)
                except RequestError as exc:
                    self.engine.error(None, f"an answer to {req.request_id} given while its "
                                      f"turn parked was refused: {exc}", "checkpoint")

    # -- listing ------------------------------------------------------------------------------

    def pending(self, session_id: str | None) -> list[PendingRequest]:
        """Requests waiting for a person: live ones of running turns, and parked ones (across
        every session of the store, or only ``session_id``'s)."""
        out: list[PendingRequest] = []
        for st in self.engine.turns.values():
            if st.asks is None or (session_id is not None and st.session_id != session_id):
                continue
            out += [r for r in st.asks.requests.values()
                    if not r.answered and self.engine.broker.get(r.request_id) is not None
                    and r.request_id not in st.asks.live]
        if self.engine.checkpoints is not None:
            out += [r for r in waiting_in_store(self.engine.checkpoints, session_id)
                    if r.session_id not in self.engine.active]  # (resumed: answered)
        return sorted(out, key=lambda r: r.created)
