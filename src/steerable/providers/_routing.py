"""Which tools a small model is offered on one call, and whether it must call one.

Small local models (Qwen2.5-Coder 0.5B/1.5B) answer "What is in notes.txt?" from thin air about
half the time when a tool call is optional, call ``bash`` to add two numbers, and never stop
calling tools once they may. So for a profile with ``route_tools``, the provider decides from the
request what the model is offered (measured on the task suite, bench/tasks):

- the first call after a user message: a request about the workspace (a file name, or words
  such as file, folder, run, fix, count, find) must start with a tool call; a request for something outside
  the workspace (email, the web...) or one that names nothing in it gets no tools, so the model
  answers (or refuses) in words;
- after tool results: for a request that asks for no change, no tools (it answers from the
  results); for one that does (create, fix, rename, add...), a call of a tool that acts (edit,
  write, bash) is required until one has run without error; then it answers, unless the request
  spans several places ("in every .py file"): then the tools again, call optional, until
  ``max_rounds`` rounds of calls in the turn, or as soon as it repeats a call it already made.
  (With the tools again after a change, the 1.5B appended "eggs" with bash and then overwrote
  the file with ``write``.) "No tools" means no call allowed: the tools stay listed (the same
  prompt prefix, which the server keeps cached) and the answer is held to plain words.

A required call is asked for with ``call_schema``: a JSON schema (``response_format``) whose
only values are calls of the offered tools with arguments that fit their schemas. Measured with
llama-server (llama-cpp-python 0.3.36's llama.cpp) and Qwen2.5-Coder: ``tool_choice:
"required"`` is ignored for this model's chat template (the model wrote prose and a fenced
call), while the schema constrains the reply to one valid call, which the profile's text-call
reader turns into a tool call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from steerable._messages import Message
from steerable.providers._base import ToolSpec

__all__ = ["NO_CALL_GRAMMAR", "ToolOffer", "call_schema", "note_no_tool", "restate_request",
           "tool_offer"]

NO_CALL_GRAMMAR = "root ::= [^{`<]*"
"""A plain-words answer (GBNF): no ``{``, backtick or ``<``, so no call written as text. With
no call allowed the 1.5B still wrote one as JSON text for "What is 17 + 25?" (the tools are in
its prompt); under this grammar it answered "17 + 25 = 42"."""

_SCOPE = re.compile(r"\b(every|all|each|across|everywhere)\b", re.IGNORECASE)

ToolOffer = Literal["none", "auto", "required", "act"]
"""No tools; tools, a call optional; a call of any tool required; a call of a tool that is not
read-only required."""

_FILE = re.compile(r"\b[\w./-]*\w\.[A-Za-z]{1,5}\b")  # notes.txt, src/app.py, package.json
_WORKSPACE = re.compile(
    r"\b(files?|folders?|director(y|ies)|projects?|repo(sitory)?|codebase|readme|makefile|"
    r"dockerfile|scripts?|tests?|run|execute|commands?|create|write|add|append|insert|edit|"
    r"change|modify|update|fix|bug|rename|replace|delete|remove|find|search|grep|list|count|"
    r"how many|where|todos?|lines?|workspace)\b",
    re.IGNORECASE)
# Things no workspace tool can do: the model should say so, not go looking.
_OUTSIDE = re.compile(
    r"\b(e-?mail|mail|send|sms|text me|tweet|post to|slack|telegram|whatsapp|phone|call me|"
    r"browse|website|web ?page|internet|online|https?://|weather)\b",
    re.IGNORECASE)


_CHANGE = re.compile(
    r"\b(create|write|add|append|insert|edit|change|modify|update|fix|rename|replace|delete|"
    r"remove|refactor|implement|make)\b", re.IGNORECASE)


def _round_start(messages: Sequence[Message]) -> int:
    """Index of the last user message (where this part of the conversation started)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user":
            return i
    return 0


def _repeated(turn: Sequence[Message]) -> bool:
    """The latest assistant calls repeat one already made since the user spoke."""
    seen: list[str] = []
    latest: list[str] = []
    for m in turn:
        if m.role == "assistant" and m.tool_calls:
            seen.extend(latest)
            latest = [f"{c.name}:{json.dumps(dict(c.arguments), sort_keys=True)}"
                      for c in m.tool_calls]
    return any(key in seen for key in latest)


def _changed(turn: Sequence[Message], tools: Sequence[ToolSpec]) -> bool:
    """A tool that is not read-only ran without error since the user spoke."""
    acting = {t.name for t in tools if not t.read_only}
    return any(m.role == "tool" and not m.is_error and m.name in acting for m in turn)


def tool_offer(messages: Sequence[Message], tools: Sequence[ToolSpec],
               max_rounds: int) -> ToolOffer:
    """What to offer on a call whose conversation is ``messages`` (see the module doc)."""
    start = _round_start(messages)
    asked = messages[start].content if messages else ""
    turn = messages[start + 1:]
    if not turn:  # the first call after a user message
        if _OUTSIDE.search(asked):
            return "none"
        return "required" if _FILE.search(asked) or _WORKSPACE.search(asked) else "none"
    rounds = sum(1 for m in turn if m.role == "assistant" and m.tool_calls)
    if rounds >= max_rounds or _repeated(turn) or not _CHANGE.search(asked):
        return "none"  # answer now: from what the tools gave, or nothing more to do
    if not _changed(turn, tools):
        return "act"
    # One change made: more only for a request over several places ("in every file").
    return "auto" if _SCOPE.search(asked) else "none"


def call_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A ``response_format`` that admits exactly one call of one of ``tools`` (wire shape)."""
    calls = [{"type": "object", "properties": {
        "name": {"const": t["function"]["name"]},
        "arguments": t["function"]["parameters"]},
        "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    return {"type": "json_schema",
            "json_schema": {"name": "tool_call", "schema": {"oneOf": calls}}}


_NOTE_OUTSIDE = ("(Note: none of your tools can send email or messages or reach the internet; "
                 "if that is what it takes, say you cannot do it.)")
_NOTE_GENERAL = "(Note: this needs no tool; answer it directly.)"


def note_no_tool(wire: list[dict[str, Any]], messages: Sequence[Message]) -> None:
    """A request that gets no call (see ``tool_offer``) ends with a note saying why. Told only
    in the instructions, the 1.5B answered the email request with a ``mail`` command to run and
    "What is 17 + 25?" with an imagined ``bc`` run ("32"); with the notes it said it cannot,
    and "42"."""
    if not (messages and messages[-1].role == "user" and wire
            and wire[-1].get("role") == "user"):
        return
    note = _NOTE_OUTSIDE if _OUTSIDE.search(messages[-1].content) else _NOTE_GENERAL
    wire[-1]["content"] = f"{wire[-1]['content']}\n\n{note}"


def restate_request(wire: list[dict[str, Any]], messages: Sequence[Message],
                    offer: ToolOffer) -> None:
    """End the results message (the last of ``wire``) with the user's request again. Measured
    with the 1.5B: after "Result of read(...)" alone it wrote the same call again as text, even
    with no call allowed, and after "Answer my request from these results: Read notes.txt and
    ..." too; with "My request was: ... Answer it now in plain words" it answered."""
    asked = messages[_round_start(messages)].content
    if not wire or wire[-1].get("role") != "user" or not asked:
        return
    then = "Answer it now in plain words, using these results." if offer == "none" else \
        "Go on with it."
    wire[-1]["content"] = f"{wire[-1]['content']}\n\nMy request was: {asked}\n{then}"
