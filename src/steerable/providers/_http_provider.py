"""What the HTTP providers share: retries around one streamed attempt, and one client.

A subclass implements ``_attempt(request)``, an async generator for a single try; ``stream``
wraps it in the retry policy, and the httpx client is made on first use (so building a provider
costs nothing and opens no connection) and closed by ``aclose``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from functools import partial

import httpx

from steerable._secrets import Redactor, remember_secret
from steerable.errors import ProviderError
from steerable.providers._base import Chunk, LLMRequest
from steerable.providers._http import make_client
from steerable.providers._retry import RetryPolicy, with_retries
from steerable.providers._timeouts import ProviderTimeouts

__all__ = ["HttpProvider"]


class HttpProvider:
    _api_key: str | None = None
    """Set by the subclass; blanked in every error message."""

    def __init__(self, timeouts: ProviderTimeouts | None, retry: RetryPolicy | None) -> None:
        self.timeouts = timeouts or ProviderTimeouts()
        self.retry = retry or RetryPolicy()
        self._client: httpx.AsyncClient | None = None

    def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        remember_secret(self._api_key)  # a key given in code is blanked in every output too
        return with_retries(self.retry, partial(self._redacted_attempt, request))

    async def _redacted_attempt(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        # A server may echo the key back in an error body ("Incorrect API key provided:
        # sk-..."): blank it (and anything shaped like a credential) before the error reaches
        # retry notices, events, the recorder, the CLI or a traceback.
        try:
            async for chunk in self._attempt(request):
                yield chunk
        except ProviderError as exc:
            redact = Redactor(extra=[self._api_key])
            exc.args = tuple(redact(a) if isinstance(a, str) else a for a in exc.args)
            raise

    def _attempt(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        raise NotImplementedError

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = make_client(self.timeouts)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
