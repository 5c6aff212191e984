"""How a hook ends a turn, and what is said when a hook misbehaves: the exact words, once."""

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
    TurnStatus,
    tool,
)
from tests.conftest import of

K = EventKind


@tool
def write(path: str) -> str:
    """Write."""
    return f"wrote {path}"


async def run_with(hook: Any, script: list[Reply] | None = None) -> tuple[Any, list[Any]]:
    script = script or [Reply(tool_calls=[("write", {"path": "a"})]), Reply(text="done")]
    loop = AgentLoop(Agent(provider=ScriptedProvider(script), tools=[write]))
    loop.register_hook(hook)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    return result, sub.drain_nowait()


@pytest.mark.parametrize("reason,hint", [("", "aborted by a before_tool hook"),
                                         ("policy says no", "policy says no")])
async def test_an_abort_from_a_hook_says_why(reason: str, hint: str) -> None:
    class Stop:
        def before_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.ABORT_TURN, reason=reason)

    result, events = await run_with(Stop())
    assert result.status is TurnStatus.ABORTED
    assert [(e.mode, e.hint) for e in of(events, K.INTERRUPT_RECEIVED)] == [("abort_turn", hint)]


@pytest.mark.parametrize("reason,hint", [
    ("", "hook before_llm asked for a hard abort"),
    ("runaway cost", "hook before_llm asked for a hard abort: runaway cost")])
async def test_a_hard_abort_from_a_hook_says_why(reason: str, hint: str) -> None:
    class Kill:
        def before_llm(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.HARD_ABORT, reason=reason)

    result, events = await run_with(Kill())
    assert result.status is TurnStatus.ABORTED
    assert [(e.mode, e.hint, e.turn_id, e.session_id) for e in
            of(events, K.INTERRUPT_RECEIVED)] == [("hard", hint, result.turn_id, "s")]


async def test_a_hook_returning_garbage_is_reported_each_time_and_ignored() -> None:
    class Garbage:
        def before_llm(self, ctx: Any) -> int:
            return 42

    result, events = await run_with(Garbage())
    assert result.status is TurnStatus.COMPLETED and result.text == "done"
    errors = of(events, K.ERROR)
    assert [(e.message, e.source, e.turn_id) for e in errors] == [
        ("hook Garbage.before_llm returned int; expected None or HookDecision (ignored)", "hook",
         result.turn_id)] * 2


async def test_an_approver_with_an_invalid_answer_denies_and_says_so() -> None:
    class Vague:
        def approve_tool(self, ctx: Any) -> str:
            return "maybe"

    result, events = await run_with(Vague())
    (error,) = of(events, K.ERROR)
    assert (error.message, error.source, error.turn_id) == (
        "approver Vague returned str; treated as a denial", "hook", result.turn_id)
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert (skipped.reason, skipped.detail) == ("denied", "approver Vague returned an invalid answer")


async def test_fields_a_point_does_not_read_are_named_and_the_rest_applies() -> None:
    class Mixed:
        def after_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, result="changed", text="x", model="m")

    class One:
        def after_tool(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, is_error=False, model="m")

    result, events = await run_with(Mixed())
    assert [e.content for e in of(events, K.TOOL_EXEC_END)] == ["changed"]
    assert [e.message for e in of(events, K.ERROR)] == [
        "hook Mixed.after_tool modify: model, text do not apply here (ignored)"]
    _, events = await run_with(One())
    assert [e.message for e in of(events, K.ERROR)] == [
        "hook One.after_tool modify: model does not apply here (ignored)"]


async def test_a_sync_hook_method_may_hand_back_a_coroutine() -> None:
    class Deferred:
        async def _decide(self, ctx: Any) -> HookDecision:
            return HookDecision(HookAction.MODIFY, arguments={"path": "b"})

        def before_tool(self, ctx: Any) -> Any:
            return self._decide(ctx)

    _, events = await run_with(Deferred())
    assert [e.content for e in of(events, K.TOOL_EXEC_END)] == ["wrote b"]


def test_registration_checks_priority_and_timeout() -> None:
    loop = AgentLoop(Agent(provider=ScriptedProvider([])))

    class Hook:
        def before_llm(self, ctx: Any) -> None:
            return None

    for bad in (True, 1.5, "1"):
        with pytest.raises(TypeError, match=f"hook priority must be an int, got "
                                            f"{type(bad).__name__}"):
            loop.register_hook(Hook(), priority=bad)  # type: ignore[arg-type]
    for bad_timeout in (0, -1, True, "2"):
        with pytest.raises((ValueError, TypeError),
                           match="hook timeout must be a positive number of seconds"):
            loop.register_hook(Hook(), timeout=bad_timeout)  # type: ignore[arg-type]
    loop.register_hook(Hook(), timeout=0.5)
    loop.register_hook(Hook(), priority=-3)


async def test_a_graceful_interrupt_hint_must_be_text() -> None:
    loop = AgentLoop(Agent(provider=ScriptedProvider([])))
    with pytest.raises(TypeError, match=r"^hint must be a str or None, got int$"):
        loop.interrupt_graceful("s", hint=3)  # type: ignore[arg-type]
