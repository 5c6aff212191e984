"""Shared fixtures: a workspace folder, a way to call a tool directly, an event collector."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from steerable import ToolContext, ToolResult
from steerable.coding import Sandbox, Workspace, coding_tools
from steerable.tools import FunctionTool
from steerable.tools._base import result_from_return

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


@pytest.fixture
def tools(ws: Workspace) -> dict[str, FunctionTool]:
    # Unconfined: these tests look at the host's process table (process-group kills); the
    # sandboxed paths have their own tests in test_sandbox.py.
    return {t.name: t for t in coding_tools(ws, use_ripgrep=False, sandbox=Sandbox(enabled=False))}


class Progress:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str, data: Mapping[str, Any]) -> None:
        self.texts.append(text)


async def call(tool: FunctionTool, ctx: ToolContext | None = None, **args: Any) -> ToolResult:
    """Validate and run ``tool`` like the loop does; a ToolError becomes an error result."""
    from steerable.errors import ToolError

    ctx = ctx or ToolContext(call_id="c1", tool_name=tool.name, turn_id="t", session_id="s")
    try:
        return result_from_return(await tool.run(tool.validate(args), ctx))
    except ToolError as exc:
        return ToolResult(str(exc), is_error=True)


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for CLI subprocesses: isolated config and data dirs, no provider keys."""
    env = {k: v for k, v in os.environ.items()
           if not k.endswith("_API_KEY") and not k.startswith(("OPENAI_", "STEERABLE_"))}
    env["PYTHONPATH"] = str(SRC)
    env["STEERABLE_DATA_DIR"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["HOME"] = str(tmp_path / "home")
    env["NO_COLOR"] = "1"
    return env
