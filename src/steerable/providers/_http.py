"""The HTTP stack shared by the OpenAI-compatible and Anthropic providers.

httpx gives one async client with connection pooling and separate connect/read timeouts;
httpx-sse parses the event stream. This module opens a streamed POST, turns every way it can go
wrong into one of steerable's provider errors with a message saying what to fix, and yields the
server-sent events under an overall deadline. Closing the iterator closes the response, and with
it the connection, at once (a hard abort must not leave a request running on the server).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import EventSource, ServerSentEvent

from steerable.errors import (
    ConfigurationError,
    ContextOverflowError,
    FatalProviderError,
    ProviderError,
    RetryableProviderError,
)
from steerable.providers._retry import parse_retry_after
from steerable.providers._timeouts import ProviderTimeouts

__all__ = [
    "ApiTarget",
    "check_base_url",
    "classify_error",
    "is_context_overflow",
    "make_client",
    "parse_event",
    "stream_error",
    "stream_events",
]

# Phrases the APIs use for "the prompt does not fit": OpenAI's code and message, Anthropic's
# message, and those of the OpenAI-compatible servers people run locally (llama.cpp, vLLM).
_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context length|context window"
    r"|prompt is too long|too many tokens|exceeds? the available context"
    r"|reduce the length of the (?:messages|prompt)",
    re.IGNORECASE,
)
_BODY_PREVIEW = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiTarget:
    """What an error message needs to say what to fix."""

    api: str
    """"OpenAI-compatible" or "Anthropic"."""
    url: str
    model: str
    key_hint: str
    """How the key is given, e.g. "OPENAI_API_KEY or api_key="."""


def check_base_url(base_url: str) -> str:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"base_url must be an http(s) URL such as http://localhost:11434/v1, got {base_url!r}"
        )
    return base_url.rstrip("/")


def make_client(timeouts: ProviderTimeouts) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=timeouts.connect, read=timeouts.read,
                              write=timeouts.connect, pool=timeouts.connect),
        follow_redirects=False,
    )


def is_context_overflow(message: str, code: str | None = None) -> bool:
    return code == "context_length_exceeded" or bool(_OVERFLOW.search(message))


def _server_message(body: str) -> tuple[str, str | None]:
    """The human part of an error body and its code, for both APIs' JSON error shapes."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:_BODY_PREVIEW], None
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or json.dumps(error)[:_BODY_PREVIEW]
        code = error.get("code") or error.get("type")
        return str(message), None if code is None else str(code)
    if isinstance(error, str):
        return error, None
    return body.strip()[:_BODY_PREVIEW], None


def _looks_like_html(content_type: str, body: str) -> bool:
    head = body.lstrip()[:100].lower()
    return "html" in content_type or head.startswith(("<!doctype", "<html"))


def classify_error(
    target: ApiTarget, status: int, body: str, headers: Mapping[str, str]
) -> ProviderError:
    """The error to raise for an HTTP error response: what went wrong and what to do."""
    content_type = headers.get("content-type", "")
    if _looks_like_html(content_type, body):
        text = (f"{target.api} server at {target.url} answered {status} with an HTML page, not "
                f"an API error: check base_url (OpenAI-compatible servers usually end in /v1)")
        if status >= 500:
            return RetryableProviderError(text)
        return FatalProviderError(text, status=status)
    message, code = _server_message(body)
    said = f" ({message})" if message else ""
    if status in (400, 413, 422) and is_context_overflow(message, code):
        return ContextOverflowError(f"the conversation is longer than {target.model}'s context "
                                    f"window{said}")
    if status == 401:
        return FatalProviderError(
            f"the {target.api} API key was rejected (401){said}: check {target.key_hint}",
            status=status)
    if status == 403:
        return FatalProviderError(
            f"access denied (403){said}: the key may lack access to model {target.model!r}",
            status=status)
    if status == 404:
        return FatalProviderError(
            f"not found (404) at {target.url}{said}: check the model name {target.model!r} and "
            f"the base URL", status=status)
    if status in (408, 409, 429) or status >= 500:
        retry_after = parse_retry_after(headers.get("retry-after"))
        what = "rate limited" if status == 429 else f"server error {status}"
        return RetryableProviderError(f"{target.api} {what}{said}", retry_after=retry_after)
    return FatalProviderError(f"{target.api} request refused ({status}){said}", status=status)


def stream_error(target: ApiTarget, message: str, code: str | None) -> ProviderError:
    """An error the server reported inside the event stream (after a 200)."""
    if is_context_overflow(message, code):
        return ContextOverflowError(f"the conversation is longer than {target.model}'s context "
                                    f"window ({message})")
    if code in ("overloaded_error", "rate_limit_error", "api_error", "server_error"):
        return RetryableProviderError(f"{target.api} server reported {code}: {message}")
    return ProviderError(f"{target.api} server reported an error"
                         f"{f' ({code})' if code else ''}: {message}")


async def _open(
    client: httpx.AsyncClient, target: ApiTarget, headers: Mapping[str, str],
    body: Mapping[str, Any],
) -> httpx.Response:
    request = client.build_request("POST", target.url, headers=dict(headers), json=body)
    try:
        response = await client.send(request, stream=True)
    except httpx.ConnectError as exc:
        raise RetryableProviderError(
            f"cannot reach {target.url} ({exc or type(exc).__name__}): is the server running "
            f"and the base URL right?") from None
    except httpx.TimeoutException as exc:
        raise RetryableProviderError(
            f"{target.api} server at {target.url} did not answer in time "
            f"({type(exc).__name__})") from None
    except httpx.TransportError as exc:
        raise RetryableProviderError(f"connection to {target.url} failed: {exc!r}") from None
    return response


async def _reject(response: httpx.Response, target: ApiTarget) -> ProviderError:
    try:
        raw = await response.aread()
        body = raw[:65536].decode("utf-8", "replace")
    except httpx.HTTPError:
        body = ""
    if response.status_code >= 400:
        return classify_error(target, response.status_code, body, response.headers)
    kind = response.headers.get("content-type", "no content type")
    if _looks_like_html(kind, body):
        return FatalProviderError(
            f"{target.url} answered with an HTML page instead of an event stream: check base_url "
            f"(OpenAI-compatible servers usually end in /v1)", status=response.status_code)
    return ProviderError(
        f"{target.url} answered {response.status_code} with {kind!r} instead of an event "
        f"stream: {body.strip()[:_BODY_PREVIEW]!r}")


async def stream_events(
    client: httpx.AsyncClient, target: ApiTarget, headers: Mapping[str, str],
    body: Mapping[str, Any], timeouts: ProviderTimeouts,
) -> AsyncGenerator[ServerSentEvent, None]:
    """POST ``body`` and yield the server-sent events of the reply.

    Transport failures become ``RetryableProviderError`` (the retry layer decides whether a
    retry is still allowed), overrunning ``timeouts.total`` a ``ProviderError``.
    """
    loop = asyncio.get_running_loop()
    total = timeouts.total
    deadline = None if total is None else loop.time() + total
    overrun = ProviderError(
        f"{target.api} reply did not complete within the total timeout ({total or 0:g} s)")
    # Every wait below is bounded by the deadline, not only by httpx's read timeout: a server
    # trickling a byte at a time (headers, an error body or an event that never ends) resets
    # the read timeout forever but not this.
    try:
        async with asyncio.timeout_at(deadline):
            response = await _open(client, target, headers, body)
    except TimeoutError:
        raise overrun from None
    try:
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200 or "text/event-stream" not in content_type:
            try:
                async with asyncio.timeout_at(deadline):
                    error = await _reject(response, target)
            except TimeoutError:
                raise overrun from None
            raise error
        async with aclosing(EventSource(response).aiter_sse()) as events:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise overrun from None
                except httpx.TimeoutException:
                    raise RetryableProviderError(
                        f"{target.api} server went silent mid-reply (read timeout)") from None
                except httpx.TransportError as exc:
                    raise RetryableProviderError(
                        f"the connection was cut mid-stream ({exc or type(exc).__name__})"
                    ) from None
                yield event
    finally:
        await response.aclose()


def parse_event(target: ApiTarget, event: ServerSentEvent) -> Any:
    try:
        return json.loads(event.data)
    except ValueError:
        raise ProviderError(
            f"{target.api} server sent an event that is not valid JSON: "
            f"{event.data[:_BODY_PREVIEW]!r}") from None
