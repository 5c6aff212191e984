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

from collections.abc import Callable
from typing import Any

from steerable._core._agent import BaseAgent
from steerable._core._engine import Engine
from steerable._core._parking import RequestIndex, record_answer, take_live, waiting_in_store
from steerable._core._requests import PendingRequest, RequestKind
from steerable._core._resume import check_agent
from steerable._core._turn_state import TurnState
from steerable.drivers._checks import check_session_id
from steerable.drivers._commands import AnswerApproval, AnswerQuestion, Resume
from steerable.errors import ConfigurationError, RequestError, UnknownRequestError

__all__ = ["Answers", "check_park"]


def check_park(park: bool, durable: bool) -> bool:
    if park and not durable:
        raise ConfigurationError(
            "park=True needs a store that keeps checkpoints (JSONLSessionStore, "
            "SQLiteSessionStore, RedisSessionStore) and checkpoints=True")
    return park


class Answers:
    """What runs ``AnswerApproval`` and ``AnswerQuestion`` (their rows in ``VERBS``), and the
    listing of what waits (``pending_requests``), for one loop's turns."""

    def __init__(self, engine: Engine, agent: BaseAgent,
                 resume_here: Callable[[Resume], Any]) -> None:
        self.engine = engine
        self.agent = agent
        self._resume_here = resume_here
        self.resume: Callable[[str], Any] = lambda sid: self._resume_here(Resume(sid))
        """Resumes a parked turn whose answers are all in (a Redis worker puts its own in:
        its turns resume where the session's lease is, through the bus)."""

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
        """True (answered), the resumed turn's handle, or a ``RequestError``: a value that
        does not fit the question (``InvalidAnswerError``: it stays open), a second answer
        (``RequestClosedError``), an id never issued (``UnknownRequestError``)."""
        if self.engine.broker.answer(cmd.request_id, cmd.value):
            return True
        return self._parked(cmd.request_id, "question", cmd.value, "")

    def _parked(self, request_id: str, kind: RequestKind, value: Any, reason: str) -> Any:
        store = self.engine.checkpoints
        if store is None:
            raise UnknownRequestError(f"no open request {request_id!r}")
        cp = record_answer(store, request_id, kind, value, reason,
                           running=self.engine.active,
                           before_claim=lambda cp: check_agent(cp, self.agent))
        if cp is None:
            return True  # recorded; the turn waits for others, or another loop resumes it
        return self.resume(cp.session_id)

    # -- after a turn -------------------------------------------------------------------------

    def after_turn(self, st: TurnState) -> None:
        """A parked turn ended: its requests leave the live table; an answer that came while
        it was writing its checkpoint is applied now, as if it came from outside."""
        live = take_live(st)
        for req in live:
            self.engine.broker.discard(req.request_id)
        for req in live:
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
        if session_id is not None:
            check_session_id(session_id)
        out: list[PendingRequest] = []
        for st in self.engine.turns.values():
            if not st.asks.requests or (session_id is not None and st.session_id != session_id):
                continue
            parked = st.asks.live or {}
            out += [r for r in st.asks.requests.values()
                    if not r.answered and self.engine.broker.get(r.request_id) is not None
                    and r.request_id not in parked]
        if self.engine.checkpoints is not None:
            out += [r for r in waiting_in_store(self.engine.checkpoints, session_id)
                    if r.session_id not in self.engine.active]  # (resumed: answered)
        return sorted(out, key=lambda r: r.created)
