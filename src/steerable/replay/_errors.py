"""The two ways a replay fails: the file is not a recording, or the run left the recording."""

from __future__ import annotations

from steerable.errors import SteerableError

__all__ = ["RecordingError", "ReplayDivergence"]


class RecordingError(SteerableError, ValueError):
    """The file is not a recording this version can read (or the recorder was misused)."""


class ReplayDivergence(SteerableError, AssertionError):
    """The replayed run did something the recording does not have.

    ``index`` is the position (0-based) of the first recorded event that differs, or -1 when the
    difference is in an LLM request; ``expected`` and ``actual`` are the two sides in JSON form.
    """

    def __init__(self, message: str, *, index: int = -1, expected: object = None,
                 actual: object = None) -> None:
        super().__init__(message)
        self.index = index
        self.expected = expected
        self.actual = actual
