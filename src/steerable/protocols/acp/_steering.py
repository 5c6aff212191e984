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

Every answer that took the message carries its id and state in
``_meta.steerable`` (``messageId``, ``state``: the loop's message lifecycle, SPEC 10), and the
agent tells the editor how each such message ends with a ``_session/message_state``
notification (``delivered``, ``returned``, ``rejected``, ``revoked``).

``_session/inject`` (behind ``--unstable``) is the v2 draft's shape over that lifecycle:
``action`` ``inject`` (default) with ``mode`` ``steer`` (as above, always starting a turn when
idle) or ``queue`` (its own turn after the running one); ``revoke`` a message by
``messageId`` while it is still queued; ``replace`` its text (``prompt``) while it is queued.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp import RequestError
from acp.schema import PromptRequest
from pydantic import ValidationError

from steerable.drivers._loop import AgentLoop
from steerable.protocols.acp._prompt import prompt_text

__all__ = ["SteeringDesk"]

StartTurn = Callable[[str, str], Any]
"""Start (or queue) a turn of its own for a message: (session id, text) -> what ``send``
answered (it has ``message_id`` and ``state``)."""


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


def _taken(outcome: str, receipt: Any) -> dict[str, Any]:
    return {"outcome": outcome, "_meta": {"steerable": {
        "messageId": receipt.message_id, "state": receipt.state.value}}}


class SteeringDesk:
    """Answers steering requests for the sessions of one loop; ``watched`` holds the ids of
    the messages taken here, whose end the editor is told of."""

    def __init__(self, loop: AgentLoop, start_turn: StartTurn) -> None:
        self._loop = loop
        self._start = start_turn
        self.watched: dict[str, str] = {}
        """message id -> session id."""

    def _watch(self, session_id: str, receipt: Any) -> None:
        if receipt.message_id is not None and not receipt.state.terminal:
            self.watched[receipt.message_id] = session_id

    def steer(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id, text = _text(params)
        receipt = self._loop.inject_steering(text, session_id)
        if receipt:
            self._watch(session_id, receipt)
            return _taken("injected", receipt)
        if _idle_behavior(params) == "promptRequired":
            return {"outcome": "promptRequired", "reason": "noRunningTurn"}
        started = self._start(session_id, text)
        self._watch(session_id, started)
        return _taken("startedNewTurn", started)

    def inject(self, params: dict[str, Any]) -> dict[str, Any]:
        action = params.get("action", "inject")
        if action == "revoke":
            return {"revoked": self._loop.revoke_message(_message_id(params))}
        if action == "replace":
            _, text = _text(params)
            return {"replaced": self._loop.edit_message(_message_id(params), text)}
        if action != "inject":
            raise RequestError.invalid_params(
                {"message": f"action must be 'inject', 'revoke' or 'replace', got {action!r}"})
        session_id, text = _text(params)
        mode = params.get("mode", "steer")
        if mode not in ("steer", "queue"):
            raise RequestError.invalid_params(
                {"message": f"mode must be 'steer' or 'queue', got {mode!r}"})
        if mode == "steer":
            receipt = self._loop.inject_steering(text, session_id)
            if receipt:
                self._watch(session_id, receipt)
                return _taken("injected", receipt)
        busy = self._loop.busy(session_id)
        started = self._start(session_id, text)
        self._watch(session_id, started)
        return _taken("queued" if busy and mode == "queue" else "startedNewTurn", started)


def _message_id(params: dict[str, Any]) -> str:
    value = params.get("messageId")
    if not isinstance(value, str) or not value:
        raise RequestError.invalid_params({"message": "messageId (a string) is required"})
    return value
