"""The coding agent's tool policy, driven with the scripted provider (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider, TurnStatus, tool
from steerable.coding import Sandbox, Workspace, coding_tools
from steerable.coding._confirm import CONFIRM_SYSTEM
from steerable.coding._paths import PATHS_LIMIT
from steerable.coding._sandbox import bwrap_usable
from steerable.coding.policy import NOTHING_CHANGED_MARK, UNVERIFIED_MARK, ToolPolicy


def kind(k: str) -> Reply:
    return Reply(text=json.dumps({"kind": k}))


def change() -> tuple[Reply, Reply]:
    """A change request as the policy reads it: the classification, and the second reading
    that confirms it (``_confirm``)."""
    return kind("change"), Reply(text=json.dumps({"needs": "writing"}))


async def _run(ws: Path, prompt: str, *script: Reply, policy_timeout: float = 60.0,
               extra: tuple[Any, ...] = (),
               **policy: Any) -> tuple[Any, list[Any], ScriptedProvider, ToolPolicy]:
    provider = ScriptedProvider(list(script))
    workspace = Workspace(ws)
    tools = [*coding_tools(workspace, sandbox=Sandbox(enabled=bwrap_usable() is not None)),
             *extra]
    loop = AgentLoop(Agent(provider=provider, tools=tools, max_iterations=10))
    hook = ToolPolicy(workspace, **policy)
    loop.register_hook(hook, timeout=policy_timeout)
    sub = loop.subscribe()
    try:
        result = await loop.run_turn(prompt, session_id="s")
    finally:
        await loop.aclose()
    provider.assert_consumed()
    return result, sub.drain_nowait(), provider, hook


def sent(provider: ScriptedProvider) -> list[Any]:
    """The requests the provider was sent, but the second readings of a change."""
    return [r for r in provider.requests
            if not (r.messages and r.messages[0].content == CONFIRM_SYSTEM)]


def _requests(events: list[Any]) -> list[Any]:
    """The model calls, but the second reading of a change (its tests are its own)."""
    return [e for e in events if e.kind is EventKind.LLM_REQUEST and e.purpose != "confirm"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "utils.py").write_text("def helper(x):\n    return x * 2\n")
    (tmp_path / "notes.txt").write_text("Sync on Monday in room B123.\n")
    return tmp_path


async def test_a_question_may_only_read_and_nothing_it_emits_writes(ws):
    result, events, _, hook = await _run(
        ws, "Was macht die Funktion in utils.py?", kind("workspace"),
        Reply(tool_calls=[("write", {"path": "utils.py", "content": "x = 1\n"})]),
        Reply(tool_calls=[("read", {"path": "utils.py"})]),
        Reply(text="helper returns x * 2."))
    assert (ws / "utils.py").read_text() == "def helper(x):\n    return x * 2\n"
    classify, first, second, third = _requests(events)
    assert classify.purpose == "classify" and classify.tool_choice == "none"
    assert first.tool_choice == "required" and first.may_call == ("read", "grep", "ls", "find")
    assert "workspace: nothing may change" in first.reason
    skipped = [e for e in events if e.kind is EventKind.TOOL_EXEC_SKIPPED]
    assert [(e.tool_name, e.reason) for e in skipped] == [("write", "denied")]
    # the denied write was no look, so a look is still required; after the read, optional
    assert second.tool_choice == "required" and third.tool_choice == "auto"
    assert result.text == "helper returns x * 2."
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.intent == "workspace" and not verdict.unverified


@pytest.mark.parametrize("reply", ["", "change", '{"kind": "CHANGE"}', '{"kind": ["change"]}',
                                   '{"kind": "delete"}', "not json at all"])
async def test_a_classification_that_is_not_exactly_change_keeps_the_files(ws, reply):
    await _run(ws, "whatever", Reply(text=reply),
               Reply(tool_calls=[("edit", {"path": "utils.py", "old_text": "x * 2",
                                           "new_text": "x * 3"})]),
               Reply(text="done"))
    assert "x * 2" in (ws / "utils.py").read_text()


async def test_the_gate_holds_when_the_policy_hook_fails(ws):
    # The hook times out while classifying: the loop goes on without it, the files do not.
    async def slow(request: Any) -> Reply:
        import asyncio
        await asyncio.sleep(1)
        return kind("change")
    provider_steps = [slow, Reply(tool_calls=[("write", {"path": "new.txt", "content": "x"})]),
                      Reply(text="written")]
    result, events, *_ = await _run(ws, "create new.txt", *provider_steps,  # type: ignore[arg-type]
                                    policy_timeout=0.2)
    assert not (ws / "new.txt").exists()
    end = next(e for e in events if e.kind is EventKind.TOOL_EXEC_END)
    assert end.is_error and "nothing was changed" in end.content


async def test_a_change_reads_after_a_failed_edit_and_may_go_on_after_one(ws):
    (ws / "main.py").write_text("import utils\n")
    result, events, _, hook = await _run(
        ws, "add a function triple and call it from main.py", *change(),
        Reply(tool_calls=[("edit", {"path": "utils.py", "old_text": "nope", "new_text": "x"})]),
        Reply(tool_calls=[("read", {"path": "utils.py"})]),
        Reply(tool_calls=[("edit", {"path": "utils.py", "old_text": "return x * 2\n",
                                    "new_text": "return x * 2\n\ndef triple(x):\n"
                                                "    return x * 3\n"})]),
        Reply(tool_calls=[("edit", {"path": "main.py", "old_text": "import utils\n",
                                    "new_text": "import utils\nprint(utils.triple(2))\n"})]),
        Reply(text="Added triple to utils.py and called it in main.py."))
    assert "def triple" in (ws / "utils.py").read_text()
    assert "triple(2)" in (ws / "main.py").read_text()
    choices = [(r.tool_choice, r.may_call) for r in _requests(events)[1:]]
    # required until a change succeeded (after the failed edit of a file it never read, that
    # read is the call offered), then optional, then the round limit (4): answer; the files
    # it names exist, so a required call changes them by edit, never by a whole write
    no_write = ("read", "edit", "bash", "grep", "ls", "find")
    assert choices == [("required", no_write), ("required", ("read",)),
                       ("required", no_write), ("auto", None), ("none", None)]
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.changed and NOTHING_CHANGED_MARK not in result.text


async def test_a_change_that_changed_nothing_says_so(ws):
    result, _, _, hook = await _run(
        ws, "rename helper to double", *change(),
        Reply(tool_calls=[("read", {"path": "utils.py"})]),
        Reply(text="Renamed helper to double."), max_rounds=1)
    assert result.status is TurnStatus.COMPLETED
    assert NOTHING_CHANGED_MARK in result.text
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.change_missing


async def test_an_invented_fact_gets_one_more_look_then_one_more_chance_then_is_marked(ws):
    result, events, provider, hook = await _run(
        ws, "when is the sync?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="The sync is at 9 AM in room B123."),
        Reply(tool_calls=[("grep", {"pattern": "AM"})]),  # the look for '9'
        Reply(text="The sync is at 9 AM in room B123."),
        Reply(text="It is at 9 AM, in room B123."))
    purposes = [r.purpose for r in _requests(events)]
    assert purposes == ["classify", "", "", "evidence", "", "evidence"]
    look, recheck = sent(provider)[3], sent(provider)[-1]
    assert "'9'" in look.messages[-1].content and look.tool_choice.mode == "required"
    assert look.tool_choice.only == ("read", "grep", "ls", "find")
    assert "'9'" in recheck.messages[-1].content and recheck.tool_choice.mode == "none"
    assert f"{UNVERIFIED_MARK}: 9" in result.text
    shown = [e for e in events if e.kind is EventKind.LLM_RESPONSE and not e.purpose][-1]
    assert UNVERIFIED_MARK in shown.text  # the page and the CLI print this one
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and verdict.rechecked and verdict.unverified == ("9",)


async def test_a_fact_no_result_showed_is_looked_for_and_the_look_answers_it(ws):
    # The 1.5B read only the README a question named in passing ("See server.py.") and
    # answered "port 8080"; asked to answer from the evidence it could only say it did not know.
    (ws / "README.md").write_text("See server.py.\n")
    (ws / "server.py").write_text("PORT = 9759\n")
    result, events, provider, hook = await _run(
        ws, "I skimmed README.md. Which port?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "README.md"})]),
        Reply(text="The server listens on port 8080."),
        Reply(tool_calls=[("read", {"path": "server.py"})]),
        Reply(text="Port 9759."))
    assert result.text == "Port 9759." and UNVERIFIED_MARK not in result.text
    ends = [e.tool_name for e in events if e.kind is EventKind.TOOL_EXEC_END]
    assert ends == ["read", "read"]
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and not verdict.unverified


async def test_an_answer_stating_no_fact_while_a_file_is_unread_reads_one(ws):
    # The 1.5B read README.md for "when is the team sync?" and answered "I do not know" with
    # notes.txt never read: no fact stated, so nothing asked it to look further.
    (ws / "README.md").write_text("# Team\nSee the notes.\n")
    result, _, provider, hook = await _run(
        ws, "Quand a lieu la réunion ?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "README.md"})]),
        Reply(tool_calls=[("read", {"path": "README.md"})]),  # a repeat: answer now
        Reply(text="Je ne sais pas."),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="Lundi, salle B123."))
    assert result.text == "Lundi, salle B123."
    assert provider.requests[3].tool_choice.mode == "none"
    look = provider.requests[4]
    assert look.messages[-1].text.startswith("Your answer states nothing")
    assert look.tool_choice.mode == "required" and look.tool_choice.only == ("read",)
    assert look.tool_choice.values == (("read", (("path", ("notes.txt", "utils.py")),)),)
    verdict = hook.verdict(result.turn_id)
    assert verdict is not None and not verdict.unverified


async def test_an_answer_from_the_evidence_after_the_second_chance_is_not_marked(ws):
    result, *_ = await _run(
        ws, "when is the sync?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="At 9 AM."), Reply(text="no look"),  # the look asked for: none made
        Reply(text="On Monday, in room B123."))
    assert result.text == "On Monday, in room B123."


async def test_a_general_question_naming_a_workspace_file_is_read_as_a_look(ws):
    _, events, *_ = await _run(
        ws, "notse?", kind("general"), Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="Monday, room B123."))
    assert _requests(events)[1].tool_choice == "required"


async def test_a_general_question_gets_no_tools_and_its_arithmetic_is_not_a_claim(ws):
    result, events, provider, _ = await _run(ws, "What is 17 + 25?", kind("general"),
                                             Reply(text="42"))
    assert result.text == "42"
    assert _requests(events)[1].tool_choice == "none"
    assert sent(provider)[1].messages[-1].content.startswith("What is 17 + 25?\n\n(Note:")


async def test_steering_is_added_to_the_request_and_read_again(ws):
    provider = ScriptedProvider([kind("workspace"),
                                 Reply(tool_calls=[("read", {"path": "utils.py"})]),
                                 *change(),
                                 Reply(tool_calls=[("edit", {
                                     "path": "utils.py", "old_text": "x * 2",
                                     "new_text": "x * 3"})]),
                                 Reply(text="Now returns x * 3.")])
    workspace = Workspace(ws)
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(workspace)))
    loop.register_hook(ToolPolicy(workspace), timeout=60)

    def steer(ctx: Any) -> None:
        if ctx.call.name == "read":
            loop.inject_steering("and make it triple instead", "s")

    loop.register_hook(type("Steer", (), {"before_tool": staticmethod(steer)})())
    result = await loop.run_turn("what does helper do?", session_id="s")
    await loop.aclose()
    assert result.status is TurnStatus.COMPLETED, result.error
    assert "x * 3" in (ws / "utils.py").read_text()
    reclassify = sent(provider)[2]
    asked = [m.content for m in reclassify.messages if m.role == "user"]
    assert asked == ["what does helper do?\nand make it triple instead"]  # added, not replaced


@pytest.mark.skipif(bwrap_usable() is None, reason="bubblewrap is not usable here")
async def test_a_command_on_a_question_runs_with_the_workspace_read_only(ws):
    _, events, *_ = await _run(
        ws, "run it", kind("run"),
        Reply(tool_calls=[("bash", {"command": "cat notes.txt; echo x > notes.txt"})]),
        Reply(text="Sync on Monday in room B123."))
    assert (ws / "notes.txt").read_text() == "Sync on Monday in room B123.\n"
    end = next(e for e in events if e.kind is EventKind.TOOL_EXEC_END)
    assert "Sync on Monday" in end.content and "Read-only file system" in end.content


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=st.text(max_size=40), name=st.sampled_from(["write", "edit", "bash"]))
async def test_no_classification_but_change_lets_any_acting_call_change_a_file(tmp_path, reply,
                                                                              name):
    ws = tmp_path / f"w{abs(hash((reply, name)))}"
    ws.mkdir()
    (ws / "a.txt").write_text("keep\n")
    if reply.strip() == json.dumps({"kind": "change"}):
        return
    args = {"write": {"path": "a.txt", "content": "lost\n"},
            "edit": {"path": "a.txt", "old_text": "keep", "new_text": "lost"},
            "bash": {"command": "echo lost > a.txt"}}[name]
    await _run(ws, "a.txt", Reply(text=reply), Reply(tool_calls=[(name, args)]),
               *([Reply(tool_calls=[(name, args)])] * 3), Reply(text="ok"), max_rounds=4)
    assert (ws / "a.txt").read_text() == "keep\n"


async def test_the_last_call_of_a_turn_must_answer_and_the_policy_leaves_it_so(ws):
    # The last call lists the tools (its prompt starts as the earlier calls' did, so a server's
    # cache keeps it) with ToolChoice("none"): the policy must not turn it back into a call.
    provider = ScriptedProvider([kind("workspace"), Reply(tool_calls=[("read", {"path": "utils.py"})]),
                                 Reply(text="helper returns x * 2.")])
    workspace = Workspace(ws)
    loop = AgentLoop(Agent(provider=provider, tools=coding_tools(workspace), max_iterations=2))
    loop.register_hook(ToolPolicy(workspace), timeout=60)
    sub = loop.subscribe()
    try:
        result = await loop.run_turn("What does utils.py do?", session_id="s")
    finally:
        await loop.aclose()
    provider.assert_consumed()
    classify, first, last = _requests(sub.drain_nowait())
    assert classify.purpose == "classify" and first.tool_choice == "required"
    assert last.tool_choice == "none" and last.tools == first.tools
    assert last.reason == "the last call of the turn: answer in words"
    assert result.status is TurnStatus.MAX_ITERATIONS and result.text == "helper returns x * 2."


async def test_naming_the_offered_tools_is_no_fact_to_recheck(ws):
    # The 1.5B answered a French question with the steps, naming `read` and `path`: the recheck
    # was asked for a tool's name, as if it were a fact about the files.
    result, events, *_ = await _run(
        ws, "Que dit notes.txt ?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="J'ai utilisé `read` (`path`, `offset`) : lundi, salle B123."))
    assert [r.purpose for r in _requests(events)] == ["classify", "", ""]
    assert UNVERIFIED_MARK not in result.text


async def test_a_required_look_may_name_only_paths_that_exist_or_the_request_names(ws):
    # The 1.5B asked for `team.txt` and `notes` again and again, the error naming notes.txt.
    (ws / "docs").mkdir()
    (ws / "docs" / "a.md").write_text("x\n")
    _, events, provider, _ = await _run(
        ws, "Was steht in secret.txt?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "secret.txt"})]),  # named: allowed, then failed
        Reply(tool_calls=[("ls", {"path": "."})]),
        Reply(text="secret.txt gibt es nicht."))
    first, second = (r.tool_choice for r in sent(provider)[1:3])
    files = ("notes.txt", "utils.py", "docs/a.md")  # the top folder's first
    assert {t: dict(held) for t, held in first.values} == {
        "read": {"path": (*files, "secret.txt")},
        "grep": {"path": (".", "docs", *files, "secret.txt")},
        "ls": {"path": (".", "docs", "secret.txt")}, "find": {"path": (".", "docs", "secret.txt")}}
    assert {t: dict(held) for t, held in second.values}["ls"] == {"path": (".", "docs")}
    assert sent(provider)[3].tool_choice.values == ()  # an optional call: no grammar


async def test_paths_are_not_held_in_a_workspace_too_big_to_list(ws):
    for i in range(PATHS_LIMIT):
        (ws / f"f{i}.txt").write_text("x\n")
    _, _, provider, _ = await _run(
        ws, "what is in notes.txt", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]), Reply(text="Monday, room B123."))
    assert sent(provider)[1].tool_choice.mode == "required"
    assert sent(provider)[1].tool_choice.values == ()


async def test_looks_that_showed_nothing_are_left_out_once_one_showed_something(ws):
    # The 1.5B read notes.txt after a grep found nothing and answered "notes.txt does not
    # contain any lines".
    _, _, provider, _ = await _run(
        ws, "waht does notse.txt say", kind("workspace"),
        Reply(tool_calls=[("grep", {"pattern": "notse"})]),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(text="Sync on Monday in room B123."))
    second, third = sent(provider)[2:4]
    assert any("No matches" in m.text for m in second.messages)  # nothing else was shown yet
    assert not any("No matches" in m.text or any(c.name == "grep" for c in m.tool_calls)
                   for m in third.messages)
    assert any("room B123" in m.text for m in third.messages if m.role == "tool")


async def test_an_answer_is_bounded_as_a_call_is(ws):
    # Under load the 1.5B wrote one answer for ten minutes.
    _, _, provider, _ = await _run(
        ws, "when is the sync?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),
        Reply(tool_calls=[("read", {"path": "notes.txt"})]),  # a repeat: answer now
        Reply(text="Monday, room B123."), answer_tokens=77)
    last = sent(provider)[-1].tool_choice
    assert last.mode == "none" and last.max_tokens == 77


async def test_a_failed_look_at_a_file_the_request_names_is_kept_for_the_answer(ws):
    # "secrets.txt does not exist" is the answer to "what does secrets.txt say?"; left out
    # once a listing showed something, the 1.5B answered with the steps of a look.
    _, _, provider, _ = await _run(
        ws, "What does secrets.txt say, next to notes.txt?", kind("workspace"),
        Reply(tool_calls=[("read", {"path": "secrets.txt"})]),
        Reply(tool_calls=[("grep", {"pattern": "secret", "path": "notes.txt"})]),  # no match
        Reply(tool_calls=[("ls", {"path": "."})]),
        Reply(text="There is no secrets.txt."))
    last = sent(provider)[-1].messages
    assert any("secrets.txt does not exist" in m.text for m in last if m.role == "tool")
    # A search that matched nothing is left out, in a named file or not.
    assert not any("No matches" in m.text for m in last)


async def test_a_question_that_sends_the_same_denied_call_again_answers_now(ws):
    # The 1.5B had the line counts in a listing, called `bash` (no question may) twice more
    # to the round limit, and answered from the denials: the second denial ends the looking.
    _, events, *_ = await _run(
        ws, "Count the lines of each .py file.", kind("workspace"),
        Reply(tool_calls=[("ls", {"path": "."})]),
        Reply(tool_calls=[("bash", {"command": "wc -l *.py"})]),
        Reply(tool_calls=[("bash", {"command": "wc -l *.py"})]),
        Reply(text="utils.py: 2 lines."))
    choices = [r.tool_choice for r in _requests(events)[1:]]
    assert choices == ["required", "auto", "auto", "none"]


async def test_a_general_question_may_call_a_read_only_tool_beside_the_agents_own(ws):
    # BFCL's "area of a triangle" was read as general and answered "I cannot do it" beside the
    # function that computes it: the reading forbids the agent's own tools, not the others.
    @tool(read_only=True)
    def triangle_area(base: float, height: float) -> float:
        """The area of a triangle."""
        return base * height / 2

    @tool
    def send_mail(to: str) -> str:
        """Sends a mail (it changes the world: never on a general reading)."""
        return "sent"

    result, events, provider, _ = await _run(
        ws, "Find the area of a triangle with base 10 and height 5.", kind("general"),
        Reply(tool_calls=[("triangle_area", {"base": 10, "height": 5})]),
        Reply(text="25"), extra=(triangle_area, send_mail))
    first, second = _requests(events)[1:3]
    assert (first.tool_choice, first.may_call) == ("auto", ("triangle_area",))
    assert not sent(provider)[1].messages[-1].text.endswith("cannot do it.)")
    assert second.tool_choice == "auto" and result.text == "25"
    # Without such a tool a general question still gets none, and the note.
    _, events, provider, _ = await _run(ws, "What is 17 + 25?", kind("general"),
                                        Reply(text="42"), extra=(send_mail,))
    assert _requests(events)[1].tool_choice == "none"
