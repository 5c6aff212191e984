"""AG-UI at ``POST /v1/agui`` on a real ``steerable serve``: every event on the wire is parsed
with the ``ag_ui.core`` models; a turn with thinking, a tool and text; an approval as the
interrupt outcome that the next run resumes, with a steer echoed as a CUSTOM event; a cancel;
sub-turns as steps; bad input refused."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest

pytest.importorskip("ag_ui.core", reason="the agui extra is not installed")

import httpx
from ag_ui.core import Event, EventType, RunAgentInput, UserMessage
from pydantic import TypeAdapter

from tests.protocols._serving import served  # noqa: F401 (fixture)

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def run_input(thread: str, text: str | None = None, resume: list[dict[str, Any]] | None = None
              ) -> dict[str, Any]:
    run = RunAgentInput(thread_id=thread, run_id=str(uuid.uuid4()), state={}, tools=[],
                        context=[], forwarded_props={},
                        messages=[UserMessage(id="u1", role="user", content=text)] if text else [])
    body: dict[str, Any] = run.model_dump(by_alias=True, exclude_none=True)
    if resume is not None:
        body["resume"] = resume
    return body


async def stream(client: httpx.AsyncClient, body: dict[str, Any]) -> list[Any]:
    """The run's events, each validated by the package's models."""
    out = []
    async with client.stream("POST", "/v1/agui", json=body) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                out.append(EVENTS.validate_json(line[6:]))
    return out


def types(events: list[Any]) -> list[str]:
    return [e.type.value for e in events]


def shape(events: list[Any]) -> list[str]:
    """The types with repeats in a row (the deltas of one message) shown once."""
    out: list[str] = []
    for kind in types(events):
        if not out or out[-1] != kind:
            out.append(kind)
    return out


async def test_a_turn_with_thinking_a_tool_and_text(served: Any) -> None:  # noqa: F811
    url = served([{"thinking": "let me look", "tool_calls": [["read", {"path": "a.txt"}]]},
                  {"text": "it says hello"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        events = await stream(client, run_input("t1", "what does a.txt say?"))
    assert shape(events) == [
        "RUN_STARTED", "REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END", "REASONING_END", "TOOL_CALL_START", "TOOL_CALL_ARGS",
        "TOOL_CALL_END", "ACTIVITY_SNAPSHOT", "TOOL_CALL_RESULT", "ACTIVITY_DELTA",
        "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_FINISHED"]
    by_type = {e.type.value: e for e in reversed(events)}  # the first of each type
    start = by_type["TOOL_CALL_START"]
    thought = "".join(e.delta for e in events if e.type is EventType.REASONING_MESSAGE_CONTENT)
    assert thought == "let me look"
    assert start.tool_call_name == "read"
    assert json.loads(by_type["TOOL_CALL_ARGS"].delta) == {"path": "a.txt"}
    result = by_type["TOOL_CALL_RESULT"]
    assert "hello from disk" in result.content and result.tool_call_id == start.tool_call_id
    text = "".join(e.delta for e in events if e.type is EventType.TEXT_MESSAGE_CONTENT)
    assert text == "it says hello"
    assert events[-1].outcome.type == "success" and events[-1].result == "it says hello"
    assert events[0].thread_id == events[-1].thread_id == "t1"


async def test_an_approval_is_an_interrupt_the_next_run_resumes(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]},
                  {"text": "written"}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("t2", "write it"))
        assert types(first)[-1] == "RUN_FINISHED" and first[-1].outcome.type == "interrupt"
        [interrupt] = first[-1].outcome.interrupts
        assert interrupt.reason == "tool_approval" and interrupt.metadata["tool_name"] == "write"
        assert interrupt.tool_call_id == next(
            e.tool_call_id for e in first if e.type is EventType.TOOL_CALL_START)
        steered = await client.post("/v1/sessions/t2/steer", json={"text": "be brief"})
        # The turn still runs, waiting for the answer: the steer is queued for its next call.
        assert steered.json()["ok"] is True and steered.json()["state"] == "queued"
        second = await stream(client, run_input("t2", resume=[{
            "interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]))
        again = await client.post("/v1/agui", json=run_input("t2", resume=[{
            "interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]))
        assert again.status_code == 400  # answered once only
    assert [e.value for e in second if e.type is EventType.CUSTOM] == [{"text": "be brief"}]
    result = next(e for e in second if e.type is EventType.TOOL_CALL_RESULT)
    assert result.tool_call_id == interrupt.tool_call_id
    assert second[-1].outcome.type == "success" and second[-1].result == "written"


async def test_a_denied_interrupt_and_a_cancel(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["write", {"path": "c.txt", "content": "no"}]]},
                  {"text": "not written"}, {"text": "slow", "delay": 30}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        first = await stream(client, run_input("t3", "write it"))
        [interrupt] = first[-1].outcome.interrupts
        second = await stream(client, run_input("t3", resume=[{
            "interruptId": interrupt.id, "status": "cancelled"}]))
        result = next(e for e in second if e.type is EventType.TOOL_CALL_RESULT)
        assert result.content.startswith("not run (denied)")
        assert second[-1].result == "not written"
        running = asyncio.ensure_future(stream(client, run_input("t3", "take your time")))
        while not (await client.get("/v1/sessions/t3")).json().get("busy"):
            await asyncio.sleep(0.05)
        cancel = await client.post("/v1/sessions/t3/cancel", json={"mode": "immediate"})
        assert cancel.json() == {"ok": True}
        third = await asyncio.wait_for(running, 20)
    assert third[-1].type is EventType.RUN_FINISHED and third[-1].outcome.type == "cancelled"


async def test_sub_turns_are_steps(served: Any) -> None:  # noqa: F811
    url = served([
        {"tool_calls": [["subagent", {"agent": "explorer", "task": "where is hello?"}]]},
        {"text": "in a.txt"}, {"text": "It is in a.txt."}], config="explorer = true\n")
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        events = await stream(client, run_input("t4", "find it"))
    steps = [(e.type.value, e.step_name) for e in events
             if e.type in (EventType.STEP_STARTED, EventType.STEP_FINISHED)]
    assert len(steps) == 2 and steps[0][0] == "STEP_STARTED" and steps[1][0] == "STEP_FINISHED"
    assert steps[0][1] == steps[1][1] and steps[0][1].startswith("explorer (")
    inside = types(events)[types(events).index("STEP_STARTED"):types(events).index(
        "STEP_FINISHED")]
    assert "TEXT_MESSAGE_CONTENT" in inside  # the sub-agent's own text, within its step
    assert events[-1].result == "It is in a.txt."


async def test_bad_input_is_refused_and_changes_nothing(served: Any) -> None:  # noqa: F811
    url = served([{"text": "slow", "delay": 30}])
    async with httpx.AsyncClient(base_url=url, timeout=20) as client:
        assert (await client.post("/v1/agui", content=b"{nope")).status_code == 400
        missing = await client.post("/v1/agui", json={"threadId": "t5"})
        assert missing.status_code == 400 and "RunAgentInput" in missing.json()["error"]
        bad = await client.post("/v1/agui", json=run_input("../etc", "hi"))
        assert bad.status_code == 400 and "threadId" in bad.json()["error"]
        empty = await client.post("/v1/agui", json=run_input("t5"))
        assert empty.status_code == 400 and "user message" in empty.json()["error"]
        unknown = await client.post("/v1/agui", json=run_input("t5", resume=[{
            "interruptId": "nope", "status": "resolved"}]))
        assert unknown.status_code == 400
        big = await client.post("/v1/agui", content=b"x" * ((1 << 20) + 1))
        assert big.status_code == 413
        running = asyncio.ensure_future(stream(client, run_input("t5", "go")))
        while not (await client.get("/v1/sessions/t5")).json().get("busy"):
            await asyncio.sleep(0.05)
        busy = await client.post("/v1/agui", json=run_input("t5", "again"))
        assert busy.status_code == 409 and "busy" in busy.json()["error"]
        await client.post("/v1/sessions/t5/cancel", json={"mode": "immediate"})
        await asyncio.wait_for(running, 20)
