"""@tool: schemas from hints and docstrings, validation messages, sync and async, errors."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Literal

import pytest

from steerable import BaseTool, ToolContext, tool
from steerable.errors import ConfigurationError, ToolArgumentsError


@tool(read_only=True, timeout=3)
async def search(query: str, limit: int = 10, mode: Literal["fast", "deep"] = "fast", ctx: ToolContext | None = None) -> str:
    """Search the index.

    Longer explanation that is still part of the description.

    Args:
        query: What to look for.
        limit: How many results
            at most (continued line).
        mode: Search mode.

    Returns:
        The hits.
    """
    return query


def test_schema_and_description_from_hints_and_docstring() -> None:
    assert search.name == "search" and search.read_only and search.timeout == 3.0
    assert search.description == "Search the index.\n\nLonger explanation that is still part of the description."
    props = search.parameters["properties"]
    assert set(props) == {"query", "limit", "mode"}  # the context is hidden from the model
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"]["description"] == "How many results at most (continued line)."
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert search.parameters["required"] == ["query"]
    assert search.permission_key == "query"


def test_validation_messages_tell_the_model_what_to_fix() -> None:
    assert search.validate({"query": "x"}) == {"query": "x", "limit": 10, "mode": "fast"}
    with pytest.raises(ToolArgumentsError) as info:
        search.validate({"limit": "many", "mode": "slow", "extra": 1})
    msg = str(info.value)
    assert msg.startswith("Invalid arguments for tool 'search':")
    for part in ("'query': Field required", "'limit'", "'mode'", "'extra': Extra inputs are not permitted"):
        assert part in msg


def test_coerced_values_keep_their_types() -> None:
    @tool
    def touch(path: Path) -> str:
        """Touch."""
        return str(path)

    assert touch.validate({"path": "a/b"}) == {"path": Path("a/b")}
    assert touch.read_only is False and touch.permission_key == "path"  # a Path is a string


async def test_sync_tools_run_in_a_worker_thread() -> None:
    seen: list[bool] = []

    @tool
    def where() -> str:
        """Where am I."""
        seen.append(threading.current_thread() is threading.main_thread())
        return "here"

    ctx = ToolContext(call_id="c", tool_name="where", turn_id="t", session_id="s")
    assert await where.run({}, ctx) == "here"
    assert seen == [False]
    assert where() == "here"  # still callable directly


def test_bad_tool_definitions() -> None:
    with pytest.raises(ConfigurationError, match="tool name"):
        tool(name="bad name!")(lambda: None)
    with pytest.raises(ConfigurationError, match="timeout"):
        tool(timeout=0)(lambda: None)
    with pytest.raises(TypeError):
        tool(read_only="yes")(lambda: None)  # type: ignore[arg-type]

    def varargs(*args: int) -> None:
        """No."""

    with pytest.raises(ConfigurationError, match=r"\*args"):
        tool(varargs)


def test_name_override_and_repr() -> None:
    @tool(name="fs.read")
    def read(path: str) -> str:
        """Read."""
        return path

    assert read.name == "fs.read" and "mutating" in repr(read)


async def test_base_tool_defaults() -> None:
    class Echo(BaseTool):
        name = "echo"
        description = "Echo."

    ctx = ToolContext(call_id="c", tool_name="echo", turn_id="t", session_id="s")
    with pytest.raises(NotImplementedError):
        await Echo().run({}, ctx)
    assert "would have been called with" in Echo().preview({"a": 1}, ctx)
    assert Echo().spec().name == "echo"
