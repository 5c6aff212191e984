"""``FallbackProvider``: try the next provider when one fails in a way retrying cannot fix.

Each provider keeps its own retry policy; the fallback acts only on what is left after it: a
``RetryableProviderError`` that outlived its retries (rate limited, 5xx, connection refused or
cut, timeouts), and a ``ContextOverflowError`` when a later provider is known to take a longer
context. The switch is told to the loop as a ``RetryNotice`` (so it becomes an ``LLM_RETRY``
event naming both providers).

Once a provider has streamed any part of its reply, its failure is final: the loop has shown
that part to the user, and another model would write a different reply after it. The error
goes up unchanged and the turn ends as it would without a fallback. Pieces of tool arguments
alone do not count (as for retries): the switch's ``RetryNotice`` voids them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from steerable.errors import ConfigurationError, ContextOverflowError, RetryableProviderError
from steerable.providers._base import Chunk, LLMRequest, Provider, RetryNotice, ToolArgsDelta

__all__ = ["FallbackProvider"]


def provider_label(provider: object) -> str:
    """A short name for a provider in messages: its class and, when it has one, its model."""
    model = getattr(provider, "model", None)
    name = type(provider).__name__
    return f"{name} ({model})" if isinstance(model, str) and model else name


class FallbackProvider:
    """Providers in order of preference: each request goes to the first, and moves on to the
    next when one fails with an error retries cannot fix (see the module's docstring).

    ``context_windows`` (tokens, one per provider, None where unknown) lets a context overflow
    move on to the first later provider with a longer window; without both windows known, an
    overflow is raised as it is (the loop then compresses the history and tries again). A
    request names its ``model`` for the first provider only: later ones use their own.
    """

    def __init__(self, providers: Sequence[Provider], *,
                 context_windows: Sequence[int | None] | None = None) -> None:
        providers = tuple(providers)
        if not providers:
            raise ConfigurationError("FallbackProvider needs at least one provider")
        for p in providers:
            if not callable(getattr(p, "stream", None)) or not callable(getattr(p, "aclose", None)):
                raise ConfigurationError(
                    f"FallbackProvider: {p!r} is not a provider (no stream()/aclose())")
        windows = tuple(context_windows) if context_windows is not None else (None,) * len(providers)
        if len(windows) != len(providers):
            raise ConfigurationError(
                f"FallbackProvider: {len(windows)} context windows for {len(providers)} providers")
        for w in windows:
            if w is not None and (isinstance(w, bool) or not isinstance(w, int) or w <= 0):
                raise ConfigurationError(
                    f"FallbackProvider: a context window is a positive int or None, got {w!r}")
        self.providers: tuple[Provider, ...] = providers
        self.context_windows: tuple[int | None, ...] = windows

    def __repr__(self) -> str:
        return f"<FallbackProvider {' -> '.join(map(provider_label, self.providers))}>"

    def _next_after(self, index: int, error: Exception) -> int | None:
        """The provider to try after ``providers[index]`` failed with ``error``, if any."""
        if isinstance(error, ContextOverflowError):
            failed = self.context_windows[index]
            if failed is None:
                return None
            for j in range(index + 1, len(self.providers)):
                window = self.context_windows[j]
                if window is not None and window > failed:
                    return j
            return None
        return index + 1 if index + 1 < len(self.providers) else None

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        attempt, index = 1, 0
        while True:
            provider = self.providers[index]
            sent = request if index == 0 or request.model is None else LLMRequest(
                messages=request.messages, tools=request.tools, params=request.params)
            streamed = False
            try:
                async with aclosing(provider.stream(sent)) as chunks:
                    async for chunk in chunks:
                        if type(chunk) is RetryNotice:  # numbered across all the providers
                            attempt += 1
                            yield RetryNotice(attempt, chunk.reason, chunk.delay)
                            continue
                        streamed = streamed or type(chunk) is not ToolArgsDelta
                        yield chunk
                return
            except (RetryableProviderError, ContextOverflowError) as exc:
                following = None if streamed else self._next_after(index, exc)
                if following is None:
                    raise
                attempt += 1
                reason = (f"falling back to {provider_label(self.providers[following])}: "
                          f"{provider_label(provider)} failed ({exc})")
                index = following
            yield RetryNotice(attempt, reason, 0.0)

    async def aclose(self) -> None:
        """Close every provider (each, even when one fails to close; the first error is
        raised once all were tried)."""
        failure: BaseException | None = None
        for p in self.providers:
            try:
                await p.aclose()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
