"""Structured output: ``Agent(output_type=T)``, its wire schema and the check of an answer.

The type's JSON schema travels in every request the answer may come from
(``LLMRequest.answer_schema``); each provider asks for it in its own wire form (a
``response_format`` json_schema, a grammar, or a final-answer tool) and the answer comes back
as text either way, so the check here is one: parse the text as JSON and validate it with
pydantic's ``TypeAdapter`` (pydantic models, dataclasses, TypedDicts and plain types alike).

A failed check is answered like a tool error: the reply stays in the history and a user
message gives the model the validation errors and asks again, up to ``output_retries`` times
(each retry is an iteration). When none is left, or the iteration budget ran out, the turn ends
with status ``error`` and ``OutputValidationError`` in ``result.error``. A graceful interrupt's
summary (and a budget's) is never asked for the schema: it is words for a person, so
``result.output`` is None and the status says why. (The turn's side is ``_answer``.)
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from steerable.errors import ConfigurationError

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = ["OutputSpec", "describe_errors"]

_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
_MAX_ERRORS = 8
"""Validation errors shown to the model at most (the rest are counted)."""


class OutputSpec:
    """What an agent's answer must be: the type, its schema for the wire, how to check it.

    Wire schemas must describe an object (OpenAI's json_schema, Anthropic's tool input), so a
    type whose schema is not one (``list[str]``, ``int``) is asked for as ``{"value": ...}``
    and unwrapped after the check."""

    __slots__ = ("adapter", "name", "retries", "schema", "type", "wrapped")

    def __init__(self, output_type: Any, retries: int) -> None:
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigurationError(f"output_retries must be an int >= 0, got {retries!r}")
        # Deferred: pydantic costs ~60 ms to import, and only an agent with an output_type
        # needs it (the core imports without it).
        from pydantic import TypeAdapter

        try:
            adapter: TypeAdapter[Any] = TypeAdapter(output_type)
            schema = adapter.json_schema()
        except Exception as exc:
            raise ConfigurationError(
                f"output_type {output_type!r} has no JSON schema: {exc}") from exc
        self.type = output_type
        self.adapter = adapter
        self.retries = retries
        self.name: str = getattr(output_type, "__name__", None) or repr(output_type)
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"value": schema},
                      "required": ["value"], "additionalProperties": False}
            if defs is not None:
                schema["$defs"] = defs
        self.schema: dict[str, Any] = schema

    def parse(self, text: str) -> Any:
        """The answer's value; raises ``ValueError``: pydantic's ``ValidationError`` (one of
        them), or not JSON."""
        body = text.strip()
        fenced = _FENCE.match(body)
        if fenced is not None:  # models like to fence JSON even when told not to
            body = fenced.group(1).strip()
        if not self.wrapped:
            return self.adapter.validate_json(body)
        value = json.loads(body)
        if isinstance(value, dict) and set(value) == {"value"}:
            value = value["value"]
        return self.adapter.validate_json(json.dumps(value))


def describe_errors(exc: Exception) -> tuple[tuple[dict[str, Any], ...], str]:
    from pydantic import ValidationError  # imported by the OutputSpec that raised: a lookup

    if not isinstance(exc, ValidationError):
        return (), f"it is not JSON ({exc})"
    errors = tuple(dict(e) for e in exc.errors(include_url=False, include_context=False))
    lines = []
    for err in errors[:_MAX_ERRORS]:
        loc: Any = err.get("loc", ())
        where = ".".join(str(p) for p in loc) or "(the whole value)"
        lines.append(f"- {where}: {err.get('msg', 'invalid')}")
    if len(errors) > _MAX_ERRORS:
        lines.append(f"- ... and {len(errors) - _MAX_ERRORS} more")
    return errors, "\n".join(lines)
