"""The retry policy on its own: delays, Retry-After, when it gives up, what it never retries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from steerable.errors import ProviderError, RetryableProviderError
from steerable.providers._base import Chunk, RetryNotice, StreamEnd, TextDelta
from steerable.providers._retry import RetryPolicy, parse_retry_after, with_retries


def test_parse_retry_after_seconds_and_http_date():
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("-3") == 0.0


def test_full_jitter_delays_grow_and_are_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=3.0, random=lambda: 1.0)
    assert [policy.delay(n, None) for n in (1, 2, 3, 4)] == [1.0, 2.0, 3.0, 3.0]
    assert RetryPolicy(random=lambda: 0.0).delay(3, None) == 0.0


def test_retry_after_is_a_floor_and_too_long_means_give_up():
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0, random=lambda: 0.0)
    assert policy.delay(1, 4.0) == 4.0
    assert policy.delay(1, 11.0) is None


@pytest.mark.parametrize("bad", [{"max_attempts": 0}, {"base_delay": -1}, {"max_total": "x"}])
def test_policy_validates(bad):
    with pytest.raises(ValueError, match="RetryPolicy"):
        RetryPolicy(**bad)


class Attempts:
    """Scripted attempts: each is a list of chunks, optionally ending in an exception."""

    def __init__(self, *script: list) -> None:
        self.script = list(script)
        self.started = 0

    async def __call__(self) -> AsyncIterator[Chunk]:
        self.started += 1
        for item in self.script.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield item


async def collect(policy: RetryPolicy, attempts: Attempts, clock=None) -> list[Chunk]:
    kwargs = {"clock": clock} if clock else {}
    return [c async for c in with_retries(policy, attempts, **kwargs)]


async def no_sleep(delay: float) -> None:
    return None


async def test_notices_number_attempts_and_carry_reason_and_delay():
    attempts = Attempts([RetryableProviderError("busy", retry_after=2.0)],
                        [RetryableProviderError("busy again")],
                        [TextDelta("ok"), StreamEnd()])
    policy = RetryPolicy(base_delay=1.0, random=lambda: 0.5, sleep=no_sleep)
    chunks = await collect(policy, attempts)
    assert chunks == [RetryNotice(2, "busy", 2.0), RetryNotice(3, "busy again", 1.0),
                      TextDelta("ok"), StreamEnd()]


async def test_gives_up_after_max_attempts():
    attempts = Attempts(*[[RetryableProviderError("down")] for _ in range(2)])
    with pytest.raises(RetryableProviderError, match=r"down \(gave up after 2 attempts\)"):
        await collect(RetryPolicy(max_attempts=2, sleep=no_sleep), attempts)
    assert attempts.started == 2


async def test_gives_up_when_the_next_wait_would_pass_max_total():
    now = [0.0]
    attempts = Attempts([RetryableProviderError("down", retry_after=5.0)])
    policy = RetryPolicy(max_total=4.0, sleep=no_sleep)
    with pytest.raises(RetryableProviderError, match="gave up after 1 attempt"):
        await collect(policy, attempts, clock=lambda: now[0])


async def test_retry_after_beyond_max_delay_fails_at_once_saying_so():
    attempts = Attempts([RetryableProviderError("rate limited", retry_after=90.0)])
    with pytest.raises(RetryableProviderError, match="asks to wait 90 s"):
        await collect(RetryPolicy(max_delay=20.0, sleep=no_sleep), attempts)


async def test_no_retry_once_something_was_yielded():
    attempts = Attempts([TextDelta("par"), RetryableProviderError("cut")], [TextDelta("x")])
    got: list[Chunk] = []
    with pytest.raises(ProviderError, match="not retried") as info:
        async for chunk in with_retries(RetryPolicy(sleep=no_sleep), attempts):
            got.append(chunk)
    assert type(info.value) is ProviderError
    assert got == [TextDelta("par")] and attempts.started == 1


async def test_other_errors_pass_through_untouched():
    boom = ProviderError("bad chunk")
    attempts = Attempts([boom])
    with pytest.raises(ProviderError) as info:
        await collect(RetryPolicy(sleep=no_sleep), attempts)
    assert info.value is boom and attempts.started == 1
