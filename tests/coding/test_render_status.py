"""What the terminal shows while a turn waits: for the model, for an approval, on Ctrl+C."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from steerable._events import (
    ApprovalRequested,
    ApprovalResolved,
    InterruptReceived,
    LLMDelta,
    LLMRequestEvent,
    ToolExecStart,
)
from steerable.cli._app import Redactor
from steerable.cli._render import TurnView

BASE: dict[str, Any] = {"turn_id": "t", "parent_turn_id": None, "session_id": "s", "seq": 1,
                        "time": 0.0}


def _shown(view: TurnView) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(view.live())
    return console.export_text()


def _notice(view: TurnView, event: Any) -> str:
    console = Console(width=100, record=True, color_system=None)
    for block in view.handle(event):
        console.print(block)
    return console.export_text()


def test_a_spinner_line_covers_the_wait_for_the_first_token():
    view = TurnView(Redactor())
    assert _shown(view).strip() == ""
    view.handle(LLMRequestEvent(**BASE, iteration=1, model=None, message_count=2, tools=()))
    assert "waiting for the model (0s)" in _shown(view)
    assert view.toolbar().startswith("waiting for the model")
    view.handle(LLMDelta(**BASE, iteration=1, text="Hello"))
    assert "waiting for the model" not in _shown(view) and "Hello" in _shown(view)


def test_status_says_waiting_for_approval_until_it_is_answered():
    view = TurnView(Redactor())
    view.handle(ApprovalRequested(**BASE, request_id="r", call_id="c", tool_name="bash",
                                  arguments={"command": "rm -rf build"}))
    assert "waiting for approval: bash rm -rf build" in _shown(view)
    assert view.toolbar() == "waiting for approval: bash rm -rf build"
    view.handle(ApprovalResolved(**BASE, request_id="r", call_id="c", tool_name="bash",
                                 approved=True))
    assert "approval" not in _shown(view) and "approval" not in view.toolbar()


def test_the_interrupt_notice_says_what_really_happens_next():
    graceful = InterruptReceived(**BASE, mode="graceful")
    streaming = TurnView(Redactor())
    streaming.handle(LLMDelta(**BASE, iteration=1, text="Some text"))
    assert "stopping the reply" in _notice(streaming, graceful)
    assert "finishing the running tool" not in _notice(TurnView(Redactor()), graceful)
    running = TurnView(Redactor())
    running.handle(ToolExecStart(**BASE, iteration=1, call_id="c", tool_name="bash",
                                 arguments={"command": "sleep 5"}))
    assert "finishing the running tool, then a summary" in _notice(running, graceful)
    hard = InterruptReceived(**BASE, mode="hard")
    assert "aborting now" in _notice(running, hard)


def test_the_wait_line_shows_what_the_turn_used_so_far():
    from steerable import Usage
    from steerable._events import LLMResponseEvent, TurnEnd, TurnStart, TurnStatus

    view = TurnView(Redactor())
    view.handle(TurnStart(**BASE, input="go", agent="main"))
    view.handle(LLMResponseEvent(**BASE, iteration=1, text="", tool_calls=(),
                                 usage=Usage(1200, 30, 1000, 0, 0.0004)))
    child = {**BASE, "turn_id": "c", "parent_turn_id": "t"}
    view.handle(LLMResponseEvent(**child, iteration=1, text="", tool_calls=(),
                                 usage=Usage(800, 20)))
    view.handle(LLMRequestEvent(**BASE, iteration=2, model=None, message_count=2, tools=()))
    assert ("waiting for the model (0s) · 2,000 tokens in (1,000 cached) / 50 out · $0.0004"
            in _shown(view))
    end = _notice(view, TurnEnd(**BASE, status=TurnStatus.BUDGET_EXCEEDED, text="", iterations=2,
                                duration=1.25, usage=Usage(2000, 50, 1000, 0, 1.5)))
    assert "budget_exceeded · 2 iterations · 2,000 tokens in (1,000 cached) / 50 out · $1.50 · 1.2s" in end
