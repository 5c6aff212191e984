"""A request's ``ToolChoice`` in the wire form of a model that writes its calls as text.

Which tools the model may call is decided by the caller (the coding agent's policy, on the
hook chain); this module only says how to ask a text-call model for it. Measured with
llama-server (llama-cpp-python 0.3.36's llama.cpp) and Qwen2.5-Coder: ``tool_choice:
"required"`` is ignored for this model's chat template (it wrote prose and a fenced call), while
a JSON schema (``response_format``) whose only values are calls of the allowed tools constrains
the reply to valid calls, which the profile's text-call reader turns into tool calls; with
no call allowed, a grammar keeps the reply to plain words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from steerable._messages import Message

__all__ = ["MAX_CALLS", "NO_CALL_GRAMMAR", "answer_format", "call_schema", "restate_request"]

NO_CALL_GRAMMAR = "root ::= [^{`<]*"
"""A plain-words answer (GBNF): no ``{``, backtick or ``<``, so no call written as text. With
no call allowed the 1.5B still wrote one as JSON text for "What is 17 + 25?" (the tools are in
its prompt); under this grammar it answered "17 + 25 = 42"."""


Variants = Sequence[tuple[str, Sequence[tuple[str, Sequence[str]]]]]


def _narrowed(parameters: dict[str, Any], held: Sequence[tuple[str, Sequence[str]]]
              ) -> dict[str, Any]:
    """``parameters`` (a JSON schema) with each parameter ``held`` names held to its values."""
    props = parameters.get("properties")
    if not isinstance(props, dict):
        return parameters
    narrow = {param: list(allowed) for param, allowed in held if param in props}
    if not narrow:
        return parameters
    return {**parameters, "properties": {
        p: ({"type": "string", "enum": narrow[p]} if p in narrow else schema)
        for p, schema in props.items()}}


def _call_entries(tools: Sequence[dict[str, Any]], values: Variants = ()
                  ) -> list[dict[str, Any]]:
    """One schema per call a reply may hold: a tool's variants (``ToolChoice.values``) each,
    or the tool as it is."""
    entries = []
    for t in tools:
        name, parameters = t["function"]["name"], t["function"]["parameters"]
        for held in [v for tool, v in values if tool == name] or [()]:
            entries.append({"type": "object", "properties": {
                "name": {"const": name}, "arguments": _narrowed(parameters, held)},
                "required": ["name", "arguments"], "additionalProperties": False})
    return entries


MAX_CALLS = 8
"""The most calls one required reply may hold: a bound on a list the model keeps repeating."""


def call_schema(tools: Sequence[dict[str, Any]], values: Variants = ()) -> dict[str, Any]:
    """A ``response_format`` that admits a list of one or more calls of ``tools`` (wire shape):
    the text-call form of parallel tool calls.

    Measured with llama-server and the 1.5B on BFCL's parallel cases ("play songs of Taylor
    Swift and Maroon 5 for 20 and 15 minutes"): under a schema of one call it merged the two
    into one call ("Taylor Swift and Maroon 5", 20), and under "one call or a list" it still
    chose one; under a list it wrote the two calls. ``parallel_tool_calls`` is no lever here:
    llama-server defaults it to what the template supports (true for Qwen2.5's), and the model
    writes its calls as fenced JSON, never inside the ``<tool_call>`` tags that would start the
    server's own call grammar.

    ``values`` (``ToolChoice.values``) holds some parameters to the values given: measured
    with the 1.5B, a path it had guessed wrong was asked for again and again with the error
    naming the right one in front of it; under an enum of the paths that exist it cannot
    be."""
    return {"type": "json_schema", "json_schema": {"name": "tool_calls", "schema": {
        "type": "array", "items": {"oneOf": _call_entries(tools, values)},
        "minItems": 1, "maxItems": MAX_CALLS}}}


def answer_format(schema: Any, calls: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A ``response_format`` for a reply that is one JSON value of ``schema``, or, for a
    text-call model that may still call ``calls`` (wire shape), one call of them: measured
    with llama-server and Qwen2.5-Coder-0.5B, a schema alone also holds back the calls the
    model writes as text, and with the calls beside it the model wrote a call when it needed
    a file and the answer's JSON when it had what it needed."""
    answer = dict(schema)
    if calls:
        defs = answer.pop("$defs", None)  # "#/$defs/..." references resolve from the root
        answer = {"oneOf": [*_call_entries(calls), answer]}
        if defs is not None:
            answer["$defs"] = defs
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": answer}}


def _exchange_requests(messages: Sequence[Message]) -> list[str]:
    """The user's words since the last answer: the request and any steering added to it
    (a steering line adds to the request; it never replaces it)."""
    asked: list[str] = []
    for m in reversed(messages):
        if m.role == "assistant" and not m.tool_calls:
            break
        if m.role == "user" and m.text:
            asked.append(m.text)
    return asked[::-1]


def restate_request(wire: list[dict[str, Any]], messages: Sequence[Message],
                    answer_now: bool) -> None:
    """End the results message (the last of ``wire``) with the user's request again. Measured
    with the 1.5B: after "Result of read(...)" alone it wrote the same call again as text, even
    with no call allowed, and after "Answer my request from these results: Read notes.txt and
    ..." too; with "My request was: ... Answer it now in plain words" it answered."""
    asked = "\n".join(_exchange_requests(messages))
    if not wire or wire[-1].get("role") != "user" or not asked:
        return
    # "Go on with it" after a look that showed the answer drew steps ("you can compare the
    # values with grep -E ...") instead of the answer from the 1.5B.
    then = "Answer it now in plain words, using these results." if answer_now else \
        "If these results are enough, answer it now in plain words; if not, call a tool."
    wire[-1]["content"] = f"{wire[-1]['content']}\n\nMy request was: {asked}\n{then}"
