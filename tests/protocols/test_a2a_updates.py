"""The A2A adapter's pure parts: which native events a task's turn view turns into updates
(properties over interleaved turns' events, hypothesis), how a message answers an approval, and
the task store's bound."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("a2a.types", reason="the a2a extra is not installed")

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatus
from hypothesis import given
from hypothesis import strategies as st

from steerable.protocols.a2a import BoundedTaskStore
from steerable.protocols.a2a._updates import Approval, End, Progress, TurnView, decision

KINDS = ["llm_delta", "llm_request", "llm_response", "tool_exec_start", "tool_exec_progress",
         "tool_exec_end", "tool_exec_skipped", "steering_injected", "approval_requested",
         "state_changed", "error"]


def event(kind: str, turn: str, parent: str | None = None, **extra: Any) -> dict[str, Any]:
    base = {"kind": kind, "turn_id": turn, "parent_turn_id": parent, "session_id": "s",
            "call_id": "c", "tool_name": "t", "arguments": {"a": 1}, "text": "x",
            "content": "out", "reason": "denied", "request_id": f"r-{turn}",
            "tool_calls": [{"id": "c"}], "message": "boom"}
    return {**base, **extra}


turns = st.sampled_from(["mine", "other", "child", "stranger"])
steps = st.lists(st.tuples(st.sampled_from([*KINDS, "subturn_spawn", "turn_end"]), turns),
                 max_size=60)


@given(steps)
def test_only_the_followed_turn_and_its_sub_turns_make_updates(script: list[Any]) -> None:
    view = TurnView("mine")
    ours = {"mine"}
    ended = False
    for seq, (kind, turn) in enumerate(script):
        extra: dict[str, Any] = {}
        if kind == "subturn_spawn":
            extra = {"child_turn_id": "child", "agent": "explorer"}
        parent = "mine" if turn == "child" else None
        update = view.feed(seq, event(kind, turn, parent, status="completed", **extra))
        if turn in ours and kind == "subturn_spawn":
            ours.add("child")
        if turn not in ours:
            assert update is None
            continue
        if ended:
            continue
        if kind == "turn_end" and turn == "mine":
            assert isinstance(update, End) and update.state == TaskState.TASK_STATE_COMPLETED
            ended = True
        elif kind == "approval_requested":
            assert isinstance(update, Approval) and update.request_id == f"r-{turn}"
        else:
            assert update is None or isinstance(update, Progress)
    # A sub-turn's end is progress, never the task's end; another turn's events count nothing.
    assert view.turns <= {"mine", "child"}


@pytest.mark.parametrize(("status", "state"), [
    ("completed", TaskState.TASK_STATE_COMPLETED), ("max_iterations", TaskState.TASK_STATE_COMPLETED),
    ("cancelled", TaskState.TASK_STATE_CANCELED), ("interrupted", TaskState.TASK_STATE_CANCELED),
    ("aborted", TaskState.TASK_STATE_CANCELED), ("error", TaskState.TASK_STATE_FAILED)])
def test_each_turn_status_ends_the_task_in_a_terminal_state(status: str,
                                                            state: TaskState) -> None:
    end = TurnView("t").feed(1, event("turn_end", "t", status=status, text="bye"))
    assert isinstance(end, End) and end.state == state and end.text == "bye"


def test_a_queued_message_s_turn_is_found_by_its_delivery_and_its_re_runs() -> None:
    view = TurnView(None, "m1")
    assert view.feed(1, event("tool_exec_start", "running")) is None  # not its turn
    # Handed back by a turn that ended first, and sent again under a new id.
    assert view.feed(2, event("message_state", "", message_id="m2", origin_id="m1",
                              state="queued")) is None
    started = view.feed(3, event("message_state", "t2", message_id="m2", state="delivered"))
    assert isinstance(started, Progress) and view.turn_id == "t2"
    assert isinstance(view.feed(4, event("tool_exec_start", "t2")), Progress)
    revoked = TurnView(None, "m9").feed(5, event("message_state", "", message_id="m9",
                                                 state="revoked"))
    assert isinstance(revoked, End) and revoked.state == TaskState.TASK_STATE_CANCELED


@given(st.booleans(), st.text(max_size=20), st.text(max_size=40))
def test_a_data_answer_wins_over_the_text(approved: bool, reason: str, text: str) -> None:
    assert decision([text], [{"approved": approved, "reason": reason}]) == (approved, reason)


@pytest.mark.parametrize(("text", "answer"), [
    ("yes", (True, "")), ("Yes, go ahead", (True, "go ahead")), ("no: too risky",
                                                                  (False, "too risky")),
    ("deny", (False, "")), ("maybe", None), ("", None), ("yesterday", None)])
def test_a_text_answer_is_its_first_word(text: str, answer: tuple[bool, str] | None) -> None:
    assert decision([text], [{"unrelated": 1}]) == answer


async def test_the_task_store_drops_the_tasks_that_ended_longest_ago_never_live_ones() -> None:
    store, context = BoundedTaskStore(limit=3), ServerCallContext()
    ended, live = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_INPUT_REQUIRED
    for name, state in [("a", ended), ("b", live), ("c", ended), ("d", live), ("e", live)]:
        await store.save(Task(id=name, context_id="s", status=TaskStatus(state=state)), context)
    kept = [t for t in "abcde" if await store.get(t, context) is not None]
    assert kept == ["b", "d", "e"]  # a and c ended, oldest first; the live ones stay
    await store.save(Task(id="f", context_id="s", status=TaskStatus(state=live)), context)
    assert await store.get("f", context) is not None  # over the limit, but nothing has ended
