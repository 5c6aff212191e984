"""Steering a running prompt over ACP: ``_session/steering`` and the draft ``session/inject``.

``_session/steering`` is the extension the Codex and Claude Code adapters answer (request
``{sessionId, prompt, _meta?: {steering: {idleBehavior}}}``; answer ``{outcome}``):

- ``injected``: the running turn took the message; it reaches the model at the turn's next
  checkpoint (before its next LLM call). A turn that ends with it still pending hands it back
  (as a follow-up turn, or in the prompt response's ``_meta.steerable.notDelivered``): never
  silently dropped.
- no turn running (or the running one is already finishing and takes no more steering):
  with ``idleBehavior: "promptRequired"`` the answer is ``promptRequired`` /
  ``noRunningTurn`` and nothing was accepted (the client sends it as a prompt); otherwise the
  message starts a turn of its own (``startedNewTurn``), queued behind a finishing one.

The refusal and the acceptance are decided in one step on the loop's thread, so a steer that
races the turn's end is either in that turn or answered as not taken: there is no window in
which it is accepted and then lost.

``_session/inject`` (behind ``--unstable``) is the v2 draft's shape: ``mode`` ``steer`` (as
above, always starting a turn when idle) or ``queue`` (a follow-up: its own turn after the
running one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp import RequestError
from acp.schema import PromptRequest
from pydantic import ValidationError

from steerable._loop import AgentLoop
from steerable.protocols.acp._prompt import prompt_text

__all__ = ["SteeringDesk"]

StartTurn = Callable[[str, str], None]
"""Start (or queue) a turn of its own for a message: (session id, text)."""


def _text(params: dict[str, Any]) -> tuple[str, str]:
    try:
        request = PromptRequest.model_validate(
            {"sessionId": params.get("sessionId"), "prompt": params.get("prompt")})
    except ValidationError as exc:
        raise RequestError.invalid_params({"errors": exc.errors(include_url=False)}) from None
    return request.session_id, prompt_text(request.prompt)


def _idle_behavior(params: dict[str, Any]) -> str:
    meta = params.get("_meta")
    steering = meta.get("steering") if isinstance(meta, dict) else None
    value = steering.get("idleBehavior") if isinstance(steering, dict) else None
    return value if isinstance(value, str) else "startNewTurn"


class SteeringDesk:
    """Answers steering requests for the sessions of one loop."""

    def __init__(self, loop: AgentLoop, start_turn: StartTurn) -> None:
        self._loop = loop
        self._start = start_turn

    def steer(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, text = _text(params)
        if self._loop.inject_steering(text, session_id):
            return {"outcome": "injected"}
        if _idle_behavior(params) == "promptRequired":
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        self._start(session_id, text)
        return {"outcome": "startedNewTurn"}

    def inject(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, text = _text(params)
        mode = params.get("mode", "steer")
        if mode == "steer":
            if self._loop.inject_steering(text, session_id):
                return {"outcome": "injected"}
        elif mode == "queue":
            if self._loop.busy(session_id):
                self._start(session_id, text)
                return {"outcome": "queued"}
        else:
            raise RequestError.invalid_params(
                {"message": f"mode must be 'steer' or 'queue', got {mode!r}"})
        self._start(session_id, text)
        return {"outcome": "startedNewTurn"}
