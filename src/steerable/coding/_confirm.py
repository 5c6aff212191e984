"""The second reading of a request the classification read as a change: the write gate opens
only when both agree.

One call of the model is not enough to open the gate: the 0.5B labelled "What is 17 + 25?" a
change (and, with ``--yes``, wrote a file), with a label probability above some real change
requests'. So a request read as ``change`` is read once more, by a call framed the other way
round, whose failure modes differ from the first's: not four kinds in a list that starts with
the change examples, but one binary question about what doing it *needs* (reading and replying,
or writing a file), in other words, with other examples, the safe answer first. Only an exact
``{"needs": "writing"}`` confirms; anything else (the other answer, a malformed reply, a failed
call) keeps the safe reading: look, change nothing.

Built like the classification (``_classify``) for the server's prompt cache: the fixed
instructions and examples come first and never change, the request last, and the answer is a
few tokens under a JSON schema. It costs one more short call, and only for a request the first
call read as a change.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from steerable.coding._classify import reading_request
from steerable.providers._base import LLMRequest

__all__ = ["CONFIRM_SCHEMA", "CONFIRM_SYSTEM", "READ_AS_QUESTION_MARK", "UNCONFIRMED",
           "confirm_request", "confirms", "held_note"]

Need = Literal["reading", "writing"]

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"needs": {"enum": ["reading", "writing"]}},
    "required": ["needs"], "additionalProperties": False}

CONFIRM_TOKENS = 12

READ_AS_QUESTION_MARK = "⚑ read as a question"
"""Starts the line an answer ends with when the two readings disagreed and the model called
no tool that changes files (a question the first reading took for a change, or a change the
second did not confirm: the user hears it either way, and how to ask again)."""

UNCONFIRMED = ("one reading of the request took it for a change and a second reading did not, "
               "so it is treated as a question: nothing may change")
"""Why the gate stays closed when the two readings disagree (the denied calls say it)."""

# None of these is a prompt of the task suite or an example of the classification: the two
# calls should not fail on the same example.
_EXAMPLES: tuple[tuple[str, Need], ...] = (
    ("how many lines does app.js have", "reading"),
    ("Lösche die Datei alt.txt", "writing"),
    ("what is 6 * 7", "reading"),
    ("make a file plan.md listing three steps", "writing"),
    ("how do you undo a commit in git?", "reading"),
    ("corrige la faute dans intro.md", "writing"),
    ("¿Dónde se define la clase Cliente?", "reading"),
    ("run build.sh and tell me if it fails", "reading"),
    ("pls add a test for parse()", "writing"),
    ("Qu'est-ce qu'un fichier CSV ?", "reading"),
    ("Could you please change the port in server.cfg to 8081? Thanks!", "writing"),
    ("what does the write() function in io.py do", "reading"),
)

CONFIRM_SYSTEM = (
    "A user sent a message to a coding agent that works in a folder of files. The message may "
    "be in any language, have typos, be one word or a long polite paragraph.\n"
    "To do what the message asks, does the agent only need to read (files, or its own "
    "knowledge) and reply, or must it write to a file? A question always needs only reading, "
    "even a question about creating, editing or deleting; running a program and reporting its "
    "output is reading.\n"
    "Reply with JSON {\"needs\": \"reading\"} or {\"needs\": \"writing\"}.\n"
    "Examples:\n"
    + "\n".join(f"{json.dumps(text, ensure_ascii=False)} -> {{\"needs\": \"{need}\"}}"
                for text, need in _EXAMPLES))
"""The fixed first message of every confirmation call (byte-identical across requests: the
prefix the server's prompt cache keeps)."""


def confirm_request(request: LLMRequest) -> LLMRequest:
    """The second reading of ``request``, held to ``CONFIRM_SCHEMA`` (``reading_request``)."""
    return reading_request(request, CONFIRM_SYSTEM, CONFIRM_SCHEMA, CONFIRM_TOKENS,
                           "confirm that the request asks for a change")


def confirms(text: str) -> bool:
    """Whether a confirmation reply says the request needs writing: only the exact answer
    does; anything else keeps the safe reading."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("needs") == "writing"


def held_note(tools: Sequence[str]) -> str:
    """What the user is told about a request whose change was not confirmed: that nothing
    changed, why (and which calls of ``tools`` were refused), and how to get the change."""
    why = ("one reading of the request took it for a change and a second reading did not, so "
           "it was treated as a question")
    said = (f"{', '.join(tools)} {'was' if len(tools) == 1 else 'were'} refused: {why}"
            if tools else f"{why} and nothing was changed")
    return f"{said}. If you meant a change, ask for it again plainly: what to change, and in " \
        "which file."
