"""Every script in ``examples/`` runs offline, as it is, and shows what its docstring promises.

The docs include these files rather than copying them, so a script that breaks here is a page
that lies.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# What each example must print: the behaviour it exists to show, not its exact wording.
EXPECTED: dict[str, list[str]] = {
    "first_agent.py": ["steer accepted: queued", "completed -",
                       "second request: ['system', 'user', 'assistant', 'tool', 'user']",
                       "its last message: Answer in one line."],
    "interrupts.py": ["graceful: interrupted | tools run: ('slow_step',)",
                      "hard: aborted | session rolled back: True"],
    "busy_sessions.py": ["revoked", "edited", "the follow-up turn was asked: Then update the README."],
    "durable_resume.py": ["first process: cancelled | pending: True", "resumed: completed",
                          "deploy ran 1 time(s)"],
    "hooks_and_approvals.py": ["skipped: denied - outside the project",
                               "asked: write_file {'path': 'notes.md'", "ran: write_file"],
    "subagents.py": ["subturn_spawn researcher", "subturn_end completed",
                     "pipeline: Add one test, then ship."],
    "record_replay.py": ["recorded: Five words.", "replayed: Five words.",
                         "with the changed tool: replay diverged"],
    "turnloop.py": ["turn aborted: 2 item(s)", "turn completed: 3 item(s)",
                    "URGENT: production is down"],
}


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(EXAMPLES / name)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for expected in EXPECTED[name]:
        assert expected in proc.stdout, f"{name} did not print {expected!r}:\n{proc.stdout}"
