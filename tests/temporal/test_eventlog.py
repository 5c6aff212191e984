"""The event stream's high-water mark: however a workflow's events are replayed (a worker
that died after publishing part of them, one that replays a whole history), each numbered event
reaches the stream once and in order, and every live event of an activity is kept."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable.temporal import EventLog

# A publication: the worker that runs the workflow emits events 1..n in order; a worker that
# dies stops somewhere, and the next one starts again from 1 (it replays the history).
runs = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=5)
live = st.lists(st.integers(min_value=1, max_value=12), max_size=6)


async def _publish(url: str, session: str, stops: list[int], deltas: list[int]) -> list[Any]:
    log = EventLog(url)
    try:
        for stop in stops:
            for n in range(1, stop + 1):
                await log.append(session, [(n, {"kind": "turn_start", "seq": n})])
                if n in deltas:  # an activity streaming right after event n
                    await log.append(session, [(0, {"kind": "llm_delta", "seq": n})])
        return [e async for e in _read(log, session)]
    finally:
        await log.aclose()


async def _read(log: EventLog, session: str) -> Any:
    last = await log.last_id(session)
    if last is None:
        return
    async for entry_id, event in log.follow(session):
        yield event
        if entry_id == last:
            return


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(stops=runs, deltas=live)
def test_each_numbered_event_reaches_the_stream_once(events_url: str, stops: list[int],
                                                     deltas: list[int]) -> None:
    session = f"h{abs(hash((tuple(stops), tuple(deltas))))}"
    got = asyncio.run(_publish(events_url, session, stops, deltas))
    numbered = [e["seq"] for e in got if e["kind"] == "turn_start"]
    assert numbered == list(range(1, max(stops) + 1))
    expected_live = sum(1 for stop in stops for n in range(1, stop + 1) if n in deltas)
    assert sum(e["kind"] == "llm_delta" for e in got) == expected_live


async def test_an_approval_names_its_session_until_it_is_resolved(events_url: str) -> None:
    log = EventLog(events_url)
    try:
        await log.append("s1", [(1, {"kind": "approval_requested", "request_id": "r1"})])
        assert await log.request_session("r1") == "s1"
        await log.append("s1", [(1, {"kind": "approval_requested", "request_id": "r1"})])
        await log.append("s1", [(2, {"kind": "approval_resolved", "request_id": "r1"})])
        assert await log.request_session("r1") is None
        # A replay of the request (number 1, under the mark) opens nothing again.
        await log.append("s1", [(1, {"kind": "approval_requested", "request_id": "r1"})])
        assert await log.request_session("r1") is None
    finally:
        await log.aclose()
