"""The tool policy's classification call: what kind of request a message is.

One short call of its own, built so that llama-server's prompt cache does the work: the
instructions and the examples are one fixed system message that comes first and never changes
(evaluated once, then kept by the server, in its slot or its host-memory prompt cache), and
only the request comes last. So a classification costs the request's own tokens plus the
answer (about ten tokens under a JSON schema), not the agent's instructions, its tool list and
a page of examples each time. Cheap examples mean many of them: other languages, typos, terse
and long polite phrasings, a question that names a file only in passing (none of them is a
prompt of the task suite).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from steerable._messages import Message
from steerable.providers._base import LLMRequest, ToolChoice

__all__ = ["CLASSIFY_SCHEMA", "CLASSIFY_SYSTEM", "KINDS", "Intent", "classify_request",
           "parse_kind", "reading_request", "split_exchanges"]

Intent = Literal["general", "workspace", "run", "change"]
KINDS: tuple[Intent, ...] = ("general", "workspace", "run", "change")

CLASSIFY_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"kind": {"enum": list(KINDS)}},
    "required": ["kind"], "additionalProperties": False}

CLASSIFY_TOKENS = 16
_CONTEXT_CHARS = 400  # of the previous exchange, for a follow-up such as "yes, do it"

_EXAMPLES: tuple[tuple[str, Intent], ...] = (
    ("Create todo.md with three items", "change"),
    ("write a script backup.sh that copies data/ to /tmp", "change"),
    ("Add a docstring to parse() in reader.py", "change"),
    ("append 'milk' to groceries.txt", "change"),
    ("Replace every print with logging in app.py", "change"),
    ("rename old_name to new_name in all files", "change"),
    ("delete build.log", "change"),
    ("set LOG_LEVEL to debug in .env", "change"),
    ("bump the version in pyproject.toml to 1.4", "change"),
    ("fix the typo in the README", "change"),
    ("pls make greet() return a string insted of printing", "change"),
    ("Could you kindly update the copyright year in LICENSE to 2026? Thank you so much!",
     "change"),
    ("Erstelle eine Datei liste.txt mit drei Zeilen", "change"),
    ("Setze in app.ini den Port auf 9090", "change"),
    ("Supprime le fichier brouillon.txt", "change"),
    ("ajoute une fonction moyenne() dans stats.py", "change"),
    ("Cambia el nombre de la variable x a total en main.py", "change"),
    ("Aggiungi una riga 'fine' alla fine di log.txt", "change"),
    ("What is in todo.md?", "workspace"),
    ("what does reader.py do", "workspace"),
    ("Which file defines the class Parser?", "workspace"),
    ("where is the 'disk full' message raised", "workspace"),
    ("How many .md files are there?", "workspace"),
    ("is DEBUG on in .env?", "workspace"),
    ("do app.ini and prod.ini use the same port", "workspace"),
    ("count the word error in the logs", "workspace"),
    ("version?", "workspace"),
    ("whats teh timeout in conf.py", "workspace"),
    ("I looked at setup.py yesterday, forget it. What license does this project use?",
     "workspace"),
    ("Hi, I'm new here and a bit lost. Would you mind telling me what the scripts folder "
     "contains? No changes please, just curious.", "workspace"),
    ("Was steht in der Datei liste.txt?", "workspace"),
    ("Combien de lignes a stats.py ?", "workspace"),
    ("¿Qué hace la función main en app.py?", "workspace"),
    ("Quanti file .json ci sono qui?", "workspace"),
    ("Run check.py and tell me what it says", "run"),
    ("execute the tests and report how many fail", "run"),
    ("run make", "run"),
    ("Führe start.sh aus und sag mir die Ausgabe", "run"),
    ("Lance les tests", "run"),
    ("What is 12 * 12?", "general"),
    ("what does HTTP 404 mean", "general"),
    ("Explain recursion in one sentence", "general"),
    ("Send notes.md to anna@example.com", "general"),
    ("Post this on Twitter", "general"),
    ("Was ist die Hauptstadt von Frankreich?", "general"),
)

CLASSIFY_SYSTEM = (
    "You sort the messages a user sends to a coding agent that works in a folder of files. "
    "A message may be in any language, have typos, be one word or a long polite paragraph. "
    "Say which kind the user's last message is:\n"
    "- change: it asks to create, write, edit, fix, add, append, rename, move, delete, set or "
    "update something in a file or folder (a polite \"could you update X\" is a change);\n"
    "- run: it asks to run or execute a program, script or tests and report, changing nothing;\n"
    "- workspace: it asks about the files here (what they say, define or contain, where "
    "something is, how many) and asks for no change;\n"
    "- general: it needs no file here (arithmetic, general knowledge), or asks for what no "
    "file tool can do (send mail, post online).\n"
    "A question is never a change. Reply with JSON {\"kind\": K} and nothing else.\n"
    "Examples:\n"
    + "\n".join(f"{json.dumps(text, ensure_ascii=False)} -> {{\"kind\": \"{kind}\"}}"
                for text, kind in _EXAMPLES))
"""The fixed first message of every classification call (keep it byte-identical across
requests: it is the prefix the server's prompt cache keeps)."""


def classify_request(request: LLMRequest) -> LLMRequest:
    """The policy's own call that asks the model what ``request`` asks for, held to
    ``CLASSIFY_SCHEMA`` (``reading_request``)."""
    return reading_request(request, CLASSIFY_SYSTEM, CLASSIFY_SCHEMA, CLASSIFY_TOKENS,
                           "classify the request")


def reading_request(request: LLMRequest, system: str, schema: dict[str, Any], tokens: int,
                    reason: str) -> LLMRequest:
    """A short call of the policy's own about what ``request`` asks for: the fixed ``system``
    message first (the prefix the server's prompt cache keeps), then the previous exchange
    (shortened, for a follow-up such as "yes, do it") and this exchange's words last; no tools,
    greedy, at most ``tokens``, the reply held to ``schema``."""
    earlier, asked = split_exchanges(request.messages)
    messages = (Message("system", system), *earlier,
                Message("user", "\n".join(asked) or "(empty message)"))
    return LLMRequest(messages=messages, model=request.model,
                      params={**request.params, "temperature": 0},
                      tool_choice=ToolChoice("none", max_tokens=tokens, reason=reason),
                      answer_schema=schema)


def parse_kind(text: str) -> Intent:
    """The kind a classification reply names; anything else reads as "workspace"."""
    try:
        value = json.loads(text)
    except ValueError:
        return "workspace"
    kind = value.get("kind") if isinstance(value, dict) else None
    for known in KINDS:
        if kind == known:
            return known
    return "workspace"  # anything else: look, change nothing


def exchange_start(messages: Sequence[Message]) -> int:
    """Index of the first message after the last final answer (the exchange's request)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role == "assistant" and not m.tool_calls:
            return i + 1
    return 0


def asked_in(messages: Sequence[Message]) -> tuple[str, ...]:
    """The user's words of this exchange: the request and any steering added to it."""
    return tuple(m.text for m in messages[exchange_start(messages):]
                 if m.role == "user" and m.text)


def split_exchanges(messages: Sequence[Message]) -> tuple[list[Message], tuple[str, ...]]:
    """The previous exchange's request and answer (each shortened), and this one's words."""
    start = exchange_start(messages)
    earlier: list[Message] = []
    if start > 0:
        answer = messages[start - 1]
        before = [m for m in messages[:start - 1] if m.role == "user" and m.text]
        if before:
            earlier.append(Message("user", before[-1].text[:_CONTEXT_CHARS]))
            earlier.append(Message("assistant", answer.text[:_CONTEXT_CHARS]))
    return earlier, asked_in(messages)
