"""Inline approvals: what to show for an asked tool call, and what "always" allows.

"always" adds rules for the rest of the session (``steerable.coding._always`` says which).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from steerable import ToolContext
from steerable.cli._app import App
from steerable.coding._always import always_rules
from steerable.coding._always import uncoverable as _uncoverable

__all__ = ["always_rules", "describe_request", "discard_typed_ahead", "is_bare_answer",
           "parse_answer", "read_line", "uncoverable"]


def uncoverable(app: App, tool_name: str, arguments: Any) -> bool:
    """See ``steerable.coding._always.uncoverable``: for the app's tool of that name."""
    return _uncoverable(app.agent.tools_by_name.get(tool_name), arguments)


def describe_request(app: App, tool_name: str, arguments: Any) -> str:
    """The tool, and what it would do: a diff for write/edit, the command for bash."""
    args = dict(arguments) if isinstance(arguments, dict) else {}
    tool = app.agent.tools_by_name.get(tool_name)
    if tool is not None and tool_name in ("write", "edit", "bash"):
        ctx = ToolContext(call_id="preview", tool_name=tool_name, turn_id="", session_id="",
                          dry_run=True)
        try:
            preview = tool.preview(tool.validate(args), ctx)
            return app.redact(f"{tool_name} wants to run:\n" + preview.split("\n", 1)[1])
        except Exception as exc:  # the call will fail anyway; show its arguments
            return app.redact(f"{tool_name} {json.dumps(args, ensure_ascii=False)}\n"
                              f"(it would fail: {exc})")
    return app.redact(f"{tool_name} {json.dumps(args, ensure_ascii=False, indent=1)}")


def parse_answer(text: str) -> str | None:
    """'y', 'n' or 'a' (always) from what the user typed; None when it is neither."""
    answer = text.strip().lower()
    for key, words in (("y", ("y", "yes")), ("n", ("n", "no")), ("a", ("a", "always"))):
        if answer in words:
            return key
    return None


def is_bare_answer(text: str) -> bool:
    """A line that is only an approval answer ("y", "no", "always"...): typed while no question
    is open, it was meant for one about to appear, not as a message to the model."""
    return parse_answer(text) is not None


def discard_typed_ahead() -> None:
    """Drop what was typed on the terminal before a question appears, so a "y" typed for
    something else cannot answer a question the user has not seen yet."""
    try:
        import termios

        if sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass  # no terminal (or not a POSIX one): nothing typed ahead to drop


async def read_line(prompt: str) -> str | None:
    """Read a line from the terminal without blocking the event loop; None at end of input.

    A daemon thread, not ``to_thread``: if the turn is aborted while the question is open the
    thread stays blocked in ``input()``, and a pool thread would hold the process at exit.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def work() -> None:
        try:
            sys.stderr.write(prompt)
            sys.stderr.flush()
            line: str | None = sys.stdin.readline()
            line = line if line else None
        except (OSError, ValueError):
            line = None
        def deliver() -> None:
            if not future.done():
                future.set_result(line)

        loop.call_soon_threadsafe(deliver)

    threading.Thread(target=work, daemon=True, name="steerable-approval").start()
    return await future
