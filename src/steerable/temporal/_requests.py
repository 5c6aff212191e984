"""The approvals and questions a session's workflow waits on, as its events tell them.

The workflow's engine holds the requests themselves (and checks their answers); this table is
what the outside sees of them: the ``state`` query and the session's memo (so ``GET
/v1/requests`` lists every waiting request across sessions in one visibility query), in the
form of the server's request listing (``server._requests_api.request_json``).
"""

from __future__ import annotations

from typing import Any

from steerable import Event, EventKind

__all__ = ["OpenRequests"]

_OPENS = {EventKind.APPROVAL_REQUESTED: "approval", EventKind.QUESTION_ASKED: "question"}
_CLOSES = frozenset({EventKind.APPROVAL_RESOLVED, EventKind.QUESTION_ANSWERED})


class OpenRequests:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._open: dict[str, dict[str, Any]] = {}
        self.version = 0
        """Counts changes (the workflow's memo is rewritten when it moves)."""

    def __bool__(self) -> bool:
        return bool(self._open)

    def see(self, event: Event, now: float) -> None:
        kind = event.kind
        if kind in _OPENS:
            e: Any = event
            row: dict[str, Any] = {
                "request_id": e.request_id, "kind": _OPENS[kind], "session_id": self.session_id,
                "turn_id": e.turn_id, "call_id": e.call_id, "tool_name": e.tool_name,
                "created": now}
            if kind is EventKind.QUESTION_ASKED:
                row.update(question=e.question, choices=None if e.choices is None
                           else list(e.choices), schema=None if e.schema is None
                           else dict(e.schema))
            else:
                row["arguments"] = dict(e.arguments)
            self._open[e.request_id] = row
            self.version += 1
        elif kind in _CLOSES and self._open.pop(getattr(event, "request_id", ""), None) \
                is not None:
            self.version += 1

    def listing(self) -> list[dict[str, Any]]:
        return list(self._open.values())
