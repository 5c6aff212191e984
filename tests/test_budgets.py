"""Turn budgets (Limits.max_turn_tokens / max_turn_cost_usd / max_tool_calls) and usage:
each limit, parallel tools at the limit, sub-turns spending their parent's budget, usage
summed across calls, cached tokens, and cost for a known and an unknown model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Limits,
    Reply,
    ScriptedProvider,
    TurnStatus,
    Usage,
    tool,
)
from tests.conftest import assert_history_consistent, assert_one_terminal_per_call, of

K = EventKind
pytest.importorskip("genai_prices", reason="the prices extra (genai-prices) is not installed")


@tool(read_only=True)
async def look(key: str) -> str:
    """Look something up."""
    return f"{key}: found"


@tool
async def change(key: str) -> str:
    """Change something."""
    return f"{key}: changed"


async def run(agent: Agent, limits: Limits, prompt: str = "go") -> tuple[Any, list[Any], AgentLoop]:
    loop = AgentLoop(agent, limits=limits)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn(prompt, session_id="s")
    events = sub.drain_nowait()
    await loop.aclose()
    assert_one_terminal_per_call(events)
    assert_history_consistent(loop.session_messages("s"))
    return result, events, loop


def calls(*keys: str, name: str = "look") -> list[tuple[str, dict[str, str]]]:
    return [(name, {"key": k}) for k in keys]


def test_limits_check_their_budget_values() -> None:
    for bad in ({"max_turn_tokens": 0}, {"max_tool_calls": True}, {"max_turn_cost_usd": -1},
                {"max_turn_cost_usd": "1"}, {"max_turn_tokens": 1.5}):
        with pytest.raises(ValueError, match=r"Limits\.max_"):
            Limits(**bad)
    assert not Limits().budgeted and Limits(max_tool_calls=3).budgeted


async def test_token_budget_skips_the_tools_and_makes_one_summary_call() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=calls("a", "b"), usage=Usage(900, 150)),
        Reply(text="I asked for a and b; nothing ran.", usage=Usage(1000, 20)),
    ])
    result, events, _ = await run(Agent(provider=provider, tools=[look]),
                                  Limits(max_turn_tokens=1000))
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert result.text == "I asked for a and b; nothing ran."
    assert [e.reason for e in of(events, K.TOOL_EXEC_SKIPPED)] == ["budget", "budget"]
    assert not of(events, K.TOOL_EXEC_START)
    (note,) = list(of(events, K.INTERRUPT_RECEIVED))
    assert note.mode == "budget" and note.hint == "max_turn_tokens=1,000: 1,050 tokens used"
    summary = provider.requests[1]
    assert summary.tool_choice.mode == "none" and "used up its budget" in summary.messages[-1].content
    assert result.usage == Usage(1900, 170)
    assert of(events, K.TURN_END)[0].status is TurnStatus.BUDGET_EXCEEDED


async def test_a_final_answer_that_crosses_the_limit_stands() -> None:
    provider = ScriptedProvider([Reply(tool_calls=calls("a"), usage=Usage(400, 50)),
                                 Reply(text="done", usage=Usage(600, 60))])
    result, _, _ = await run(Agent(provider=provider, tools=[look]), Limits(max_turn_tokens=1000))
    assert result.status is TurnStatus.COMPLETED and result.text == "done"
    assert result.usage is not None and result.usage.total_tokens == 1110


async def test_tool_call_budget_in_a_parallel_group_runs_the_admitted_calls() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=calls("a")),
        Reply(tool_calls=calls("b", "c", "d")),  # one parallel group; only two fit
        Reply(text="a, b and c are known; d was refused."),
    ])
    result, events, loop = await run(Agent(provider=provider, tools=[look]),
                                     Limits(max_tool_calls=3))
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert [e.call_id for e in of(events, K.TOOL_EXEC_END)] == ["call_1", "call_2", "call_3"]
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert (skipped.call_id, skipped.reason) == ("call_4", "budget")
    assert skipped.detail == "max_tool_calls=3: 1 call(s) refused"
    results = [m for m in loop.session_messages("s") if m.role == "tool"]
    assert [m.is_error for m in results] == [False, False, False, True]
    assert "budget" in results[-1].content
    assert provider.requests[-1].tool_choice.mode == "none"


async def test_tool_call_budget_stops_later_groups_after_the_one_at_the_limit() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[*calls("a", "b"), *calls("x", name="change"), *calls("c")]),
        Reply(text="summary"),
    ])
    result, events, _ = await run(Agent(provider=provider, tools=[look, change]),
                                  Limits(max_tool_calls=2))
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert [e.tool_name for e in of(events, K.TOOL_EXEC_END)] == ["look", "look"]
    assert [(e.tool_name, e.reason) for e in of(events, K.TOOL_EXEC_SKIPPED)] == [
        ("change", "budget"), ("look", "budget")]


async def test_exactly_the_tool_budget_then_an_answer_completes() -> None:
    provider = ScriptedProvider([Reply(tool_calls=calls("a", "b")), Reply(text="done")])
    result, _, _ = await run(Agent(provider=provider, tools=[look]), Limits(max_tool_calls=2))
    assert result.status is TurnStatus.COMPLETED


async def test_cost_budget_with_a_priced_model() -> None:
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    provider = ScriptedProvider([
        Reply(tool_calls=calls("a"), usage=Usage(1_000_000, 100_000, 400_000)),
        Reply(text="summary", usage=Usage(1_000, 10)),
    ])
    result, events, _ = await run(Agent(provider=provider, tools=[look], model="gpt-4o-mini"),
                                  Limits(max_turn_cost_usd=0.15))
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    first = of(events, K.LLM_RESPONSE)[0].usage
    assert first.cost_usd == pytest.approx(0.6 * 0.15 + 0.4 * 0.075 + 0.1 * 0.6)
    assert result.usage.cached_tokens == 400_000
    assert result.usage.cost_usd == pytest.approx(first.cost_usd + 0.001 * 0.15 + 10 * 0.6e-6)
    assert of(events, K.INTERRUPT_RECEIVED)[0].hint.startswith("max_turn_cost_usd=0.15: $0.1")


async def test_an_unknown_models_cost_is_none_and_a_cost_budget_says_so_once() -> None:
    provider = ScriptedProvider([Reply(tool_calls=calls("a"), usage=Usage(10**7, 10**6)),
                                 Reply(text="done", usage=Usage(10**7, 10))])
    result, events, _ = await run(Agent(provider=provider, tools=[look], model="my-own-model"),
                                  Limits(max_turn_cost_usd=0.01))
    assert result.status is TurnStatus.COMPLETED
    assert result.usage == Usage(2 * 10**7, 10**6 + 10)
    assert result.usage.cost_usd is None
    (error,) = of(events, K.ERROR)
    assert (error.message, error.source, error.turn_id) == (
        "no price is known for model 'my-own-model': Limits.max_turn_cost_usd does not count "
        "its calls (install steerable[prices], or set a token budget)", "turn", result.turn_id)


async def test_each_unpriced_model_of_a_turn_is_reported_once() -> None:
    from steerable.providers import StreamEnd

    class Answering:
        """Plays a script, each response saying it came from the next of ``models``."""

        def __init__(self, script: list[Reply], models: list[str]) -> None:
            self.inner, self.models = ScriptedProvider(script), iter(models)

        async def stream(self, request: Any) -> Any:
            async for chunk in self.inner.stream(request):
                if isinstance(chunk, StreamEnd):
                    chunk = StreamEnd(chunk.usage, chunk.finish_reason, next(self.models))
                yield chunk

        async def aclose(self) -> None:
            return None

    provider = Answering([Reply(tool_calls=calls("a"), usage=Usage(10, 1)),
                          Reply(tool_calls=calls("b"), usage=Usage(10, 1)),
                          Reply(text="done", usage=Usage(10, 1))],
                         ["own-a", "own-b", "own-a"])
    result, events, _ = await run(Agent(provider=provider, tools=[look]),  # type: ignore[arg-type]
                                  Limits(max_turn_cost_usd=0.01))
    assert result.status is TurnStatus.COMPLETED
    assert [e.message.split(":")[0] for e in of(events, K.ERROR)] == [
        "no price is known for model 'own-a'", "no price is known for model 'own-b'"]


async def test_usage_and_cost_without_any_budget() -> None:
    provider = ScriptedProvider([Reply(tool_calls=calls("a"), usage=Usage(1000, 10, 800)),
                                 Reply(text="done", usage=Usage(2000, 20, 1000))])
    result, events, _ = await run(Agent(provider=provider, tools=[look], model="gpt-4o-mini"),
                                  Limits())
    assert (result.usage.input_tokens, result.usage.output_tokens,
            result.usage.cached_tokens) == (3000, 30, 1800)
    assert result.usage.cost_usd == pytest.approx((1200 * 0.15 + 1800 * 0.075 + 30 * 0.6) / 1e6)
    assert of(events, K.TURN_END)[0].usage == result.usage


# -- sub-turns spend their parent's budget ---------------------------------------------------

def parent_with(child_script: list[Any], parent_script: list[Any], **kw: Any) -> Agent:
    kid = Agent(name="kid", description="helps", tools=[look],
                provider=ScriptedProvider(child_script))
    return Agent(name="main", provider=ScriptedProvider(parent_script), subagents=[kid],
                 tools=[look], **kw)


async def test_a_childs_tokens_count_toward_the_parent_and_stop_both() -> None:
    main = parent_with(
        [Reply(tool_calls=calls("x"), usage=Usage(700, 100)), Reply(text="kid summary")],
        [Reply(tool_calls=[("subagent", {"agent": "kid", "task": "dig"})], usage=Usage(300, 10)),
         Reply(text="main summary", usage=Usage(50, 5))])
    result, events, _ = await run(main, Limits(max_turn_tokens=1000))
    child_end = [e for e in of(events, K.TURN_END) if e.parent_turn_id is not None]
    assert [e.status for e in child_end] == [TurnStatus.BUDGET_EXCEEDED]
    assert of(events, K.SUBTURN_END)[0].status is TurnStatus.BUDGET_EXCEEDED
    assert result.status is TurnStatus.BUDGET_EXCEEDED and result.text == "main summary"
    # the parent's usage holds the child's
    assert result.usage == Usage(300 + 700 + 50, 10 + 100 + 5)
    skipped = of(events, K.TOOL_EXEC_SKIPPED)
    assert [(e.tool_name, e.reason) for e in skipped] == [("look", "budget")]
    hints = [e.hint for e in of(events, K.INTERRUPT_RECEIVED)]
    assert hints[0].endswith("(counting a parent turn's use)")


async def test_a_childs_tool_calls_count_toward_the_parents_budget() -> None:
    main = parent_with(
        [Reply(tool_calls=calls("x", "y")), Reply(text="kid summary")],
        [Reply(tool_calls=[("subagent", {"agent": "kid", "task": "dig"})]),
         Reply(text="main summary")])
    result, events, _ = await run(main, Limits(max_tool_calls=2))
    # the parent's subagent call took one; the child got room for one of its two
    ends = of(events, K.TOOL_EXEC_END)
    assert sorted(e.tool_name for e in ends) == ["look", "subagent"]
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert skipped.reason == "budget"
    child_end = next(e for e in of(events, K.TURN_END) if e.parent_turn_id is not None)
    assert child_end.status is TurnStatus.BUDGET_EXCEEDED
    assert result.status is TurnStatus.COMPLETED  # its own calls stayed within the budget


async def test_a_spawned_childs_usage_reaches_the_parent_while_it_runs() -> None:
    gate = asyncio.Event()

    async def slow_child(_request: Any) -> Reply:
        await gate.wait()
        return Reply(text="late", usage=Usage(5000, 5))

    async def open_gate(_request: Any) -> Reply:
        gate.set()
        await asyncio.sleep(0.02)
        return Reply(tool_calls=calls("z"), usage=Usage(10, 1))

    main = parent_with([slow_child], [
        Reply(tool_calls=[("spawn", {"agent": "kid", "task": "dig"})], usage=Usage(10, 1)),
        open_gate, Reply(text="main summary", usage=Usage(10, 1))])
    result, events, _ = await run(main, Limits(max_turn_tokens=1000))
    assert result.status is TurnStatus.BUDGET_EXCEEDED
    assert [e.reason for e in of(events, K.TOOL_EXEC_SKIPPED)] == ["budget"]
    assert result.usage is not None and result.usage.input_tokens == 5030


async def test_a_users_interrupt_keeps_its_own_status_when_a_budget_is_also_reached() -> None:
    loop_ref: list[AgentLoop] = []

    def interrupt_then_call(_request: Any) -> Reply:
        loop_ref[0].interrupt_graceful(session_id="s")
        return Reply(tool_calls=calls("a"), usage=Usage(5000, 5))

    provider = ScriptedProvider([interrupt_then_call, Reply(text="stopped")])
    loop = AgentLoop(Agent(provider=provider, tools=[look]), limits=Limits(max_turn_tokens=10))
    loop_ref.append(loop)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.INTERRUPTED
    await loop.aclose()
