"""A2A on a real ``steerable serve``, driven by the official ``a2a-sdk`` client; every answer on
the wire is parsed strictly with the SDK's protobuf models (``_a2a_wire``). A turn with a tool,
an approval as input-required, a steer to a working task, a new task queued behind a working
one, cancels (while the model answers, while an approval waits), a resubscription that resumes
a stream, the token, bad input."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("a2a.client", reason="the a2a extra is not installed")

import httpx
from a2a.client import ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_data_parts, new_data_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import ParseDict

from tests.protocols._a2a_client import (
    CANCELED,
    DONE,
    IR,
    Background,
    W,
    peer,
    request,
    state,
    states,
    task_id,
    texts,
)
from tests.protocols._serving import served  # noqa: F401 (fixture)


async def test_the_card_and_a_turn_with_a_tool(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["read", {"path": "a.txt"}]]}, {"text": "it says hello"}])
    async with httpx.AsyncClient(timeout=20) as http:
        raw = (await http.get(url + "/.well-known/agent-card.json")).json()
    card = ParseDict(raw, AgentCard())  # strict: the card has no field the model lacks
    assert card.supported_interfaces[0].url == url + "/a2a"
    assert card.capabilities.streaming and not card.security_requirements
    async with peer(url) as a2a:
        got = await a2a.send("what does a.txt say?", context="c1")
        assert states(got) == [TaskState.TASK_STATE_SUBMITTED, W, DONE]
        assert got[0].task.history[0].parts[0].text == "what does a.txt say?"
        calls = [d["tool_call"] for r in got if r.HasField("status_update")
                 for d in get_data_parts(r.status_update.status.message.parts)
                 if "tool_call" in d]
        assert [(c["tool_name"], c["arguments"]) for c in calls] == [("read", {"path": "a.txt"})]
        results = [d["tool_result"] for r in got if r.HasField("status_update")
                   for d in get_data_parts(r.status_update.status.message.parts)
                   if "tool_result" in d]
        assert "hello from disk" in results[0]["content"] and not results[0]["is_error"]
        [artifact] = [r.artifact_update.artifact for r in got if r.HasField("artifact_update")]
        assert artifact.name == "response" and get_artifact_text(artifact) == "it says hello"
        task = await a2a.stream.get_task(GetTaskRequest(id=task_id(got)))
    assert task.status.state == DONE and task.context_id == "c1"
    assert get_artifact_text(task.artifacts[0]) == "it says hello"


async def test_an_approval_is_input_required_until_a_message_answers(
        served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]},
                  {"text": "not written"},
                  {"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]},
                  {"text": "written"}])
    async with peer(url) as a2a:
        [first] = await a2a.send("write it", context="c2", stream=False)
        assert state(first.task) == IR
        [asked] = get_data_parts(first.task.status.message.parts)
        assert asked["approval"]["tool_name"] == "write"
        tid = first.task.id
        [again] = await a2a.send("maybe later", context="c2", task=tid, stream=False)
        assert state(again.task) == IR  # not an answer: asked again
        assert again.task.status.message.parts[0].text == "That is not an answer."
        denied = await a2a.send(new_data_part({"approved": False, "reason": "not now"}),
                                context="c2", task=tid)
        assert "denied" in texts(denied)
        assert states(denied)[-1] == DONE
        assert any(t.startswith("tool write not run (denied): not now") for t in texts(denied))
        second = await a2a.send("write it now", context="c2")
        assert states(second)[-1] == IR
        # Answered elsewhere (the native API): the task goes on at once, without a message.
        rid = get_data_parts(second[-1].status_update.status.message.parts)[0]["approval"][
            "request_id"]
        tid = task_id(second)
        assert (await a2a.http.post(f"{url}/v1/approvals/{rid}",
                                    json={"approved": True})).json() == {"ok": True}
        for _ in range(400):
            task = await a2a.stream.get_task(GetTaskRequest(id=tid))
            if task.status.state == DONE:
                break
            await asyncio.sleep(0.025)
        said = [p.text for m in task.history for p in m.parts if p.text]
    assert task.status.state == DONE and "answered elsewhere" in said
    assert any(t.startswith("tool write done: Created b.txt") for t in said)


async def test_a_message_to_a_working_task_steers_its_turn(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["read", {"path": "a.txt"}]], "delay": 1.0},
                  {"text": "brief, as asked"}])
    async with peer(url) as a2a:
        running = Background(a2a, "read a.txt", context="c3")
        tid = await running.working()
        [steered] = await a2a.send("answer briefly", context="c3", task=tid, stream=False)
        assert steered.task.id == tid and state(steered.task) == W
        # Streamed, a steer goes on streaming the task: the task now, then the rest.
        again = await a2a.send("and politely", context="c3", task=tid)
        assert again[0].HasField("task") and again[0].task.id == tid
        got = await running.done
        for stream in (got, again):
            assert "steered: answer briefly" in texts(stream)
            assert "steered: and politely" in texts(stream)
            assert states(stream)[-1] == DONE
        session = (await a2a.http.get(url + "/v1/sessions/c3")).json()
    # The model read the steering message in its next call: it is in the session's history.
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == [
        "read a.txt", "answer briefly", "and politely"]


async def test_a_new_task_in_a_busy_context_waits_for_a_turn_of_its_own(
        served: Any) -> None:  # noqa: F811
    url = served([{"text": "first", "delay": 1.0}, {"text": "second"}, {"text": "third"}])
    async with peer(url) as a2a:
        running = Background(a2a, "one", context="c4")
        tid = await running.working()
        two = Background(a2a, "two", context="c4")
        await two.working(TaskState.TASK_STATE_SUBMITTED)
        # To the working task, but asking for a turn of its own: a new task that refers to it.
        three = Background(a2a, "three", context="c4", task=tid, policy="follow_up")
        [refused] = await a2a.send("four", context="c4", policy="reject", stream=False)
        assert state(refused.task) == TaskState.TASK_STATE_REJECTED
        assert "is busy" in refused.task.status.message.parts[0].text
        first, queued, follow = [await b.done for b in (running, two, three)]
    assert states(first)[-1] == DONE
    for stream, reply in ((queued, "second"), (follow, "third")):
        assert states(stream) == [TaskState.TASK_STATE_SUBMITTED, W, DONE]
        assert "queued: waiting for a turn of its own" in texts(stream)
        [artifact] = [r.artifact_update.artifact for r in stream if r.HasField("artifact_update")]
        assert get_artifact_text(artifact) == reply
    assert task_id(follow) != tid and list(follow[0].task.history[0].reference_task_ids) == [tid]


async def test_cancel_stops_after_the_model_and_the_context_goes_on(
        served: Any, tmp_path: Path) -> None:  # noqa: F811
    url = served([{"tool_calls": [["write", {"path": "c.txt", "content": "x"}]], "delay": 1.0},
                  {"text": "fresh start"},
                  {"tool_calls": [["write", {"path": "d.txt", "content": "y"}]]}])
    async with peer(url) as a2a:
        running = Background(a2a, "write c", context="c5")
        tid = await running.working()
        cancelled = await a2a.stream.cancel_task(CancelTaskRequest(id=tid))
        assert cancelled.status.state == CANCELED
        got = await running.done
        assert states(got)[-1] == CANCELED
        assert not any("tool_call" in d for r in got if r.HasField("status_update")
                       for d in get_data_parts(r.status_update.status.message.parts))
        session = (await a2a.http.get(url + "/v1/sessions/c5")).json()
        # The cancel kept what was done: a pending turn the native API could resume; for A2A
        # the task is over, and the next message to the context drops it.
        assert session["pending_turn"]["cancel_mode"] == "after_model"
        again = await a2a.send("start over", context="c5")
        assert states(again)[-1] == DONE
        # A task parked on an approval is cancelled too: the call is denied, the turn stops.
        parked = await a2a.send("write d", context="c5")
        assert states(parked)[-1] == IR
        stopped = await a2a.stream.cancel_task(CancelTaskRequest(id=task_id(parked)))
        assert stopped.status.state == CANCELED
        with pytest.raises(UnsupportedOperationError, match="terminal state"):  # it is over
            await a2a.send("yes", context="c5", task=task_id(parked))
        session = (await a2a.http.get(url + "/v1/sessions/c5")).json()
    assert session["busy"] is False and session["pending_turn"]["reason"] == "cancelled"
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == [
        "start over"]  # the first cancelled turn's pending state was dropped by it
    assert not (tmp_path / "ws" / "c.txt").exists() and not (tmp_path / "ws" / "d.txt").exists()


async def test_subscribe_resumes_a_stream_that_was_dropped(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["read", {"path": "a.txt"}]], "delay": 0.5},
                  {"text": "all done", "delay": 0.5}])
    async with peer(url) as a2a:
        seen: list[StreamResponse] = []
        async for r in a2a.stream.send_message(request("read it", context="c6")):
            seen.append(r)
            if r.HasField("status_update") and state(r) == W:
                break  # the client goes away while the task works
        tid = task_id(seen)
        resumed = [r async for r in a2a.stream.subscribe(SubscribeToTaskRequest(id=tid))]
    assert resumed[0].HasField("task") and resumed[0].task.id == tid
    assert states(resumed)[-1] == DONE
    [artifact] = [r.artifact_update.artifact for r in resumed if r.HasField("artifact_update")]
    assert get_artifact_text(artifact) == "all done"


async def test_the_token_covers_a2a_but_not_the_card(served: Any) -> None:  # noqa: F811
    url = served([{"text": "hi"}], extra_env={"STEERABLE_SERVER_TOKEN": "sekret"})
    async with httpx.AsyncClient(timeout=20) as http:
        card = ParseDict((await http.get(url + "/.well-known/agent-card.json")).json(),
                         AgentCard())
        refused = await http.post(url + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}})
    assert refused.status_code == 401
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    async with peer(url, token="sekret") as a2a:
        assert states(await a2a.send("hello", context="c7"))[-1] == DONE


async def test_bad_input_is_refused(served: Any) -> None:  # noqa: F811
    url = served([])
    async with peer(url) as a2a:
        [bad] = await a2a.send("hi", context="no/slashes", stream=False)
        assert state(bad.task) == TaskState.TASK_STATE_REJECTED
        assert "contextId is the session id" in bad.task.status.message.parts[0].text
        with pytest.raises(InvalidParamsError, match="unknown busy policy"):
            await a2a.send("hi", context="c8", policy="sometimes")
        with pytest.raises(TaskNotFoundError):
            await a2a.stream.get_task(GetTaskRequest(id="no-such-task"))
    big = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
           "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                                  "parts": [{"text": "x" * (1 << 20)}]}}}
    chunks = [b'{"jsonrpc": "2.0", "padding": "', b"x" * (1 << 20), b'"}']

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    async with httpx.AsyncClient(timeout=20) as http:
        refused = await http.post(url + "/a2a", json=big)
        # Streamed without a length, it is cut off as soon as it is too long.
        streamed = await http.post(url + "/a2a", content=body())
    assert refused.status_code == 413 and refused.json()["error"]["code"] == -32600
    assert streamed.status_code == 413


async def test_a_cancel_racing_the_start_of_its_turn_still_stops_it(
        served: Any, tmp_path: Path) -> None:  # noqa: F811
    """The task is answered as soon as it exists (``return_immediately``) and cancelled at once:
    the cancel meets the task before, during or after its message reaches the session. Every
    time the task ends cancelled and its turn stops after the model (the tool never runs)."""
    rounds = 10
    url = served([{"tool_calls": [["write", {"path": f"r{i}.txt", "content": "x"}]],
                   "delay": 0.3} for i in range(rounds)])
    async with peer(url) as a2a:
        polling = await create_client(a2a.card, ClientConfig(
            httpx_client=a2a.http, streaming=False, polling=True))
        for i in range(rounds):
            [first] = [r async for r in polling.send_message(request("go", context=f"r{i}"))]
            cancelled = await a2a.stream.cancel_task(CancelTaskRequest(id=first.task.id))
            assert cancelled.status.state == CANCELED, i
            session = (await a2a.http.get(f"{url}/v1/sessions/r{i}")).json()
            assert session["pending_turn"]["cancel_mode"] == "after_model", i
    assert not list((tmp_path / "ws").glob("r*.txt"))


async def test_a_sub_agent_works_inside_its_parent_s_task(served: Any) -> None:  # noqa: F811
    url = served([
        {"tool_calls": [["subagent", {"agent": "explorer", "task": "what is in a.txt?"}]]},
        {"tool_calls": [["read", {"path": "a.txt"}]]}, {"text": "hello"},
        {"text": "It says hello."}], config="explorer = true\n")
    async with peer(url) as a2a:
        got = await a2a.send("find it", context="c9")
    shown = texts(got)
    started = shown.index("sub-agent explorer started")
    ended = next(i for i, t in enumerate(shown) if t.startswith("sub-agent ended completed"))
    # The sub-agent's own tool call is an update of the parent's task, between the two.
    assert any(t.startswith("tool read ") for t in shown[started:ended])
    assert states(got)[-1] == DONE
    [artifact] = [r.artifact_update.artifact for r in got if r.HasField("artifact_update")]
    assert get_artifact_text(artifact) == "It says hello."


async def test_a_new_task_that_steers_joins_the_working_turn(served: Any) -> None:  # noqa: F811
    url = served([{"tool_calls": [["read", {"path": "a.txt"}]], "delay": 1.0},
                  {"text": "read, and steered"}])
    async with peer(url) as a2a:
        running = Background(a2a, "read a.txt", context="c10")
        tid = await running.working()
        joined = await a2a.send("also say hi", context="c10", policy="steer")
        first = await running.done
    assert task_id(joined) != tid
    for stream in (first, joined):
        assert "steered: also say hi" in texts(stream) and states(stream)[-1] == DONE
        [artifact] = [r.artifact_update.artifact for r in stream if r.HasField("artifact_update")]
        assert get_artifact_text(artifact) == "read, and steered"


async def test_the_server_stops_cleanly_with_a_task_parked_and_one_working(
        served: Any) -> None:  # noqa: F811
    """The fixture stops the server (SIGINT) and checks that it wrote no traceback."""
    url = served([{"tool_calls": [["write", {"path": "b.txt", "content": "new"}]]},
                  {"text": "slow", "delay": 30}])
    async with peer(url) as a2a:
        assert states(await a2a.send("write it", context="p1"))[-1] == IR
        running = Background(a2a, "take your time", context="p2")
        await running.working()
        running.done.cancel()


async def test_cancelling_a_task_that_waits_for_its_turn_withdraws_its_message(
        served: Any) -> None:  # noqa: F811
    url = served([{"text": "first", "delay": 1.0}])
    async with peer(url) as a2a:
        running = Background(a2a, "one", context="c11")
        await running.working()
        waiting = Background(a2a, "two", context="c11")
        tid = await waiting.working(TaskState.TASK_STATE_SUBMITTED)
        cancelled = await a2a.stream.cancel_task(CancelTaskRequest(id=tid))
        assert cancelled.status.state == CANCELED
        assert states(await waiting.done)[-1] == CANCELED
        assert states(await running.done)[-1] == DONE
        session = (await a2a.http.get(url + "/v1/sessions/c11")).json()
    assert [m["content"] for m in session["messages"] if m["role"] == "user"] == ["one"]
