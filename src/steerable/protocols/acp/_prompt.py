"""What the editor sends as a prompt, as the text a turn takes; turn ends as ACP answers.

Text blocks are kept as they are; an embedded text resource (a file the person attached)
becomes a ``<context uri=...>`` block and a resource link a Markdown link, so the model sees
what was referenced. Images and audio are refused with a clear error: the agent does not
advertise them (``promptCapabilities``), and dropping them silently would lose the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp import RequestError
from acp.schema import StopReason

from steerable._core._turn import TurnResult
from steerable._events import TurnStatus

__all__ = ["prompt_text", "stop_reason"]

_STOP: dict[TurnStatus, StopReason] = {
    TurnStatus.COMPLETED: "end_turn",
    TurnStatus.MAX_ITERATIONS: "max_turn_requests",
    TurnStatus.BUDGET_EXCEEDED: "max_turn_requests",
    TurnStatus.CANCELLED: "cancelled",
    TurnStatus.INTERRUPTED: "cancelled",
    TurnStatus.ABORTED: "cancelled",
}


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if not isinstance(text, str):
            raise RequestError.invalid_params(
                {"message": f"embedded resource {res.uri} is not text; only text resources "
                            "are supported"})
        return f'<context uri="{res.uri}">\n{text}\n</context>'
    if kind == "resource_link":
        return f"[@{block.name}]({block.uri})"
    raise RequestError.invalid_params(
        {"message": f"prompt content of type {kind!r} is not supported (the agent takes text, "
                    "text resources and resource links)"})


def prompt_text(blocks: Sequence[Any]) -> str:
    """The prompt as one text; ``invalid_params`` when it is empty or holds what the agent
    does not take."""
    text = "\n\n".join(_block_text(b) for b in blocks)
    if not text.strip():
        raise RequestError.invalid_params({"message": "the prompt is empty"})
    return text


def stop_reason(result: TurnResult) -> StopReason:
    """How a turn's end reads in ACP; an error turn is answered with a JSON-RPC error instead
    (its consistent prefix is saved all the same)."""
    if result.status is TurnStatus.ERROR:
        raise RequestError.internal_error(
            {"message": f"the turn failed: {result.error}", "turnId": result.turn_id})
    return _STOP.get(result.status, "end_turn")
