"""The HTTP API (SPEC 7) and the web page, as a Starlette app over a ``SessionRunner``.

Guards, in the order a request meets them: ``AccessGuard`` (the bearer token when one is
set, the page's own files being public; without a token only loopback host names, against DNS
rebinding; an ``Origin`` only from the allow list; no CORS headers are ever sent, so other
sites cannot read answers either), the session id's shape (the store's own rule: no path
tricks), then the body: at most ``MAX_BODY`` bytes of a JSON object whose fields have the right
types. Every refusal is a 4xx with ``{"error": ...}`` and changes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from steerable._parts import Part, TextPart
from steerable._parts_json import parts_from_json
from steerable.drivers._lanes import BUSY_POLICIES
from steerable.errors import CheckpointError, SessionBusyError
from steerable.server._guard import AccessGuard
from steerable.server._requests_api import request_routes
from steerable.server._runner import SessionRunner
from steerable.server._sse import EventStream, EventStreams
from steerable.server._undo_api import UndoAPI

__all__ = ["MAX_BODY", "create_app", "end_streams"]

MAX_BODY = 64 * 1024
MAX_MESSAGE_BODY = 32 * 1024 * 1024
"""A message may carry images and files (base64): up to 20 MB of bytes, a third more encoded."""
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MESSAGE_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_STATIC = {"app.js": "text/javascript", "undo.js": "text/javascript",
           "messages.js": "text/javascript", "usage.js": "text/javascript",
           "page.js": "text/javascript", "parts.js": "text/javascript",
           "writing.js": "text/javascript", "requests.js": "text/javascript",
           "app.css": "text/css"}
# The page and its files hold no data: they load without the token. Derived from the asset
# table, so a new script cannot be served and yet refused to a page that has a token.
_PUBLIC = ("/", "/favicon.svg", *(f"/static/{name}" for name in _STATIC))


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _session_id(request: Request) -> str:
    sid = request.path_params["session_id"]
    if not _SESSION_ID.match(sid):
        raise BadRequest(400, "invalid session id: 1-128 letters, digits, '.', '_' or '-', "
                              "starting with a letter or digit")
    return str(sid)


def _message_id(request: Request) -> str:
    mid = request.path_params["message_id"]
    if not _MESSAGE_ID.match(mid):
        raise BadRequest(400, "invalid message id: 1-128 letters, digits, '.', '_' or '-'")
    return str(mid)


async def _body(request: Request, limit: int = MAX_BODY) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise BadRequest(413, f"body larger than {limit} bytes")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise BadRequest(413, f"body larger than {limit} bytes")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest(400, "body is not valid JSON") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "body must be a JSON object")
    return data


def _field(data: dict[str, Any], name: str, kind: type, *, required: bool = True,
           choices: frozenset[str] | None = None) -> Any:
    if name not in data or data[name] is None:
        if required:
            raise BadRequest(400, f"missing field {name!r}")
        return None
    value = data[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadRequest(400, f"field {name!r} must be {kind.__name__}")
    if isinstance(value, str) and name == "text" and not value.strip():
        raise BadRequest(400, "field 'text' must not be empty")
    if choices is not None and value not in choices:
        raise BadRequest(400, f"unknown {name} {value!r}; use one of {sorted(choices)}")
    return value


def _content(data: dict[str, Any]) -> str | list[Part]:
    """A message's ``text``, or its ``parts`` (images and files, bytes in base64) after the
    ``text`` when both are given."""
    raw = data.get("parts")
    text = _field(data, "text", str, required=raw is None)
    if text is not None and len(text.encode("utf-8", "surrogatepass")) > MAX_BODY:
        raise BadRequest(413, f"field 'text' larger than {MAX_BODY} bytes")
    if raw is None:
        return str(text)
    parts = list(parts_from_json(raw))
    return [TextPart(text), *parts] if text else parts


Handler = Callable[[Request], Awaitable[Response]]


def _json_errors(handler: Handler) -> Handler:
    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except BadRequest as exc:
            return _error(exc.status, str(exc))
        except (SessionBusyError, CheckpointError) as exc:
            return _error(409, str(exc))
        except LookupError as exc:
            return _error(404, str(exc.args[0]) if exc.args else "not found")
        except ValueError as exc:
            return _error(400, str(exc))
        except ConnectionError as exc:  # Redis, or the worker holding the session, is down
            return _error(503, str(exc))
        except NotImplementedError as exc:
            return _error(501, str(exc))

    return wrapped


def create_app(runner: SessionRunner, *, token: str | None = None,
               undo: UndoAPI | None = None, allowed_hosts: Sequence[str] = (),
               allowed_origins: Sequence[str] = (), extra_routes: Sequence[BaseRoute] = (),
               contexts: Sequence[AbstractAsyncContextManager[Any]] = (),
               public_paths: Sequence[str] = ()) -> Starlette:
    """The server's app: JSON API, SSE and the web page over ``runner``. ``token``: the bearer
    token every API request needs (None: only loopback host names are served, plus
    ``allowed_hosts``); ``allowed_origins``: other pages (``scheme://host[:port]``) that may
    call the API from a browser. With ``undo``, the undo endpoints (``/changes``, ``/undo``,
    ``/redo``) and ``restore_files`` on a hard abort. ``extra_routes`` (the protocol front
    ends, behind the same guard) and the ``contexts`` they need open while the app runs;
    ``public_paths``: more paths that need no token (A2A's agent card: discovery)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await runner.start()
        try:
            async with AsyncExitStack() as stack:
                for context in contexts:
                    await stack.enter_async_context(context)
                yield
        finally:
            await runner.aclose()

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        return _error(status, "not found" if status == 404 else
                      "method not allowed" if status == 405 else "error")

    streams = EventStreams()
    routes = [*_page_routes(), *_session_routes(runner, streams), *_message_routes(runner),
              *_control_routes(runner, undo), *_undo_routes(undo, _S),
              *request_routes(runner, _body, _json_errors), *extra_routes]
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(AccessGuard, token=token, public=(*_PUBLIC, *public_paths),
                                           hosts=allowed_hosts, origins=allowed_origins)],
                    exception_handlers={HTTPException: not_found})
    # The server ends the open event streams as it starts shutting down (``end_streams``).
    app.state.event_streams = streams
    return app


def end_streams(app: Starlette) -> None:
    """End the open event streams of an app made by ``create_app`` (and any opened later): call
    it as the ASGI server starts shutting down, on the loop's thread, else each open stream
    holds the shutdown until the server's graceful timeout (``steerable serve`` does it on
    Ctrl+C / SIGTERM)."""
    streams: EventStreams = app.state.event_streams
    streams.close()


_S = "/v1/sessions/{session_id}"


def _page_routes() -> list[Route]:
    """The web page's three files (public: they hold no data) and the health check."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def page(request: Request) -> Response:
        return _asset("index.html", "text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _STATIC:
            raise HTTPException(404)
        return _asset(name, _STATIC[name] + "; charset=utf-8")

    async def favicon(request: Request) -> Response:
        return _asset("favicon.svg", "image/svg+xml")

    return [Route("/", page), Route("/static/{name}", static), Route("/favicon.svg", favicon),
            Route("/healthz", healthz)]


def _session_routes(runner: SessionRunner, streams: EventStreams) -> list[Route]:
    """Sessions: list, read, delete, follow their events (SSE)."""

    async def list_sessions(request: Request) -> Response:
        return JSONResponse({"sessions": await runner.list_sessions()})

    async def get_session(request: Request) -> Response:
        return JSONResponse(await runner.get_session(_session_id(request)))

    async def delete_session(request: Request) -> Response:
        await runner.delete_session(_session_id(request))
        return JSONResponse({"ok": True})

    async def events(request: Request) -> Response:
        sid = _session_id(request)
        raw = request.headers.get("last-event-id") or request.query_params.get("after")
        after: int | None = None
        if raw is not None:
            if not raw.isdigit():
                raise BadRequest(400, "Last-Event-ID must be an event seq (an integer)")
            after = int(raw)
        # The local runner's hub writes the connection itself, the bytes of a wake-up made
        # once for every client (see server/_sse.py); the response's end detaches the client.
        return EventStream(runner.sse(sid, after), streams, ping=15)

    return [Route("/v1/sessions", _json_errors(list_sessions)),
            Route(_S, _json_errors(get_session), methods=["GET"]),
            Route(_S, _json_errors(delete_session), methods=["DELETE"]),
            Route(_S + "/events", _json_errors(events))]


def _message_routes(runner: SessionRunner) -> list[Route]:
    """Messages (SPEC 10): give one (each answer names its ``message_id``), list what waits,
    withdraw or edit a message while it waits."""

    async def post_message(request: Request) -> Response:
        sid = _session_id(request)
        data = await _body(request, MAX_MESSAGE_BODY)
        text = _content(data)
        policy = _field(data, "policy", str, required=False, choices=BUSY_POLICIES)
        discard = _field(data, "discard_pending", bool, required=False) or False
        sent = await runner.send(sid, text, policy, discard_pending=discard)
        return JSONResponse(sent.json(), status_code=202)

    async def steer(request: Request) -> Response:
        sid = _session_id(request)
        text = _field(await _body(request), "text", str)
        return JSONResponse((await runner.steer(sid, text)).json())

    async def follow_up(request: Request) -> Response:
        sid = _session_id(request)
        text = _field(await _body(request), "text", str)
        return JSONResponse((await runner.follow_up(sid, text)).json())

    async def queue(request: Request) -> Response:
        return JSONResponse({"messages": await runner.queue(_session_id(request))})

    async def revoke(request: Request) -> Response:
        return JSONResponse({"ok": await runner.revoke(_message_id(request))})

    async def edit(request: Request) -> Response:
        mid = _message_id(request)
        text = _field(await _body(request), "text", str)
        return JSONResponse({"ok": await runner.edit(mid, text)})

    return [Route(_S + "/messages", _json_errors(post_message), methods=["POST"]),
            Route(_S + "/steer", _json_errors(steer), methods=["POST"]),
            Route(_S + "/follow_up", _json_errors(follow_up), methods=["POST"]),
            Route(_S + "/queue", _json_errors(queue), methods=["GET"]),
            Route("/v1/messages/{message_id}", _json_errors(revoke), methods=["DELETE"]),
            Route("/v1/messages/{message_id}", _json_errors(edit), methods=["PATCH"])]


def _control_routes(runner: SessionRunner, undo: UndoAPI | None) -> list[Route]:
    """Interrupt (a hard one may restore the files, with ``undo``), cancel, answer an
    approval; resume or discard a pending turn."""

    async def interrupt(request: Request) -> Response:
        sid = _session_id(request)
        data = await _body(request)
        mode = _field(data, "mode", str, choices=frozenset({"graceful", "hard"}))
        restore = _restore_files(undo, data, mode, sid)
        ok = await runner.interrupt(sid, mode)
        if restore is not None and not ok:
            restore.cancel_restore(sid)
        return JSONResponse({"ok": ok})

    async def cancel(request: Request) -> Response:
        sid = _session_id(request)
        modes = frozenset({"immediate", "after_model", "after_tools"})
        mode = _field(await _body(request), "mode", str, choices=modes)
        return JSONResponse({"ok": await runner.cancel(sid, mode)})

    async def approval(request: Request) -> Response:
        rid = request.path_params["request_id"]
        if len(rid) > 200:
            raise BadRequest(400, "request id too long")
        data = await _body(request)
        approved = _field(data, "approved", bool)
        reason = _field(data, "reason", str, required=False) or ""
        return JSONResponse({"ok": await runner.resolve_approval(rid, approved, reason)})

    async def resume(request: Request) -> Response:
        sent = await runner.resume(_session_id(request))
        return JSONResponse(sent.json(), status_code=202)

    async def discard_pending(request: Request) -> Response:
        await runner.discard_pending(_session_id(request))
        return JSONResponse({"ok": True})

    return [Route(_S + "/interrupt", _json_errors(interrupt), methods=["POST"]),
            Route(_S + "/cancel", _json_errors(cancel), methods=["POST"]),
            Route("/v1/approvals/{request_id}", _json_errors(approval), methods=["POST"]),
            Route(_S + "/resume", _json_errors(resume), methods=["POST"]),
            Route(_S + "/pending_turn", _json_errors(discard_pending), methods=["DELETE"])]


def _restore_files(undo: UndoAPI | None, data: dict[str, Any], mode: str,
                   sid: str) -> UndoAPI | None:
    """A hard abort's ``restore_files``: arm it before the abort (its turn may end at once)."""
    if not _field(data, "restore_files", bool, required=False):
        return None
    if undo is None:
        raise BadRequest(400, "restore_files needs undo, which is off on this server")
    if mode != "hard":
        raise BadRequest(400, "restore_files goes with mode 'hard'")
    undo.restore_when_aborted(sid)
    return undo


def _undo_routes(undo: UndoAPI | None, prefix: str) -> list[Route]:
    """``/changes``, ``/undo`` and ``/redo`` under ``prefix`` (404 when undo is off)."""

    def api() -> UndoAPI:
        if undo is None:
            raise BadRequest(404, "undo is off on this server")
        return undo

    async def changes(request: Request) -> Response:
        status, body = await api().changes(_session_id(request))
        return JSONResponse(body, status_code=status)

    async def undo_changes(request: Request) -> Response:
        sid = _session_id(request)
        data = await _body(request)
        status, body = await api().undo(
            sid, _field(data, "turn_id", str, required=False),
            _field(data, "n", int, required=False),
            bool(_field(data, "force", bool, required=False)))
        return JSONResponse(body, status_code=status)

    async def redo_changes(request: Request) -> Response:
        sid = _session_id(request)
        force = bool(_field(await _body(request), "force", bool, required=False))
        status, body = await api().redo(sid, force)
        return JSONResponse(body, status_code=status)

    return [Route(prefix + "/changes", _json_errors(changes), methods=["GET"]),
            Route(prefix + "/undo", _json_errors(undo_changes), methods=["POST"]),
            Route(prefix + "/redo", _json_errors(redo_changes), methods=["POST"])]


_ASSETS: dict[str, bytes] = {}


def _asset(name: str, media_type: str) -> Response:
    body = _ASSETS.get(name)
    if body is None:
        body = _ASSETS[name] = resources.files("steerable.server").joinpath(
            "static", name).read_bytes()
    return Response(body, media_type=media_type, headers={
        "Cache-Control": "no-cache",
        "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                                   "style-src 'self'; script-src 'self'; connect-src 'self'; "
                                   "frame-ancestors 'none'",
        "X-Content-Type-Options": "nosniff"})
