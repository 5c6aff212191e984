"""What a tool's context and a hook failure's report say about where they are: the call, the
turn, its parent, the session and the iteration, in a turn and in a sub-turn."""

from __future__ import annotations

import time
from typing import Any, ClassVar

import pytest

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Permissions,
    Reply,
    ScriptedProvider,
    ToolContext,
    TurnStatus,
    tool,
)
from tests.conftest import of

K = EventKind


def recording_tools(seen: list[ToolContext]) -> list[Any]:
    @tool(read_only=True)
    def probe(n: int, ctx: ToolContext) -> str:
        """Probe."""
        seen.append(ctx)
        ctx.progress(f"probing {n}", n=n)
        return "refused" if ctx.refuses("secret.txt") else "open"

    return [probe]


async def test_a_tool_context_names_its_call_turn_session_and_iteration() -> None:
    seen: list[ToolContext] = []
    provider = ScriptedProvider([Reply(text="thinking"), Reply(tool_calls=[("probe", {"n": 1})]),
                                 Reply(tool_calls=[("probe", {"n": 2})]), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=recording_tools(seen)))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("warm up", session_id="s")
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    calls = [c for e in of(events, K.LLM_RESPONSE) for c in e.tool_calls]
    assert [(c.call_id, c.tool_name, c.turn_id, c.session_id, c.parent_turn_id, c.iteration)
            for c in seen] == [(calls[0].id, "probe", result.turn_id, "s", None, 1),
                               (calls[1].id, "probe", result.turn_id, "s", None, 2)]
    assert not any(c.dry_run or c.resumed for c in seen)
    progress = of(events, K.TOOL_EXEC_PROGRESS)
    assert [(p.call_id, p.text, p.data) for p in progress] == [
        (calls[0].id, "probing 1", {"n": 1}), (calls[1].id, "probing 2", {"n": 2})]
    assert [e.content for e in of(events, K.TOOL_EXEC_END)] == ["open", "open"]


@pytest.mark.parametrize("dry_run", [True, False])
async def test_a_tool_context_and_a_tool_hooks_context_say_whether_it_is_a_dry_run(
        dry_run: bool) -> None:
    seen: list[ToolContext] = []
    hook_saw: list[Any] = []

    class Watch:
        def before_tool(self, ctx: Any) -> None:
            hook_saw.append(ctx.dry_run)

    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"n": 1})]), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=recording_tools(seen), dry_run=dry_run))
    loop.register_hook(Watch())
    await loop.run_turn("go", session_id="s")
    assert [c.dry_run for c in seen] == hook_saw == [dry_run]


async def test_a_tool_context_in_a_sub_turn_names_the_parent_turn() -> None:
    seen: list[ToolContext] = []
    hook_saw: list[Any] = []

    class Watch:
        def before_tool(self, ctx: Any) -> None:
            hook_saw.append(ctx)

    kid = Agent(name="kid", description="a kid", tools=recording_tools(seen),
                provider=ScriptedProvider([Reply(tool_calls=[("probe", {"n": 7})]),
                                           Reply(text="kid done")]))
    main = Agent(name="main", subagents=[kid], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "kid", "task": "probe it"})]),
        Reply(text="all done")]))
    loop = AgentLoop(main)
    loop.register_hook(Watch())
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.status is TurnStatus.COMPLETED
    (spawn,) = of(sub.drain_nowait(), K.SUBTURN_SPAWN)
    (ctx,) = seen
    assert (ctx.turn_id, ctx.parent_turn_id, ctx.session_id, ctx.iteration) == (
        spawn.child_turn_id, result.turn_id, "s", 1)
    assert [(h.turn_id, h.parent_turn_id, h.call.name) for h in hook_saw] == [
        (result.turn_id, None, "subagent"), (spawn.child_turn_id, result.turn_id, "probe")]


async def test_a_failing_hook_is_reported_on_the_turn_it_failed_in() -> None:
    class Broken:
        def before_llm(self, ctx: Any) -> None:
            raise RuntimeError("hook bug")

    kid = Agent(name="kid", description="a kid",
                provider=ScriptedProvider([Reply(text="kid done")]))
    main = Agent(name="main", subagents=[kid], provider=ScriptedProvider([
        Reply(tool_calls=[("subagent", {"agent": "kid", "task": "go"})]), Reply(text="done")]))
    loop = AgentLoop(main)
    loop.register_hook(Broken())
    sub = loop.subscribe(buffer=10_000)
    before = time.time()
    result = await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    errors = of(events, K.ERROR)
    assert [(e.turn_id, e.parent_turn_id, e.session_id) for e in errors] == [
        (result.turn_id, None, "s"), (spawn.child_turn_id, result.turn_id, "s"),
        (result.turn_id, None, "s")]
    assert all("hook bug" in e.message and e.source == "hook" for e in errors)
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(before <= e.time <= time.time() for e in errors)


async def test_a_tool_context_knows_what_the_permission_rules_refuse() -> None:
    seen: list[ToolContext] = []
    provider = ScriptedProvider([Reply(tool_calls=[("probe", {"n": 1})]), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=recording_tools(seen)),
                     permissions=Permissions([("deny", "probe(secret.txt)")]))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    assert [e.content for e in of(sub.drain_nowait(), K.TOOL_EXEC_END)] == ["refused"]


async def test_a_tool_that_ignores_cancellation_is_let_go_of_when_the_loop_closes() -> None:
    # In-process half of test_prompt_exit: after aclose the stubborn task is off the event
    # loop's registry (asyncio.run will not wait for it) and will not log "destroyed pending".
    import asyncio

    started = asyncio.Event()

    @tool(read_only=True)
    async def stubborn() -> str:
        """Never stops."""
        started.set()
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                continue

    provider = ScriptedProvider([Reply(tool_calls=[("stubborn", {})])])
    loop = AgentLoop(Agent(provider=provider, tools=[stubborn]))
    handle = loop.start_turn("go", session_id="s")
    await started.wait()
    loop.interrupt_hard("s")
    assert (await handle).status is TurnStatus.ABORTED
    mine = {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}
    stuck = [t for t in mine if not t.done()]
    assert stuck  # the tool is still running: it ignored its cancel
    await loop.aclose()
    left = {t for t in asyncio.all_tasks() if not t.done()} - {asyncio.current_task()}
    assert not (left & set(stuck))
    assert all(t._log_destroy_pending is False for t in stuck)  # type: ignore[attr-defined]


async def test_rules_on_a_tool_family_reach_a_tools_own_refusal_checks() -> None:
    @tool(read_only=True, permission_family="read")
    def lister(path: str, ctx: ToolContext) -> str:
        """List."""
        return ",".join(name for name in ("a.txt", "secret.txt", "notes.md")
                        if not ctx.refuses(name))

    cases = [([("deny", "read(secret*)")], "a.txt,notes.md"),
             ([("ask", "read(*.md)")], "a.txt,secret.txt"),
             ([("allow", "read(*.txt)")], "a.txt,secret.txt,notes.md"),
             ([("deny", "write(secret*)")], "a.txt,secret.txt,notes.md"),
             ([("deny", "lister(a.*)")], "secret.txt,notes.md")]
    for rules, expected in cases:
        provider = ScriptedProvider([Reply(tool_calls=[("lister", {"path": "."})]),
                                     Reply(text="done")])
        loop = AgentLoop(Agent(provider=provider, tools=[lister]),
                         permissions=Permissions(rules))
        sub = loop.subscribe(buffer=10_000)
        await loop.run_turn("go", session_id="s")
        assert [e.content for e in of(sub.drain_nowait(), K.TOOL_EXEC_END)] == [expected], rules
        await loop.aclose()


async def test_closing_the_loop_aborts_a_child_its_parent_left_running() -> None:
    import asyncio

    never = asyncio.Event()

    async def hang(request: Any) -> Reply:
        await never.wait()
        return Reply(text="never")

    kid = Agent(name="kid", description="a kid", provider=ScriptedProvider([hang]))
    main = Agent(name="main", subagents=[kid], provider=ScriptedProvider([
        Reply(tool_calls=[("spawn", {"agent": "kid", "task": "background"})]),
        Reply(text="parent done")]))
    loop = AgentLoop(main)
    sub = loop.subscribe(buffer=10_000)
    result = await loop.run_turn("go", session_id="s")
    assert result.text == "parent done"
    await asyncio.wait_for(loop.aclose(grace=0.2), 10)  # returns: nothing left hanging
    events = sub.drain_nowait()
    (spawn,) = of(events, K.SUBTURN_SPAWN)
    ends = [e for e in of(events, K.TURN_END) if e.turn_id == spawn.child_turn_id]
    assert [e.status for e in ends] == [TurnStatus.ABORTED]


async def test_rules_on_a_family_decide_calls_of_its_tools_by_their_subjects() -> None:
    from pathlib import PurePosixPath

    from steerable.tools import BaseTool

    class Lister(BaseTool):
        name = "lister"
        description = "List a folder."
        read_only = True
        permission_family = "read"
        parameters: ClassVar[dict[str, Any]] = {
            "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}

        def permission_subjects(self, arguments: Any) -> list[Any]:
            return [PurePosixPath(arguments["path"])]  # not a str: compared as text

        async def run(self, arguments: Any, ctx: ToolContext) -> str:
            return f"listed {arguments['path']}"

    class Bare:
        """A tool by the protocol alone: no family, no subjects of its own."""

        name = "bare"
        description = "Bare."
        read_only = True
        timeout = None
        parameters: ClassVar[dict[str, Any]] = {
            "type": "object", "properties": {"path": {"type": "string"}}}

        def validate(self, arguments: Any) -> Any:
            return arguments

        async def run(self, arguments: Any, ctx: ToolContext) -> str:
            return "bare ran"

        def preview(self, arguments: Any, ctx: ToolContext) -> str:
            return "bare"

    calls = [("lister", {"path": "secret/keys"}), ("lister", {"path": "docs"}),
             ("bare", {"path": "secret/keys"})]
    provider = ScriptedProvider([Reply(tool_calls=calls), Reply(text="done")])
    loop = AgentLoop(Agent(provider=provider, tools=[Lister(), Bare()]),
                     permissions=Permissions([("deny", "read(secret/*)")]))
    sub = loop.subscribe(buffer=10_000)
    await loop.run_turn("go", session_id="s")
    events = sub.drain_nowait()
    assert sorted(e.content for e in of(events, K.TOOL_EXEC_END)) == ["bare ran", "listed docs"]
    (skipped,) = of(events, K.TOOL_EXEC_SKIPPED)
    assert skipped.reason == "denied" and "read(secret/*)" in skipped.detail


def test_a_bare_allow_rule_covers_calls_with_no_or_unreadable_subjects() -> None:
    from steerable import Permission
    from steerable.tools import UncoveredSubject

    bare = Permissions([("allow", "bash")])
    for subjects in ([], [UncoveredSubject("echo $((1+1))")], ["ls"]):
        permission, rule = bare.decide("bash", subjects, read_only=False)
        assert (permission, str(rule)) == (Permission.ALLOW, "allow: bash"), subjects
    narrow = Permissions([("allow", "bash(ls *)")])
    assert narrow.decide("bash", [UncoveredSubject("ls $(x)")], read_only=False)[0] \
        is Permission.ASK
    assert narrow.decide("bash", [], read_only=False)[0] is Permission.ASK


def test_rules_given_as_rules_or_as_pairs_are_kept_in_order() -> None:
    from steerable import Permission, PermissionRule

    kept = PermissionRule(Permission.DENY, "write", "secret/*", session_id="s")
    rules = Permissions([kept, ("allow", "read")]).rules
    assert rules == (kept, PermissionRule(Permission.ALLOW, "read"))
    assert Permissions([kept]).decide("write", ["secret/a"], read_only=False,
                                      session_id="s") == (Permission.DENY, kept)
