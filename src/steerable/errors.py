"""Every exception steerable raises, in one tree.

    SteerableError
     ├── ConfigurationError (also ValueError)   bad arguments to Agent, AgentLoop, @tool
     ├── SessionBusyError (also RuntimeError)    a second turn started on a busy session
     ├── CheckpointError (also ValueError)       a turn checkpoint that cannot be resumed
     ├── RequestError (also ValueError)          an answer to an approval or question refused
     │    ├── UnknownRequestError                no such request was ever issued (or it is gone)
     │    ├── RequestClosedError                 the request was answered (or closed) already
     │    └── InvalidAnswerError                 the value fails the question's choices or schema
     ├── IllegalTransitionError (also RuntimeError)  a turn-state bug: never caught, always fixed
 ├── OutputValidationError (also ValueError)  the final answer never fit ``Agent(output_type=)``
     ├── ToolError                               a tool failed in a way the model should read
     │    ├── ToolArgumentsError                 arguments were not valid for the tool's schema
     │    └── SubturnError                       a sub-turn could not start, or a composite's child failed
     │         └── SubturnLimitError             a Limits bound (depth, per turn, active turns) refused it
     └── ProviderError                           the LLM call failed
          ├── ScriptExhaustedError               ScriptedProvider got more requests than steps
          ├── ContextOverflowError               the request does not fit the model's window
          ├── RetryableProviderError             429, 5xx, connection drop: worth a retry
          └── FatalProviderError                 401, 403, 404, 400: fix the setup, do not retry

Control flow (hard abort, graceful interrupt) is carried by flags and ``CancelledError``, never
by these classes: an exception here always means something went wrong.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigurationError",
    "ContextOverflowError",
    "FatalProviderError",
    "IllegalTransitionError",
    "InvalidAnswerError",
    "OutputValidationError",
    "ProviderError",
    "RequestClosedError",
    "RequestError",
    "RetryableProviderError",
    "ScriptExhaustedError",
    "SessionBusyError",
    "SteerableError",
    "SubturnError",
    "SubturnLimitError",
    "ToolArgumentsError",
    "ToolError",
    "UnknownRequestError",
]


class SteerableError(Exception):
    """The root of every error steerable raises on purpose."""


class ConfigurationError(SteerableError, ValueError):
    """A value given to the public API is not usable; the message says what was expected."""


class SessionBusyError(SteerableError, RuntimeError):
    """A turn was started on a session that already has an active turn."""


class CheckpointError(SteerableError, ValueError):
    """A turn checkpoint that cannot be resumed: unreadable, foreign, from another schema, or
    written by another agent. The message names the file or session and what to do; the
    session's history is never affected."""


class RequestError(SteerableError, ValueError):
    """An answer to an approval or a question was refused; nothing changed, and a request
    that was open stays open. The message says why and what to do."""


class UnknownRequestError(RequestError):
    """No open request has this id: it was never issued (ids are unguessable) or its turn
    was discarded."""


class RequestClosedError(RequestError):
    """The request was answered already (an answer counts once) or its turn moved on."""


class InvalidAnswerError(RequestError):
    """The value does not fit the question's ``choices`` or ``schema``; it stays open."""


class IllegalTransitionError(SteerableError, RuntimeError):
    """The turn state machine was asked for a transition it does not allow (a bug)."""


class OutputValidationError(SteerableError, ValueError):
    """The model's final answer did not validate against the agent's ``output_type``, and the
    retries (``Agent(output_retries=)``) or the iteration budget were used up. The turn ends
    with status ``error`` and this in ``result.error``; ``errors`` holds pydantic's error list
    for the last answer, ``text`` the answer itself."""

    def __init__(self, message: str, *, text: str = "",
                 errors: tuple[dict[str, object], ...] = ()) -> None:
        super().__init__(message)
        self.text = text
        self.errors = errors


class ToolError(SteerableError):
    """Raise from a tool to return an error result with exactly this message to the model."""


class ToolArgumentsError(ToolError):
    """The arguments the model sent do not match the tool's schema."""


class SubturnError(ToolError):
    """A sub-turn could not be started (unknown agent, the turn is ending), or a composite
    agent's child failed. Raised from a tool, it is an error result the model can read."""


class SubturnLimitError(SubturnError):
    """A ``Limits`` bound refused a sub-turn; ``limit`` names it (e.g. ``subturn_depth``)."""

    def __init__(self, message: str, *, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class ProviderError(SteerableError):
    """The LLM provider failed to produce a response."""


class ScriptExhaustedError(ProviderError):
    """A ScriptedProvider received a request after its script ran out."""


class ContextOverflowError(ProviderError):
    """The request exceeds the model's context window; the loop compresses and retries once."""


class RetryableProviderError(ProviderError):
    """A transient failure (rate limit, server error, dropped connection)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FatalProviderError(ProviderError):
    """A failure a retry cannot fix (bad key, unknown model, bad request)."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
