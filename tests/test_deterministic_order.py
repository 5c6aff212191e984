"""The engine acts on tasks in an order a replay repeats, never in a set's order.

On Temporal the engine runs inside a workflow, where each task it cancels may be a command
(an activity's cancel); a worker replaying the session after a crash must issue the same
commands in the same order. A set of tasks iterates in the order of the tasks' addresses,
which differ between the first run and the replay. ``asyncio.wait`` answers with sets, so the
code that runs in a workflow (the engine, the drivers, the workflow itself) never loops over
what it answers: it loops over its own list and asks the sets only for membership. This test
reads the source, so a path no test reaches (a parallel group where one call raises) counts
too.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from steerable._core._reaper import Reaper
from tests._ast import parse

ROOT = Path(__file__).resolve().parents[1] / "src" / "steerable"
IN_A_WORKFLOW = ("_core", "drivers", "temporal")


def _wait_results(fn: ast.AST) -> set[str]:
    """Names bound to what ``asyncio.wait`` answers within ``fn``."""
    names: set[str] = set()
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Await):
            continue
        call = node.value.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                and call.func.attr == "wait" and isinstance(call.func.value, ast.Name) \
                and call.func.value.id == "asyncio":
            for target in node.targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
    return names


def _loops_over(fn: ast.AST, names: set[str]) -> list[int]:
    """Lines in ``fn`` where a ``for`` or a comprehension iterates one of ``names``."""
    lines = []
    for node in ast.walk(fn):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            continue
        it = node.iter
        inner = it.args[0] if isinstance(it, ast.Call) and it.args else it
        if isinstance(inner, ast.Name) and inner.id in names:
            lines.append(inner.lineno)
    return lines


def set_order_loops(source: str) -> list[int]:
    found: list[int] = []
    for fn in ast.walk(parse(source)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found += _loops_over(fn, _wait_results(fn))
    return sorted(set(found))


def test_the_checker_finds_a_loop_over_what_asyncio_wait_answered() -> None:
    planted = """
async def group(tasks):
    done, pending = await asyncio.wait(tasks)
    for task in pending:
        task.cancel()
    late = [t for t in sorted(done)]
    for task in tasks:
        if task in pending:
            task.cancel()
"""
    assert set_order_loops(planted) == [4, 6]


def test_no_code_run_in_a_workflow_loops_over_a_set_of_tasks() -> None:
    offenders = []
    for package in IN_A_WORKFLOW:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line in set_order_loops(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


async def test_the_reaper_cancels_in_the_order_it_adopted() -> None:
    seen: list[int] = []

    async def tool(n: int) -> None:
        for _ in range(2):  # ignores the adoption's cancel: aclose cancels it again
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append(n)

    tasks = [asyncio.ensure_future(tool(n)) for n in range(32)]
    await asyncio.sleep(0)
    reaper = Reaper()
    for task in tasks:
        reaper.adopt(task)
    await asyncio.sleep(0)
    assert seen == list(range(32))
    seen.clear()
    await reaper.aclose(grace=0.01)
    assert seen == list(range(32))
