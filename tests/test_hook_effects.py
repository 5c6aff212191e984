"""What each hook point's decisions change, exactly: only the fields set, for every later hook
and for the model; what a point cannot do is reported and the chain goes on."""

from __future__ import annotations

from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    HookAction,
    HookDecision,
    Reply,
    ScriptedProvider,
    ToolResult,
    TurnStatus,
    Usage,
    tool,
)
from steerable.errors import ContextOverflowError
from tests.conftest import of

K = EventKind


@tool(read_only=True)
def look(path: str) -> ToolResult:
    """Look at a path."""
    return ToolResult(f"saw {path}", metadata={"path": path})


@tool
def write(path: str) -> str:
    """Write a path."""
    return f"wrote {path}"


def loop_with(script: list[Reply], **agent_kw: Any):
    provider = ScriptedProvider(script)
    loop = AgentLoop(Agent(provider=provider, tools=[look, write], instructions="sys",
                           **agent_kw))
    return loop, provider, loop.subscribe(buffer=10_000)


class Recorder:
    """Sees every point; keeps each context it was given."""

    name = "rec"

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def before_llm(self, ctx: Any) -> None:
        self.seen.append(("before_llm", ctx))

    def after_llm(self, ctx: Any) -> None:
        self.seen.append(("after_llm", ctx))

    def before_tool(self, ctx: Any) -> None:
        self.seen.append(("before_tool", ctx))

    def after_tool(self, ctx: Any) -> None:
        self.seen.append(("after_tool", ctx))

    def before_compress(self, ctx: Any) -> None:
        self.seen.append(("before_compress", ctx))

    def points(self) -> list[str]:
        return [p for p, _ in self.seen]


async def test_every_context_names_its_turn_session_and_iteration() -> None:
    script = [Reply(text="old answer"), Reply(tool_calls=[("look", {"path": "b"})]),
              Reply(error=ContextOverflowError("y")), Reply(text="fine")]
    loop, provider, _ = loop_with(script)
    await loop.run_turn("old question", session_id="s")  # one earlier exchange to drop
    rec = Recorder()
    loop.register_hook(rec)
    result = await loop.run_turn("new question", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    assert rec.points() == ["before_llm", "after_llm", "before_tool", "after_tool",
                            "before_llm", "before_compress", "before_llm", "after_llm"]
    iterations = [ctx.iteration for _, ctx in rec.seen]
    assert iterations == [1, 1, 1, 1, 2, 2, 2, 2]
    for _, ctx in rec.seen:
        assert (ctx.turn_id, ctx.session_id, ctx.parent_turn_id) == (result.turn_id, "s", None)
    (_, after_llm), = [(p, c) for p, c in rec.seen[:2] if p == "after_llm"]
    assert after_llm.request is provider.requests[-3] or after_llm.request == provider.requests[-3]
    assert after_llm.response.tool_calls[0].name == "look"
    (_, before_tool), (_, after_tool) = rec.seen[2], rec.seen[3]
    assert before_tool.call.arguments == {"path": "b"} and before_tool.read_only is True
    assert after_tool.call == before_tool.call
    assert after_tool.result == ToolResult("saw b", metadata={"path": "b"})
    compress = rec.seen[5][1]
    assert compress.reason == "overflow" and compress.messages[0].content == "old question"


@pytest.mark.parametrize("field,value", [("model", "other"), ("params", {"temperature": 0.5}),
                                         ("tools", ["look"])])
async def test_before_llm_changes_only_the_field_it_sets(field: str, value: Any) -> None:
    class Change:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, **{field: value})

    plain_loop, plain, _ = loop_with([Reply(text="ok")], model="base", params={"top_p": 1})
    await plain_loop.run_turn("q", session_id="s")
    loop, provider, _ = loop_with([Reply(text="ok")], model="base", params={"top_p": 1})
    loop.register_hook(Change())
    await loop.run_turn("q", session_id="s")
    (before,), (after,) = plain.requests, provider.requests
    assert (before.model, before.params) == ("base", {"top_p": 1})
    for name in ("messages", "model", "params"):
        expected = value if name == field else getattr(before, name)
        assert getattr(after, name) == expected, name
    expected_tools = value if field == "tools" else ["look", "write"]
    assert [t.name for t in after.tools] == expected_tools


async def test_before_llm_changing_messages_keeps_the_rest() -> None:
    class Rewrite:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, messages=list(ctx.request.messages[:1]))

    loop, provider, _ = loop_with([Reply(text="ok")], model="base", params={"top_p": 1})
    loop.register_hook(Rewrite())
    await loop.run_turn("q", session_id="s")
    (request,) = provider.requests
    assert [m.content for m in request.messages] == ["sys"]
    assert (request.model, request.params) == ("base", {"top_p": 1})
    assert [t.name for t in request.tools] == ["look", "write"]


async def test_a_before_llm_change_that_cannot_be_made_is_reported_and_skipped() -> None:
    class Unknown:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tools=["no_such_tool"], model="m2")

    loop, provider, sub = loop_with([Reply(text="ok")], model="base")
    loop.register_hook(Unknown())
    result = await loop.run_turn("q", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    (error,) = of(sub.drain_nowait(), K.ERROR)
    assert error.source == "hook" and error.turn_id == result.turn_id
    assert error.message.startswith("hook Unknown.before_llm MODIFY ignored: ")
    assert "no_such_tool" in error.message
    assert provider.requests[0].model == "base"  # nothing of that decision applied


@pytest.mark.parametrize("point,decision", [
    ("before_llm", HookDecision(HookAction.DENY_TOOL, reason="no")),
    ("after_llm", HookDecision(HookAction.DENY_TOOL, reason="no")),
    ("after_tool", HookDecision(HookAction.RESPOND, text="canned")),
    ("before_compress", HookDecision(HookAction.DENY_TOOL, reason="no")),
])
async def test_a_decision_a_point_cannot_take_is_reported_and_later_hooks_still_run(
        point: str, decision: HookDecision) -> None:
    class Wrong:
        pass

    setattr(Wrong, point, lambda self, ctx: decision)
    rec = Recorder()
    script = [Reply(text="x"), Reply(tool_calls=[("look", {"path": "a"})]),
              Reply(error=ContextOverflowError("long")), Reply(text="done")]
    loop, provider, _ = loop_with(script)
    await loop.run_turn("old", session_id="s")
    loop.register_hook(Wrong(), priority=10)
    loop.register_hook(rec)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED and result.text == "done"
    errors = of(sub.drain_nowait(), K.ERROR)
    assert errors and all(e.source == "hook" and e.turn_id == result.turn_id for e in errors)
    assert f"hook Wrong.{point} cannot {decision.action} here; ignored" in [
        e.message for e in errors]
    assert point in rec.points()  # the chain went on to the next hook


async def test_before_tool_modify_without_arguments_changes_nothing_and_is_reported() -> None:
    class Empty:
        def before_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, text="not for here")

    loop, _, sub = loop_with([Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="ok")])
    loop.register_hook(Empty())
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert [e.content for e in of(events, K.TOOL_EXEC_END)] == ["saw a"]
    messages = [e.message for e in of(events, K.ERROR)]
    assert "hook Empty.before_tool cannot modify here; ignored" in messages


async def test_after_llm_changing_the_text_keeps_the_calls_and_the_rest() -> None:
    class Retitle:
        def after_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, text="edited " + ctx.response.text)

    usage = Usage(input_tokens=7, output_tokens=3)
    script = [Reply(text="first", tool_calls=[("look", {"path": "a"})], thinking="hmm",
                    usage=usage), Reply(text="last", usage=usage)]
    loop, _, sub = loop_with(script)
    loop.register_hook(Retitle())
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "edited last"
    responses = of(sub.drain_nowait(), K.LLM_RESPONSE)
    assert [r.text for r in responses] == ["edited first", "edited last"]
    assert [c.name for c in responses[0].tool_calls] == ["look"]
    assert responses[0].finish_reason == "tool_calls" and responses[1].finish_reason == "stop"
    assert responses[0].usage == usage == responses[1].usage


async def test_after_tool_changes_only_what_it_sets_and_the_next_hook_sees_it() -> None:
    class Flag:
        def after_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, is_error=True)

    class Reword:
        def after_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, result=ctx.result.content.upper())

    rec = Recorder()
    loop, _, sub = loop_with([Reply(tool_calls=[("look", {"path": "a"})]), Reply(text="ok")])
    loop.register_hook(Flag(), priority=3)
    loop.register_hook(Reword(), priority=2)
    loop.register_hook(rec, priority=1)
    await loop.run_turn("go", session_id="s")
    (end,) = of(sub.drain_nowait(), K.TOOL_EXEC_END)
    assert (end.content, end.is_error) == ("SAW A", True)
    (_, seen), = [(p, c) for p, c in rec.seen if p == "after_tool"]
    assert seen.result == ToolResult("SAW A", is_error=True, metadata={"path": "a"})


async def test_before_tool_can_answer_for_the_tool_or_deny_it_without_a_reason() -> None:
    class Answer:
        def before_tool(self, ctx: Any) -> HookDecision:
            if ctx.call.arguments["path"] == "a":
                return HookDecision(HookAction.RESPOND, result="canned", is_error=True)
            if ctx.call.arguments["path"] == "b":
                return HookDecision(HookAction.RESPOND)
            return HookDecision(HookAction.DENY_TOOL)

    calls = [("write", {"path": "a"}), ("write", {"path": "b"}), ("write", {"path": "c"})]
    loop, provider, sub = loop_with([Reply(tool_calls=calls), Reply(text="ok")])
    loop.register_hook(Answer())
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert [(e.content, e.is_error) for e in of(events, K.TOOL_EXEC_END)] == [
        ("canned", True), ("", False)]
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert (skipped.reason, skipped.detail) == ("denied", "denied by a hook")
    results = [m for m in provider.requests[-1].messages if m.role == "tool"]
    assert [(m.content, m.is_error) for m in results[:2]] == [("canned", True), ("", False)]
    assert results[2].content == ("Tool call denied: denied by a hook. Do not repeat this call; "
                                  "choose another approach or ask the user.")
    assert results[2].is_error is True


async def test_before_llm_tools_may_be_given_as_tool_objects_or_specs() -> None:
    from steerable.providers import ToolSpec

    custom = ToolSpec("custom", "A tool only the model hears of.", {"type": "object"})

    class Offer:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tools=[look, write, custom])

    loop, provider, _ = loop_with([Reply(text="ok")])
    loop.register_hook(Offer())
    await loop.run_turn("q", session_id="s")
    offered = provider.requests[0].tools
    assert [(t.name, t.description, dict(t.parameters), t.read_only) for t in offered] == [
        ("look", look.description, dict(look.parameters), True),  # a provider may route by it
        ("write", write.description, dict(write.parameters), False),
        ("custom", "A tool only the model hears of.", {"type": "object"}, False)]


async def test_a_providers_retry_notice_becomes_an_llm_retry_event_with_its_reason() -> None:
    from steerable.providers import RetryNotice, StreamEnd, TextDelta

    class Flaky:
        name = "flaky"

        async def stream(self, request: Any) -> Any:
            yield RetryNotice(attempt=2, reason="HTTP 503", delay=0.0)
            yield TextDelta("hello")
            yield StreamEnd(None, "stop")

        async def aclose(self) -> None:
            return None

    loop = AgentLoop(Agent(provider=Flaky()))  # type: ignore[arg-type]
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "hello"
    (retry,) = of(sub.drain_nowait(), K.LLM_RETRY)
    assert (retry.attempt, retry.reason, retry.delay, retry.iteration, retry.turn_id) == (
        2, "HTTP 503", 0.0, 1, result.turn_id)


async def test_a_tool_whose_arguments_check_fails_unexpectedly_says_so_to_the_model() -> None:
    from steerable.tools import BaseTool

    class Picky(BaseTool):
        name = "picky"
        description = "Picky."
        read_only = True

        @property
        def parameters(self) -> Any:
            return {"type": "object"}

        def validate(self, arguments: Any) -> Any:
            raise KeyError("path")

        async def run(self, arguments: Any, ctx: Any) -> str:
            return "never"

    class Inapplicable:
        def before_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, arguments={"x": 1}, model="m")

    provider = ScriptedProvider([Reply(tool_calls=[("picky", {"x": 0})]), Reply(text="ok")])
    loop = AgentLoop(Agent(provider=provider, tools=[Picky()]))
    loop.register_hook(Inapplicable())
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    (start,) = of(events, K.TOOL_EXEC_START)
    assert start.arguments == {"x": 1}  # what the hook changed them to
    (end,) = of(events, K.TOOL_EXEC_END)
    assert (end.content, end.is_error) == ("Tool 'picky' rejected its arguments: KeyError: 'path'",
                                           True)
    (error,) = of(events, K.ERROR)
    assert (error.turn_id, error.message) == (
        result.turn_id, "hook Inapplicable.before_tool modify: model does not apply here (ignored)")


async def test_a_call_to_a_tool_before_llm_took_off_the_offer_gets_an_error_and_never_runs(
) -> None:
    ran: list[str] = []

    @tool
    def erase(path: str) -> str:
        """Erase a path."""
        ran.append(path)
        return f"erased {path}"

    class ReadOnly:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tools=["look"])

    provider = ScriptedProvider([Reply(tool_calls=[("erase", {"path": "/"}),
                                                   ("look", {"path": "a"})]),
                                 Reply(text="ok")])
    loop = AgentLoop(Agent(provider=provider, tools=[look, erase]))
    loop.register_hook(ReadOnly())
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("q", session_id="s")
    assert result.status is TurnStatus.COMPLETED and ran == []
    assert [t.name for t in provider.requests[0].tools] == ["look"]
    ends = {e.tool_name: e for e in of(sub.drain_nowait(), K.TOOL_EXEC_END)}
    assert ends["erase"].is_error
    assert ends["erase"].content == ("Tool 'erase' is not available for this call. "
                                     "Available tools: look.")
    assert not ends["look"].is_error and ends["look"].content == "saw a"


async def test_llm_request_event_names_the_tool_choice_a_hook_made() -> None:
    from steerable.providers._base import ToolChoice

    @tool(read_only=True)
    async def look(x: str) -> str:
        """Look."""
        return x

    @tool(read_only=True)
    async def other(x: str) -> str:
        """Other."""
        return x

    class Narrow:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, tool_choice=ToolChoice(
                "required", only=("look",), reason="look first"))

    provider = ScriptedProvider([Reply(text="ok")])
    loop = AgentLoop(Agent(name="a", provider=provider, tools=[look, other]))
    loop.register_hook(Narrow())
    sub = loop.subscribe(kinds=[EventKind.LLM_REQUEST])
    await loop.run_turn("go", session_id="s")
    (event,) = sub.drain_nowait()
    assert (event.tool_choice, event.may_call, event.reason) == ("required", ("look",),
                                                                 "look first")
    assert event.tools == ("look", "other") and event.purpose == ""  # the turn's own call
    assert provider.requests[0].tool_choice.only == ("look",)
