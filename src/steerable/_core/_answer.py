"""The turn's side of structured output: accept the final answer, or ask for it again.

``_output`` says what the answer must be (``OutputSpec``); this module keeps the checked value
in the turn's ledger, or adds the user message that asks again with the errors (see
``_output`` for the rules).
"""

from __future__ import annotations

from steerable._core._output import describe_errors
from steerable._core._turn_state import TurnState
from steerable._messages import Message
from steerable.errors import OutputValidationError

__all__ = ["accept_answer"]


def accept_answer(st: TurnState, text: str, can_retry: bool) -> bool:
    """Check the turn's final answer against the agent's ``output_type``.

    True: it is valid (its value is kept for ``result.output``). False: the model is asked
    again (a user message with the errors was added). Raises ``OutputValidationError`` when
    it is invalid and no retry is left (or ``can_retry`` is False: the iteration budget)."""
    spec = st.model_agent.output
    assert spec is not None
    ledger = st.ledger
    try:
        ledger.output = spec.parse(text)
        return True
    except ValueError as exc:  # (pydantic's ValidationError is one)
        errors, listing = describe_errors(exc)
    tries = ledger.output_retries
    if not can_retry or tries >= spec.retries:
        why = "no retry was left" if can_retry else "the iteration budget was used up"
        raise OutputValidationError(
            f"the final answer is not a valid {spec.name} after {tries} "
            f"retr{'y' if tries == 1 else 'ies'} ({why}):\n{listing}",
            text=text, errors=errors)
    ledger.output_retries = tries + 1
    st.transcript.new.append(Message("user", (
        f"Your answer is not a valid {spec.name}:\n{listing}\n"
        "Answer again with only the JSON value, matching the schema you were given.")))
    return False
