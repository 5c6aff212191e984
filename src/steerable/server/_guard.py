"""Who may talk to the server: the bearer token, the Host name, the Origin, the fetch site.

A server on loopback without a token trusts whoever can reach it, and a web page can reach it
in two ways that this guard closes. A page of another site posts to ``127.0.0.1`` directly: its
``Origin`` (or ``Sec-Fetch-Site``) says so. Or a page re-points its own host name at
``127.0.0.1`` after loading (DNS rebinding): the browser then sends the attacker's name as both
``Host`` and ``Origin``, which agree, so the same-origin test alone passes. Like Jupyter
Server, a server without a token therefore serves only requests whose ``Host`` is a loopback
name (``localhost``, a loopback address) or one it was told to accept, and on top of that an
``Origin``, whenever a browser sends one, must be in an allow list: the same origin as the
request on an accepted host, or one configured. Every other request gets a 403 and changes
nothing. The page's own files pass the Host check too: a rebound page must not even load them.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["AccessGuard", "is_loopback_name"]

_CHANGES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback_name(host: str) -> bool:
    """``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``), brackets allowed."""
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split_host(value: str, scheme: str) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` header or an origin's authority; None when malformed."""
    try:
        parts = urlsplit(f"{scheme}://{value}")
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return name.rstrip("."), port if port is not None else _DEFAULT_PORTS.get(scheme, 0)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class AccessGuard:
    """ASGI middleware applying the checks above to every HTTP request, in this order: the
    token (when set), the Host name (when no token is set), the Origin, the fetch site.

    ``public`` paths (the page's own files) need no token. ``hosts`` are extra host names to
    accept without a token (a name in ``/etc/hosts`` for this machine); ``origins`` extra
    origins (``scheme://host[:port]``) whose pages may call the API."""

    def __init__(self, app: ASGIApp, *, token: str | None, public: Iterable[str] = (),
                 hosts: Iterable[str] = (), origins: Iterable[str] = ()) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.public = frozenset(public)
        self.hosts = frozenset(h.rstrip(".").lower() for h in hosts)
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refuse(Request(scope))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refuse(self, request: Request) -> Response | None:
        """The answer refusing ``request``, or None to let it through."""
        if self.token is not None and request.url.path not in self.public:
            scheme, _, value = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(),
                                                                     self.token):
                return _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})
        scheme = request.url.scheme
        host = _split_host(request.headers.get("host", ""), scheme)
        if host is None:
            return _error(400, "missing or malformed Host header")
        if self.token is None and not self._accepted_name(host[0]):
            return _error(403, f"Host {host[0]!r} is not a loopback name of this server (a "
                               "server without a token answers only localhost and loopback "
                               "addresses: start it with --allow-host NAME, or set a token)")
        origin = request.headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, scheme, host):
            return _error(403, "cross-site request refused (Origin is not this server)")
        site = request.headers.get("sec-fetch-site", "same-origin")
        if request.method in _CHANGES and site not in ("same-origin", "none"):
            return _error(403, "cross-site request refused (Sec-Fetch-Site says another site)")
        return None

    def _accepted_name(self, name: str) -> bool:
        return is_loopback_name(name) or name.lower() in self.hosts

    def _origin_allowed(self, origin: str, scheme: str, host: tuple[str, int]) -> bool:
        if origin.rstrip("/").lower() in self.origins:
            return True
        origin_scheme, sep, authority = origin.partition("://")
        if not sep or origin_scheme.lower() != scheme:
            return False  # "null" (a sandboxed frame, a file), or another scheme
        parsed = _split_host(authority, scheme)
        # The page that sends it was loaded from this very origin, under a name accepted above.
        return parsed is not None and parsed[0].lower() == host[0].lower() \
            and parsed[1] == host[1]
