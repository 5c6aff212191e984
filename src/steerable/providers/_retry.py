"""The retry policy shared by the HTTP providers: bounded exponential backoff with full jitter.

A failed attempt is retried only when it failed before anything reached the caller: once a
text delta has been yielded, the loop has shown it to the user, and starting over would show
it twice. Pieces of tool arguments (``ToolArgsDelta``) do not count: they show progress, not
the reply, and the ``RetryNotice`` tells everyone who saw them that they are void. ``RetryNotice`` is yielded before each wait, so the loop can report ``LLM_RETRY`` with
the delay it is about to sleep. The server's ``Retry-After`` is honoured (never retry sooner);
when it asks for more than the policy allows, the attempt fails at once instead of waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import field
from typing import TYPE_CHECKING

from steerable._records import Record, record
from steerable.errors import ProviderError, RetryableProviderError
from steerable.providers._base import Chunk, RetryNotice, ToolArgsDelta

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["RetryPolicy", "parse_retry_after", "with_retries"]


def _uniform() -> float:
    """A uniform draw in [0, 1) for the jitter (random is imported on the first retry)."""
    import random

    return random.random()


@record
class RetryPolicy(Record):
    """How often and how long to retry a transient failure (429, 5xx, dropped connection).

    ``max_attempts`` counts the first attempt; ``max_total`` bounds the whole call, waits
    included, in seconds. The delay before retry ``n`` (1-based) is uniform in
    ``[0, min(max_delay, base_delay * 2 ** (n - 1))]`` ("full jitter": clients that failed
    together do not come back together), raised to ``Retry-After`` when the server sent one.
    ``sleep`` and ``random`` are injectable so tests run without real waits.
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    max_total: float = 120.0
    sleep: Callable[[float], Awaitable[None]] = field(default=asyncio.sleep, compare=False)
    random: Callable[[], float] = field(default=_uniform, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) or (
            self.max_attempts < 1
        ):
            raise ValueError(f"RetryPolicy.max_attempts must be an int >= 1, got {self.max_attempts!r}")
        for name in ("base_delay", "max_delay", "max_total"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"RetryPolicy.{name} must be a number >= 0, got {value!r}")

    def delay(self, retry: int, retry_after: float | None) -> float | None:
        """Seconds to wait before retry number ``retry`` (1 for the first), or None to give up
        because the server asked for a longer wait than ``max_delay``."""
        if retry_after is not None and retry_after > self.max_delay:
            return None
        cap = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        jittered = cap * self.random()
        return max(jittered, retry_after or 0.0)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date; None if absent or bad."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        # Imported here: email.utils and datetime cost ~5 ms at import, and HTTP dates are rare.
        from datetime import UTC, datetime
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # HTTP dates are GMT; a naive parse means the zone was absent
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


async def with_retries(
    policy: RetryPolicy,
    attempt: Callable[[], AsyncGenerator[Chunk, None]],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncGenerator[Chunk, None]:
    """Run ``attempt()`` until it completes, retrying ``RetryableProviderError`` per ``policy``.

    Raises ``RetryableProviderError`` when attempts or time run out, and ``ProviderError`` when
    a transient failure hits after part of the reply was already yielded.
    """
    started = clock()
    number = 1
    while True:
        streamed = False
        try:
            async with aclosing(attempt()) as chunks:
                async for chunk in chunks:
                    streamed = streamed or type(chunk) is not ToolArgsDelta
                    yield chunk
            return
        except RetryableProviderError as exc:
            if streamed:
                raise ProviderError(
                    f"{exc} (part of the reply had already arrived, so it was not retried)"
                ) from exc
            delay = policy.delay(number, exc.retry_after)
            if delay is None:
                raise RetryableProviderError(
                    f"{exc}; the server asks to wait {exc.retry_after:.0f} s, more than the "
                    f"retry policy allows ({policy.max_delay:g} s)", retry_after=exc.retry_after,
                ) from exc
            if number >= policy.max_attempts or clock() - started + delay > policy.max_total:
                raise RetryableProviderError(
                    f"{exc} (gave up after {number} attempt{'s' if number > 1 else ''})",
                    retry_after=exc.retry_after,
                ) from exc
            number += 1
            yield RetryNotice(number, str(exc), delay)
            await policy.sleep(delay)
