"""Small configuration values: limits and timeouts, each validated where it is made."""

from __future__ import annotations

from steerable._records import Record, record

__all__ = ["DEFAULT_SUMMARY_PROMPT", "Limits", "SummaryPolicy", "Timeouts"]


def _check_positive(owner: str, name: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{owner}.{name} must be a positive number, got {value!r}")


@record
class Timeouts(Record):
    """How long the loop waits for user code, in seconds.

    A hook that overruns ``hook`` is treated as CONTINUE; an approver that overruns ``approval``
    as a denial. ``tool`` is the default for tools that declare no timeout (None: no limit).
    ``llm_idle`` bounds the wait for each chunk of an LLM stream (the first one included): a
    provider that goes silent that long fails the call instead of hanging the turn.
    """

    hook: float = 5.0
    approval: float = 60.0
    tool: float | None = None
    llm_idle: float | None = 300.0
    park_after: float = 0.0
    """With ``AgentLoop(park=True)``: how long an open approval or question is waited for
    live before its turn parks (``TurnStatus.WAITING``); 0 parks at once."""

    def __post_init__(self) -> None:
        _check_positive("Timeouts", "hook", self.hook)
        _check_positive("Timeouts", "approval", self.approval)
        _check_positive("Timeouts", "tool", self.tool, allow_none=True)
        _check_positive("Timeouts", "llm_idle", self.llm_idle, allow_none=True)
        if isinstance(self.park_after, bool) or not isinstance(self.park_after, int | float) \
                or not 0 <= self.park_after < self.approval:
            raise ValueError(
                f"Timeouts.park_after must be a number from 0 up to (not including) approval "
                f"({self.approval:g} s), got {self.park_after!r}")


@record
class Limits(Record):
    """Bounds that keep one turn from taking over the process."""

    parallel_tools: int = 8
    """Read-only calls of one group that run at once."""
    steering_queue: int = 32
    follow_up_queue: int = 32
    active_turns: int | None = None
    """Turns running at once across sessions, sub-turns included (None: no limit). A top-level
    turn past it waits for a free slot before it starts working; a sub-turn past it is refused."""
    subturn_depth: int = 3
    """How deep sub-turns may nest: a top-level turn's children are at depth 1."""
    subturns_per_turn: int = 5
    """Sub-turns one turn may have running at once; a slot is freed when a child ends."""
    max_turn_tokens: int | None = None
    """Input plus output tokens one turn may use, its sub-turns' included (None: no limit)."""
    max_turn_cost_usd: float | None = None
    """US dollars one turn may spend, its sub-turns' included, counting the calls whose model
    has a known price (None: no limit)."""
    max_tool_calls: int | None = None
    """Tool calls one turn may make, its sub-turns' included (None: no limit). A turn at a
    budget limit ends as a graceful interrupt does, with status ``budget_exceeded``."""

    @property
    def budgeted(self) -> bool:
        """Whether any of the turn budgets is set (the loop checks them only then)."""
        return (self.max_turn_tokens is not None or self.max_turn_cost_usd is not None
                or self.max_tool_calls is not None)

    def __post_init__(self) -> None:
        for name in ("max_turn_tokens", "max_tool_calls"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"Limits.{name} must be an int >= 1 or None, got {value!r}")
        _check_positive("Limits", "max_turn_cost_usd", self.max_turn_cost_usd, allow_none=True)
        for name in ("parallel_tools", "steering_queue", "follow_up_queue", "subturn_depth",
                     "subturns_per_turn"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be an int >= 1, got {value!r}")
        if self.active_turns is not None and (
            isinstance(self.active_turns, bool) or not isinstance(self.active_turns, int)
            or self.active_turns < 1
        ):
            raise ValueError(f"Limits.active_turns must be an int >= 1 or None, got {self.active_turns!r}")


DEFAULT_SUMMARY_PROMPT = (
    "Summarise the conversation below for your own later use: the user's goals, decisions made, "
    "facts learned (file names, values, errors), and what is still open. Be concise and concrete."
)


@record
class SummaryPolicy(Record):
    """When and how a long session is summarised in the background after a turn.

    Once the stored session is estimated above ``at_tokens``, every exchange but the last
    ``keep_exchanges`` is replaced by one summary message written by the agent's own model.
    """

    at_tokens: int
    keep_exchanges: int = 2
    prompt: str = DEFAULT_SUMMARY_PROMPT

    def __post_init__(self) -> None:
        for name in ("at_tokens", "keep_exchanges"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SummaryPolicy.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("SummaryPolicy.prompt must be a non-empty str")
