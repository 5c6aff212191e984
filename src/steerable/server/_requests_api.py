"""``GET /v1/requests`` and ``POST /v1/requests/{request_id}``: what waits, and its answers.

The listing holds every approval and question waiting for a person, across sessions (live
ones of running turns, and parked ones the store keeps). An answer is ``{"approved": bool,
"reason"?: str}`` for an approval or ``{"value": ...}`` for a question; it is checked (a value
outside the question's choices or schema: 400, the question stays open), counts once (a
second answer: 409), and an id never issued is 404. When it was the last answer a parked turn
waited for, the turn resumes: ``turn_id`` names it (follow it on the session's events).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from steerable._core._requests import PendingRequest
from steerable.errors import RequestClosedError, UnknownRequestError

__all__ = ["request_json", "request_routes"]

_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,200}$")

Handler = Callable[[Request], Awaitable[Response]]


def request_json(req: PendingRequest) -> dict[str, Any]:
    """A waiting request as the API shows it (the runner redacts the whole answer)."""
    out: dict[str, Any] = {"request_id": req.request_id, "kind": req.kind,
                           "session_id": req.session_id, "turn_id": req.turn_id,
                           "call_id": req.call_id, "tool_name": req.tool_name,
                           "created": req.created}
    if req.kind == "question":
        out.update(question=req.question, choices=None if req.choices is None
                   else list(req.choices), schema=req.schema)
    else:
        out["arguments"] = dict(req.arguments or {})
    return out


def request_routes(runner: Any, body: Callable[[Request], Awaitable[dict[str, Any]]],
                   json_errors: Callable[[Handler], Handler]) -> list[Route]:
    """The two routes over ``runner`` (``pending_requests``, ``answer_request``); ``body``
    reads a JSON object body, ``json_errors`` maps errors to statuses, as the other routes."""

    async def listing(request: Request) -> Response:
        session = request.query_params.get("session_id")
        return JSONResponse({"requests": await runner.pending_requests(session)})

    async def answer(request: Request) -> Response:
        rid = request.path_params["request_id"]
        if not _REQUEST_ID.match(rid):
            return JSONResponse({"error": "invalid request id"}, status_code=400)
        data = await body(request)
        if ("approved" in data) == ("value" in data):
            return JSONResponse({"error": 'send {"approved": bool} for an approval or '
                                          '{"value": ...} for a question'}, status_code=400)
        if "approved" in data and not isinstance(data["approved"], bool):
            return JSONResponse({"error": "field 'approved' must be bool"}, status_code=400)
        reason = data.get("reason", "")
        if not isinstance(reason, str):
            return JSONResponse({"error": "field 'reason' must be str"}, status_code=400)
        try:
            turn_id = await runner.answer_request(rid, data.get("approved"), data.get("value"),
                                                  reason)
        except UnknownRequestError as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except RequestClosedError as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        return JSONResponse({"ok": True, "turn_id": turn_id})

    return [Route("/v1/requests", json_errors(listing), methods=["GET"]),
            Route("/v1/requests/{request_id}", json_errors(answer), methods=["POST"])]
