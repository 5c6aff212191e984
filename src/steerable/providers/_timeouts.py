"""How long an HTTP provider waits: a small value, validated where it is made."""

from __future__ import annotations

from steerable._records import Record, record

__all__ = ["ProviderTimeouts"]


@record
class ProviderTimeouts(Record):
    """Seconds. ``read`` bounds every silence, the wait for the first token included;
    ``total`` bounds one whole attempt (None: no bound)."""

    connect: float = 10.0
    read: float = 120.0
    total: float | None = 600.0

    def __post_init__(self) -> None:
        for name in ("connect", "read", "total"):
            value = getattr(self, name)
            if value is None and name == "total":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"ProviderTimeouts.{name} must be a positive number, got {value!r}")
