"""Questions and waiting requests on the terminal: asked inline, or listed with how to answer.

``ask_inline`` asks a ``QUESTION_ASKED`` on the terminal (run and chat, when there is one) and
asks again while the answer does not fit. ``how_to_answer`` is what a run that leaves its turn
waiting prints: one line per request, and the command that answers it. ``parse_value`` turns
what was typed into the answer a question takes (JSON when its schema wants more than text).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

from steerable import PendingRequest
from steerable.cli._approve import discard_typed_ahead, read_line
from steerable.errors import InvalidAnswerError, RequestError

__all__ = ["ask_inline", "describe_waiting", "how_to_answer", "parse_value"]


def parse_value(text: str, schema: Any) -> Any:
    """A typed answer: JSON when the question's schema asks for something else than a string
    (a number, a bool, an object), else the text itself."""
    wants_text = not isinstance(schema, dict) or schema.get("type") in (None, "string")
    if wants_text:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # the schema check says what is wrong with it


def describe_waiting(req: PendingRequest) -> str:
    """One line: what waits, in which session."""
    if req.kind == "approval":
        args = json.dumps(dict(req.arguments or {}), ensure_ascii=False)
        return f"approval {req.request_id} (session {req.session_id}): {req.tool_name} {args}"
    picks = f" [{' / '.join(req.choices)}]" if req.choices else ""
    return f"question {req.request_id} (session {req.session_id}): {req.question}{picks}"


def how_to_answer(pending: Iterable[PendingRequest]) -> list[str]:
    """The lines a run that leaves its turn waiting prints (to stderr)."""
    lines = ["the turn is waiting for an answer; it resumes once each request below has one:"]
    for req in pending:
        lines.append("  " + describe_waiting(req))
        if req.kind == "approval":
            lines.append(f"    steerable approve {req.request_id}   |   "
                         f"steerable deny {req.request_id}")
        else:
            lines.append(f"    steerable answer {req.request_id} VALUE")
    return lines


async def ask_inline(loop: Any, event: Any, pause: Callable[[], None],
                     resume: Callable[[], None], redact: Callable[[str], str]) -> None:
    """Ask ``event`` (a QUESTION_ASKED) on the terminal until an answer fits; end of input
    leaves it open (it times out or parks as the loop says)."""
    pause()
    try:
        discard_typed_ahead()
        picks = f" [{' / '.join(event.choices)}]" if event.choices else ""
        while True:
            line = await read_line(redact(f"{event.question}{picks}\n> "))
            if line is None:
                return
            try:
                loop.answer(event.request_id, parse_value(line.strip(), event.schema))
                return
            except InvalidAnswerError as exc:  # still open: ask again
                sys.stderr.write(f"{exc}\n")
            except RequestError as exc:  # answered elsewhere, or its turn moved on
                sys.stderr.write(f"{exc}\n")
                return
    finally:
        resume()
