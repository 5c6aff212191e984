"""Record a run once, replay it with no model and no network (tests, bug reports, regressions).

``Recorder(loop, path)`` writes a loop's events, every provider stream, every tool result and
every control (steering, interrupts, approvals) with its position; ``replay(path)`` runs the
same turns again against those recordings and raises ``ReplayDivergence`` at the first event or
LLM request that differs. See docs/guides/record-replay.md.
"""

from __future__ import annotations

from steerable.replay._errors import RecordingError, ReplayDivergence
from steerable.replay._format import Recording, load_recording
from steerable.replay._player import ReplayResult, replay
from steerable.replay._record import Recorder

__all__ = [
    "Recorder",
    "Recording",
    "RecordingError",
    "ReplayDivergence",
    "ReplayResult",
    "load_recording",
    "replay",
]
