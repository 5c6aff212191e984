"""The JSON forms that cross Temporal's boundary: model requests and replies, tool calls and
results, a session's history. Plain dicts (Temporal's default JSON converter), in the storage
form of messages (``steerable.storage._records``), so a history carried into a new run of the
workflow (continue-as-new) reads as the files on disk do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from steerable._messages import Message, ToolCall, ToolResult, Usage
from steerable._parts_json import part_from_json, part_to_json
from steerable.providers._base import LLMRequest, LLMResponse, ToolChoice, ToolSpec
from steerable.storage._records import SCHEMA_VERSION, message_from_record, message_to_record

__all__ = ["choice_from_json", "choice_to_json", "messages_from_json", "messages_to_json", "request_from_json", "request_to_json",
           "response_from_json", "response_to_json", "result_from_json", "result_to_json"]


def messages_to_json(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [message_to_record(m) for m in messages]


def messages_from_json(raw: Sequence[Mapping[str, Any]]) -> list[Message]:
    return [message_from_record(m, SCHEMA_VERSION) for m in raw]


def choice_to_json(choice: ToolChoice) -> dict[str, Any]:
    return {"mode": choice.mode, "only": None if choice.only is None else list(choice.only),
            "max_tokens": choice.max_tokens, "reason": choice.reason,
            "values": [[tool, [[param, list(allowed)] for param, allowed in held]]
                       for tool, held in choice.values]}


def choice_from_json(raw: Mapping[str, Any]) -> ToolChoice:
    # "values" is absent from histories written before it existed.
    values = tuple((tool, tuple((param, tuple(allowed)) for param, allowed in held))
                   for tool, held in raw.get("values", ()))
    return ToolChoice(raw["mode"], None if raw["only"] is None else tuple(raw["only"]),
                      raw["max_tokens"], raw["reason"], values)


def request_to_json(request: LLMRequest) -> dict[str, Any]:
    return {
        "messages": messages_to_json(request.messages),
        "tools": [{"name": t.name, "description": t.description,
                   "parameters": dict(t.parameters), "read_only": t.read_only}
                  for t in request.tools],
        "model": request.model, "params": dict(request.params),
        "tool_choice": choice_to_json(request.tool_choice),
        "answer_schema": None if request.answer_schema is None else dict(request.answer_schema),
    }


def request_from_json(raw: Mapping[str, Any]) -> LLMRequest:
    return LLMRequest(
        messages=tuple(messages_from_json(raw["messages"])),
        tools=tuple(ToolSpec(t["name"], t["description"], t["parameters"], t["read_only"])
                    for t in raw["tools"]),
        model=raw["model"], params=raw["params"],
        tool_choice=choice_from_json(raw["tool_choice"]),
        answer_schema=raw["answer_schema"],
    )


def _call_json(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": dict(call.arguments),
            "arguments_error": call.arguments_error}


def response_to_json(response: LLMResponse) -> dict[str, Any]:
    usage = response.usage
    return {"text": response.text, "thinking": response.thinking,
            "tool_calls": [_call_json(c) for c in response.tool_calls],
            "usage": None if usage is None else [usage.input_tokens, usage.output_tokens],
            "finish_reason": response.finish_reason}


def response_from_json(raw: Mapping[str, Any]) -> LLMResponse:
    usage = raw["usage"]
    return LLMResponse(
        text=raw["text"], thinking=raw["thinking"],
        tool_calls=tuple(ToolCall(c["id"], c["name"], c["arguments"], c["arguments_error"])
                         for c in raw["tool_calls"]),
        usage=None if usage is None else Usage(usage[0], usage[1]),
        finish_reason=raw["finish_reason"])


def result_to_json(result: ToolResult) -> dict[str, Any]:
    out = {"content": result.content, "is_error": result.is_error,
           "metadata": dict(result.metadata)}
    if result.parts:  # (inline base64: a tool's image crosses to the workflow with it)
        out["parts"] = [part_to_json(p, None) for p in result.parts]
    return out


def result_from_json(raw: Mapping[str, Any]) -> ToolResult:
    return ToolResult(raw["content"], is_error=raw["is_error"], metadata=raw["metadata"],
                      parts=tuple(part_from_json(p, None) for p in raw.get("parts", ())))
