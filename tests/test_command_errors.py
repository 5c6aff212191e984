"""Every inbound command refuses a wrong field with a clear error naming the field (SPEC 10:
"bad input gets a clear error and loses nothing"): the exact type and text, before the
command changes anything."""

from __future__ import annotations

import re
from typing import Any

import pytest

from steerable import CancelMode
from steerable.drivers import _commands as cmd
from tests.conftest import make_loop

CASES: list[tuple[cmd.Command, type[Exception], str]] = [
    (cmd.Send(5, "s"), TypeError, "message text must be a str, got int"),  # type: ignore[arg-type]
    (cmd.Send("  ", "s"), ValueError, "message text must not be empty"),
    (cmd.Send("hi", ""), ValueError, "session_id must be a non-empty str, got ''"),
    (cmd.Send("hi", "s", policy="shout"), ValueError,
     "unknown busy policy 'shout'; use one of ['follow_up', 'interrupt', 'reject', "
     "'rollback', 'steer']"),
    (cmd.Send("hi", "s", agent="a"), TypeError, "agent must be an Agent, got str"),
    (cmd.StartTurn(None), TypeError, "turn input must be a str, got NoneType"),  # type: ignore[arg-type]
    (cmd.StartTurn(""), ValueError, "turn input must not be empty"),
    (cmd.StartTurn("go", session_id=""), ValueError,
     "session_id must be a non-empty str, got ''"),
    (cmd.StartTurn("go", agent=3), TypeError, "agent must be an agent, got int"),
    (cmd.Resume(7), TypeError, "session_id must be a str, got int"),  # type: ignore[arg-type]
    (cmd.Resume("s", agent=[]), TypeError, "agent must be an agent, got list"),
    (cmd.Steer(1.5), TypeError, "steering text must be a str, got float"),  # type: ignore[arg-type]
    (cmd.Steer("\n"), ValueError, "steering text must not be empty"),
    (cmd.FollowUp(b"x"), TypeError, "follow-up text must be a str, got bytes"),  # type: ignore[arg-type]
    (cmd.FollowUp(""), ValueError, "follow-up text must not be empty"),
    (cmd.Interrupt(hint=3), TypeError, "hint must be a str or None, got int"),  # type: ignore[arg-type]
    (cmd.Cancel(mode="later"), TypeError, "mode must be a CancelMode, got 'later'"),  # type: ignore[arg-type]
    (cmd.AnswerApproval(1, True), TypeError, "request_id must be a str, got int"),  # type: ignore[arg-type]
    (cmd.AnswerApproval("r", "yes"), TypeError, "approved must be a bool, got str"),  # type: ignore[arg-type]
    (cmd.AnswerApproval("r", True, None), TypeError, "reason must be a str, got NoneType"),  # type: ignore[arg-type]
    (cmd.AnswerQuestion(None, 1), TypeError, "request_id must be a str, got NoneType"),  # type: ignore[arg-type]
    (cmd.Revoke(12), TypeError, "message_id must be a str, got int"),  # type: ignore[arg-type]
    (cmd.Edit(None, "new"), TypeError, "message_id must be a str, got NoneType"),  # type: ignore[arg-type]
    (cmd.Edit("m", 4), TypeError, "message text must be a str, got int"),  # type: ignore[arg-type]
    (cmd.Edit("m", " "), ValueError, "message text must not be empty"),
]


@pytest.mark.parametrize(("command", "error", "text"), CASES,
                         ids=[f"{c.verb}-{i}" for i, (c, _, _) in enumerate(CASES)])
async def test_a_wrong_field_is_refused_with_its_name(command: cmd.Command,
                                                      error: type[Exception], text: str) -> None:
    loop, _, sub = make_loop([])
    with pytest.raises(error, match=f"^{re.escape(text)}$"):
        loop.submit(command)
    assert sub.drain_nowait() == []  # refused before anything changed
    await loop.aclose()


def test_every_verb_has_a_case() -> None:
    from steerable.drivers._controls import VERBS

    assert {type(c) for c, _, _ in CASES} == set(VERBS)


def test_a_cancel_mode_on_the_wire_is_checked() -> None:
    assert cmd.Cancel.from_fields({"mode": "after_tools"}).mode is CancelMode.AFTER_TOOLS
    with pytest.raises(ValueError, match=r"^unknown cancel mode 'soon'$"):
        cmd.Cancel.from_fields({"mode": "soon"})


async def test_the_loops_own_arguments_are_checked_with_their_names() -> None:
    """The loop's methods that are not commands check their arguments the same way."""
    loop, _, _ = make_loop([])
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: loop.session_messages(5), TypeError, "session_id must be a str, got int"),
        (lambda: loop.checkpoint(None), TypeError, "session_id must be a str, got NoneType"),
        (lambda: loop.start_turn(5), TypeError, "turn input must be a str or a list of parts "
         "(TextPart, ImagePart, FilePart), got int"),
        (lambda: loop.start_turn([]), ValueError, "turn input must not be empty"),
        (lambda: loop.send(3.5, "s"), TypeError, "message text must be a str or a list of "
         "parts (TextPart, ImagePart, FilePart), got float"),
        (lambda: loop.queued_messages(""), ValueError,
         "session_id must be a non-empty str, got ''"),
    ]
    for call, error, text in cases:
        with pytest.raises(error, match=f"^{re.escape(text)}$"):
            call()
    await loop.aclose()
