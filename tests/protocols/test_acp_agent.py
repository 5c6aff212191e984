"""The ACP agent in process (the package's client side over a socket pair): prompts that
arrive while a turn runs, what a prompt may hold, commands, bad requests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")

from acp import schema  # noqa: E402

from steerable import Agent, AgentLoop, Reply, ScriptedProvider, Usage, tool  # noqa: E402
from steerable.coding import make_todo_tool  # noqa: E402
from steerable.protocols.acp import AcpOptions  # noqa: E402
from tests.protocols._acp_client import Editor, in_process  # noqa: E402


def text(prompt: str) -> list[Any]:
    return [schema.TextContentBlock(type="text", text=prompt)]


def setup(*replies: Reply) -> tuple[AgentLoop, Agent, ScriptedProvider]:
    provider = ScriptedProvider(list(replies))
    agent = Agent(name="acp-test", instructions="Answer.", provider=provider)
    return AgentLoop(agent, checkpoints=False), agent, provider


async def two_prompts(tmp_path: Path, policy: str, *replies: Reply) -> tuple[Any, Any, Any]:
    loop, agent, _ = setup(*replies)
    async with in_process(loop, agent, Editor(), AcpOptions(busy_policy=policy)) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        first = asyncio.ensure_future(client.prompt(session_id=sid, prompt=text("one")))
        await asyncio.sleep(0.1)
        second = await client.prompt(session_id=sid, prompt=text("two"))
        return await first, second, [m.content for m in loop.session_messages(sid)]


async def test_a_prompt_while_a_turn_runs_steers_it_by_default(tmp_path: Path) -> None:
    first, second, history = await two_prompts(
        tmp_path, "steer", Reply(text="on one", delay=0.3), Reply(text="on both"))
    assert first.stop_reason == second.stop_reason == "end_turn"
    same = first.field_meta["steerable"]["turnId"]
    assert second.field_meta["steerable"]["turnId"] == same  # answered at that turn's end
    assert history == ["one", "on one", "two", "on both"]


async def test_a_prompt_while_a_turn_runs_can_queue_as_its_own_turn(tmp_path: Path) -> None:
    first, second, history = await two_prompts(
        tmp_path, "follow_up", Reply(text="on one", delay=0.3), Reply(text="on two"))
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert first.field_meta["steerable"]["turnId"] != second.field_meta["steerable"]["turnId"]
    assert history == ["one", "on one", "two", "on two"]


def refused(exc: pytest.ExceptionInfo[Any]) -> str:
    return str(exc.value.data["message"])


async def test_reject_policy_refuses_the_second_prompt_and_keeps_nothing(
        tmp_path: Path) -> None:
    loop, agent, _ = setup(Reply(text="on one", delay=0.3))
    async with in_process(loop, agent, Editor(), AcpOptions(busy_policy="reject")) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        first = asyncio.ensure_future(client.prompt(session_id=sid, prompt=text("one")))
        await asyncio.sleep(0.1)
        with pytest.raises(acp.RequestError) as exc:
            await client.prompt(session_id=sid, prompt=text("two"))
        assert "busy" in refused(exc)
        assert (await first).stop_reason == "end_turn"
    assert [m.content for m in loop.session_messages(sid)] == ["one", "on one"]


async def test_cancel_withdraws_queued_prompts_and_hands_them_back(tmp_path: Path) -> None:
    loop, agent, _ = setup(Reply(text="slow", delay=0.5))
    options = AcpOptions(busy_policy="follow_up")
    async with in_process(loop, agent, Editor(), options) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        first = asyncio.ensure_future(client.prompt(session_id=sid, prompt=text("one")))
        await asyncio.sleep(0.1)
        second = asyncio.ensure_future(client.prompt(session_id=sid, prompt=text("two")))
        await asyncio.sleep(0.1)
        await client.cancel(session_id=sid)
        done_first, done_second = await first, await second
    assert done_first.stop_reason == done_second.stop_reason == "cancelled"
    [back] = done_second.field_meta["steerable"]["notDelivered"]
    assert back["text"] == "two" and back["messageId"].startswith("msg_")
    assert [m.content for m in loop.session_messages(sid)] == ["one", "slow"]


async def test_a_prompt_takes_text_resources_and_links_and_refuses_images(
        tmp_path: Path) -> None:
    loop, agent, provider = setup(Reply(text="seen"))
    resource = schema.EmbeddedResourceContentBlock(type="resource", resource=schema.TextResourceContents(
        uri="file:///p/a.py", text="print(1)"))
    link = schema.ResourceContentBlock(type="resource_link", uri="file:///p/b.py", name="b.py")
    image = schema.ImageContentBlock(type="image", data="AAAA", mime_type="image/png")
    async with in_process(loop, agent, Editor()) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        await client.prompt(session_id=sid, prompt=[*text("look"), resource, link])
        with pytest.raises(acp.RequestError) as exc:
            await client.prompt(session_id=sid, prompt=[image])
        assert "not supported" in refused(exc)
        with pytest.raises(acp.RequestError) as exc:
            await client.prompt(session_id="nope", prompt=text("x"))
        assert "not open here" in refused(exc)
        with pytest.raises(acp.RequestError) as exc:
            await client.new_session(cwd="relative/dir")
        assert "absolute path" in refused(exc)
    sent = provider.requests[0].messages[-1].content
    assert sent == ('look\n\n<context uri="file:///p/a.py">\nprint(1)\n</context>\n\n'
                    "[@b.py](file:///p/b.py)")


async def test_dry_run_command_and_policy_commands(tmp_path: Path) -> None:
    loop, agent, provider = setup(Reply(text="queued one"))
    editor = Editor()
    async with in_process(loop, agent, editor) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        on = await client.prompt(session_id=sid, prompt=text("/dry-run on"))
        assert on.stop_reason == "end_turn" and not provider.requests  # no model call
        done = await client.prompt(session_id=sid, prompt=text("/follow-up do it"))
        assert done.stop_reason == "end_turn"
    assert editor.of("agent_message_chunk")[0].content.text.startswith("dry run on")
    assert provider.requests[0].messages[-1].content == "do it"


async def test_thoughts_usage_and_the_window(tmp_path: Path) -> None:
    provider = ScriptedProvider([Reply(text="answer", thinking="let me think",
                                       usage=Usage(input_tokens=120, output_tokens=8))])
    agent = Agent(name="acp-test", instructions="Answer.", provider=provider,
                  context_window=4096)
    loop = AgentLoop(agent, checkpoints=False)
    editor = Editor()
    async with in_process(loop, agent, editor) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        done = await client.prompt(session_id=sid, prompt=text("think"))
    # The stream guard cuts deltas at word ends (redaction), so compare the text, not the pieces.
    assert "".join(u.content.text for u in editor.of("agent_thought_chunk")) == "let me think"
    [usage] = editor.of("usage_update")
    assert (usage.used, usage.size) == (128, 4096)
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (
        120, 8, 128)


async def test_list_shows_saved_sessions_of_the_folder(tmp_path: Path) -> None:
    loop, agent, _ = setup(Reply(text="hi"))
    other = tmp_path / "other"
    other.mkdir()
    async with in_process(loop, agent, Editor()) as client:
        used = (await client.new_session(cwd=str(tmp_path))).session_id
        await client.new_session(cwd=str(tmp_path))  # never prompted: nothing to list
        await client.prompt(session_id=used, prompt=text("hello there\nsecond line"))
        listed = await client.list_sessions(cwd=str(tmp_path))
        elsewhere = await client.list_sessions(cwd=str(other))
    assert [(s.session_id, s.title, s.cwd) for s in listed.sessions] == [
        (used, "hello there", str(tmp_path))]
    assert elsewhere.sessions == [] and listed.next_cursor is None


async def test_stop_reasons_for_the_budget_and_a_failed_turn(tmp_path: Path) -> None:
    @tool(read_only=True)
    def look() -> str:
        """Look around."""
        return "nothing"

    provider = ScriptedProvider([Reply(tool_calls=[("look", {})]), Reply(text="out of steps"),
                                 Reply(error=RuntimeError("the model broke"))])
    agent = Agent(name="acp-test", instructions="Answer.", provider=provider, tools=[look],
                  max_iterations=2)
    loop = AgentLoop(agent, checkpoints=False)
    async with in_process(loop, agent, Editor()) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        budget = await client.prompt(session_id=sid, prompt=text("keep looking"))
        assert budget.stop_reason == "max_turn_requests"
        with pytest.raises(acp.RequestError) as exc:
            await client.prompt(session_id=sid, prompt=text("again"))
    assert "the model broke" in refused(exc)


async def test_the_todo_tools_plan_is_an_acp_plan(tmp_path: Path) -> None:
    items = [{"content": "read a.txt", "status": "done"},
             {"content": "fix it", "status": "in_progress"},
             {"content": "run the tests", "status": "pending"}]
    provider = ScriptedProvider([Reply(tool_calls=[("todo", {"items": items})]),
                                 Reply(text="planned")])
    agent = Agent(name="acp-test", instructions="Answer.", provider=provider,
                  tools=[make_todo_tool()])
    editor = Editor()
    async with in_process(AgentLoop(agent, checkpoints=False), agent, editor) as client:
        sid = (await client.new_session(cwd=str(tmp_path))).session_id
        done = await client.prompt(session_id=sid, prompt=text("plan it"))
    assert done.stop_reason == "end_turn"
    [plan] = editor.of("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [
        ("read a.txt", "completed", "medium"), ("fix it", "in_progress", "medium"),
        ("run the tests", "pending", "medium")]
