"""The todo tool: PLAN_UPDATED events through the CLI, drawn as a checklist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from steerable import EventKind, ToolContext
from steerable.coding import PLAN_STATUSES, make_todo_tool
from tests.coding.conftest import call


def steerable(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "steerable", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


PLAN = [{"content": "read the code", "status": "done"},
        {"content": "fix the bug", "status": "in_progress"},
        {"content": "run the tests", "status": "pending"}]


def run_plan(env: dict[str, str], tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    steps = [{"tool_calls": [["todo", {"items": [*PLAN[:1], dict(PLAN[1], status="pending")]}]]},
             {"tool_calls": [["todo", {"items": PLAN}]]},
             {"text": "On it."}]
    (tmp_path / "s.json").write_text(json.dumps(steps))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return steerable(env, "run", "fix it", "--provider", "scripted", "--script",
                     str(tmp_path / "s.json"), "--workspace", str(ws), *flags, cwd=ws)


def test_each_todo_call_streams_the_whole_plan(cli_env: dict[str, str], tmp_path: Path) -> None:
    res = run_plan(cli_env, tmp_path, "--json")
    assert res.returncode == 0, res.stderr
    events: list[dict[str, Any]] = [json.loads(x) for x in res.stdout.splitlines()]
    plans = [e for e in events if e["kind"] == "plan_updated"]
    assert [len(p["items"]) for p in plans] == [2, 3]
    assert plans[1]["items"] == PLAN
    ends = [e for e in events if e["kind"] == "tool_exec_end"]
    assert plans[1]["call_id"] == ends[1]["call_id"]
    assert "[x] read the code\n[~] fix the bug\n[ ] run the tests" in ends[1]["content"]


def test_the_cli_draws_the_plan_as_a_checklist(cli_env: dict[str, str], tmp_path: Path) -> None:
    res = run_plan(cli_env, tmp_path)
    assert res.returncode == 0, res.stderr
    last = res.stdout[res.stdout.rindex("Plan (1/3 done)"):]
    assert "☑ read the code" in last and "◐ fix the bug" in last and "☐ run the tests" in last


async def test_a_bad_plan_is_refused_and_emits_nothing() -> None:
    seen: list[object] = []
    ctx = ToolContext(call_id="c", tool_name="todo", turn_id="t", session_id="s",
                      _plan=seen.append)
    todo = make_todo_tool()
    bad = await call(todo, ctx, items=[{"content": "x", "status": "maybe"}])
    assert bad.is_error and "status must be one of" in bad.content and not seen
    good = await call(todo, ctx, items=[{"content": "x", "status": "completed"}])
    assert not good.is_error and seen == [({"content": "x", "status": "done"},)]
    assert EventKind.PLAN_UPDATED.value == "plan_updated"


@given(st.lists(st.fixed_dictionaries({"content": st.text(min_size=1, max_size=20),
                                       "status": st.sampled_from(PLAN_STATUSES)}), max_size=8))
async def test_any_valid_plan_is_emitted_item_for_item(items: list[dict[str, str]]) -> None:
    seen: list[tuple[dict[str, str], ...]] = []
    ctx = ToolContext(call_id="c", tool_name="todo", turn_id="t", session_id="s",
                      _plan=seen.append)  # type: ignore[arg-type]
    result = await call(make_todo_tool(), ctx, items=items)
    if any(not i["content"].strip() for i in items):
        assert result.is_error and not seen
    else:
        assert [i["status"] for i in seen[0]] == [i["status"] for i in items]
        assert [i["content"] for i in seen[0]] == [" ".join(i["content"].split()) for i in items]
