"""What the tool policy concluded about a finished turn, and the lines it marks an answer with
(the CLI, the page and the events show them; the CLI exits non-zero on a change missing or a
file left broken)."""

from __future__ import annotations

from dataclasses import dataclass

from steerable.coding._classify import Intent

__all__ = ["BROKEN_MARK", "NOTHING_CHANGED_MARK", "UNVERIFIED_MARK", "Verdict"]

UNVERIFIED_MARK = "⚠ unverified"
"""Starts the line that lists what the answer states but no tool result showed (or the values
the results compare that it leaves out)."""
NOTHING_CHANGED_MARK = "✗ nothing was changed"
"""Starts the line a change request that changed no file ends with."""
BROKEN_MARK = "✗ no longer parses"
"""Starts the line a change request ends with when a file it changed no longer parses."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policy concluded about a finished turn (``ToolPolicy.verdict``)."""

    intent: Intent
    changed: bool
    unverified: tuple[str, ...] = ()
    rechecked: bool = False
    broken: tuple[str, ...] = ()
    """Files the change left unparsable (Python, JSON, TOML that parsed before)."""
    held: tuple[str, ...] = ()
    """The acting tools the model called although the request's change was not confirmed
    (one reading said change, the other did not: ``_confirm``): refused, and the user is told
    nothing was changed and why."""

    @property
    def change_missing(self) -> bool:
        """The request asked for a change and no tool changed anything."""
        return self.intent == "change" and not self.changed
