"""The tool seam: what the loop needs from a tool, and the context a running tool gets.

A tool has a name, a description, a JSON schema for its arguments and a ``read_only`` flag
(undeclared means mutating: that only costs parallelism, never correctness). The loop calls
``validate`` before ``run``, and ``preview`` instead of ``run`` for a mutating tool in dry-run.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from steerable._events import TurnStatus
from steerable._messages import ToolResult
from steerable._parts import FilePart, ImagePart, TextPart
from steerable._receipts import MessageReceipt
from steerable._records import state
from steerable.providers._base import ToolSpec

__all__ = ["BaseTool", "CarriedState", "ChildResult", "ChildTurn", "Subturns", "Tool", "ToolContext",
           "UncoveredSubject"]


class ChildResult(Protocol):
    """How a sub-turn ended (a ``steerable.TurnResult``)."""

    @property
    def turn_id(self) -> str: ...
    @property
    def status(self) -> TurnStatus: ...
    @property
    def text(self) -> str: ...
    @property
    def error(self) -> BaseException | None: ...


class ChildTurn(Protocol):
    """A running sub-turn: await it for its result; steer or interrupt it by its handle."""

    @property
    def turn_id(self) -> str: ...
    @property
    def agent_name(self) -> str: ...
    def done(self) -> bool: ...
    def inject_steering(self, text: str) -> MessageReceipt: ...
    def interrupt_graceful(self, hint: str | None = None) -> bool: ...
    def interrupt_hard(self) -> bool: ...
    def __await__(self) -> Generator[Any, None, ChildResult]: ...


class Subturns(Protocol):
    """The engine's sub-turn entry point for one turn (see ``ToolContext.run_subturn``)."""

    def run(self, agent: object, task: str) -> Awaitable[ChildResult]: ...
    def spawn(self, agent: object, task: str, deliver: bool) -> ChildTurn: ...


@state(kw_only=True)
class ToolContext:
    """Handed to a running tool: who called it, and how to report progress.

    ``progress`` is safe to call from the tool's own thread (sync tools run in a worker thread).
    ``cancelled`` (a ``threading.Event``) is set when the turn is aborted or the tool timed out,
    so a sync tool that loops can stop early; async tools are cancelled the usual asyncio way.

    ``run_subturn`` and ``spawn_subturn`` start a child turn (a sub-turn) from an async tool,
    with the same limits and events as the model's ``subagent`` and ``spawn`` tools.
    """

    call_id: str
    tool_name: str
    turn_id: str
    session_id: str
    parent_turn_id: str | None = None
    iteration: int = 0
    dry_run: bool = False
    resumed: bool = False
    """True when this call may already have run (in part) before: its turn was resumed from a
    checkpoint taken while it was running, in a process that then died, or the call asked a
    question that parked its turn (``ask``). Tools with side effects can use it to check
    before doing them twice (execution is at-least-once for exactly this call)."""
    _cancel_event: threading.Event | None = None
    _cancel_requested: bool = False
    _report: Callable[[str, Mapping[str, Any]], None] | None = None
    _subturns: Subturns | None = None
    _refuses: Callable[[str], bool] | None = None
    _plan: Callable[[tuple[Mapping[str, str], ...]], None] | None = None
    _ask: Callable[[str, Sequence[str] | None, Mapping[str, Any] | None], Awaitable[Any]] \
        | None = None

    @property
    def cancelled(self) -> threading.Event:
        # Made on first use: most tools never look, and an Event costs more than a tool call.
        if self._cancel_event is None:
            self._cancel_event = threading.Event()
            if self._cancel_requested:
                self._cancel_event.set()
        return self._cancel_event

    def cancel(self) -> None:
        """Set ``cancelled`` (the loop calls this on abort and timeout)."""
        self._cancel_requested = True
        if self._cancel_event is not None:
            self._cancel_event.set()

    async def run_subturn(self, agent: object, task: str) -> ChildResult:
        """Run ``agent`` (an agent object, or the name of one of the calling agent's
        ``subagents``) on ``task`` as a child of this turn, and wait for its ``TurnResult``.

        Raises ``SubturnError`` for an unknown name and ``SubturnLimitError`` over a limit
        (uncaught, either becomes an error result the model reads). Cancelling the wait (the
        tool timed out, the turn was aborted) aborts the child.
        """
        return await self._engine_subturns().run(agent, task)

    def spawn_subturn(self, agent: object, task: str, *, deliver: bool = True) -> ChildTurn:
        """Start ``agent`` on ``task`` as a child of this turn and return its handle at once.

        With ``deliver`` its final text reaches this turn's model before the next LLM call after
        the child ended (or the session, if this turn has made its last call); without it, only
        whoever awaits the handle gets the result.
        """
        return self._engine_subturns().spawn(agent, task, deliver)

    def _engine_subturns(self) -> Subturns:
        if self._subturns is None:
            raise RuntimeError("this ToolContext was not made by a running turn; it cannot spawn")
        return self._subturns

    async def ask(self, question: str, *, choices: Sequence[str] | None = None,
                  schema: Mapping[str, Any] | None = None) -> Any:
        """Ask the person ``question`` and return the answer (``QUESTION_ASKED``; answered by
        ``AgentLoop.answer``): a str, one of ``choices``, or JSON data that fits ``schema``.

        On a loop with ``park=True`` an unanswered question parks the turn: this call is
        cancelled, and once answered (from any process) the tool runs again from the start
        with ``resumed`` set, and this ``ask`` returns the answer at once. So do nothing
        before an ``ask`` that must not happen twice. Without parking, the wait is live and
        a question left unanswered ``Timeouts.approval`` seconds fails the tool.
        """
        if self._ask is None:
            raise RuntimeError("this ToolContext was not made by a running turn; it cannot ask")
        return await self._ask(question, choices, schema)

    def refuses(self, subject: str) -> bool:
        """Whether a deny or ask rule for this tool (or its family) names ``subject``.

        Tools that touch many things in one call (grep, find and ls walking folders) leave out
        each entry refused here, so a rule on a path holds whatever folder was asked for.
        """
        return self._refuses is not None and self._refuses(subject)

    def update_plan(self, items: Sequence[Mapping[str, str]]) -> None:
        """Emit ``PLAN_UPDATED`` with the agent's whole plan (``content`` and ``status`` each)."""
        if self._plan is not None:
            self._plan(tuple(dict(item) for item in items))

    def progress(self, text: str, **data: Any) -> None:
        """Emit ``TOOL_EXEC_PROGRESS`` with ``text`` and any JSON-able ``data``."""
        if not isinstance(text, str):
            raise TypeError(f"progress text must be a str, got {type(text).__name__}")
        if self._report is not None:
            self._report(text, data)


@runtime_checkable
class Tool(Protocol):
    """What the loop calls. Subclass ``BaseTool`` or use ``@tool`` rather than start from here."""

    name: str
    description: str
    read_only: bool
    timeout: float | None

    @property
    def parameters(self) -> Mapping[str, Any]: ...

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Return the arguments to run with, or raise ``ToolArgumentsError``."""
        ...

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        """Do the work; return a ``str``, a ``ToolResult``, or anything JSON-able."""
        ...

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        """Say what ``run`` would do, without doing it (dry-run)."""
        ...


class CarriedState(Protocol):
    """State of the process that a tool consults about the turn calling it, decided where the
    turn runs (the coding agent's write gate, opened by its policy).

    Where a call runs in another process than its turn (a Temporal activity: any worker of the
    task queue may take it), ``export(turn_id)`` is read where the turn runs and sent with the
    call (a JSON value), and the call runs inside ``applied(turn_id, value)`` where it lands: that
    process's own state, which may never have seen the turn, does not decide. In one process the
    tool reads the state itself and neither is called."""

    def export(self, turn_id: str) -> Any: ...

    def applied(self, turn_id: str, value: Any) -> AbstractContextManager[None]: ...


class UncoveredSubject(str):
    """A permission subject that no allow rule with an argument pattern covers.

    A tool returns one from ``permission_subjects`` for a part of a call it cannot vouch for
    (bash: a line its reader does not fully understand). Deny and ask rules still match its
    text; the call is then asked instead of silently allowed. ``reason`` says why.
    """

    reason: str

    def __new__(cls, text: str, reason: str = "") -> UncoveredSubject:
        obj = super().__new__(cls, text)
        obj.reason = reason
        return obj


class BaseTool:
    """A convenient base for class-based tools: override ``run`` (and ``preview``)."""

    name: str = ""
    description: str = ""
    read_only: bool = False
    timeout: float | None = None
    permission_key: str | None = None
    """The argument that permission patterns such as ``write(src/**)`` match against."""
    permission_family: str | None = None
    """Another tool name whose permission rules also hold for this tool (``edit`` -> ``write``)."""
    carried: tuple[CarriedState, ...] = ()
    """The state this tool consults that travels with a call run in another process."""
    home_key: str | None = None
    """The argument naming state that lives in one process and cannot travel (a background
    command's id): its value ends in ``@HOME``, the process's home (``home_of``)."""

    def home_of(self, arguments: Mapping[str, Any]) -> str | None:
        """The home of the process that must run this call (on Temporal, the worker whose own
        task queue it is sent to), or None: any process may run it."""
        key = self.home_key
        value = arguments.get(key) if key is not None else None
        if not isinstance(value, str) or "@" not in value:
            return None
        home = value.rpartition("@")[2].strip()
        # The model writes the id: a home no worker can have names none (this process says
        # it knows no such command), never a task queue the server would refuse.
        return home if valid_home(home) else None

    @property
    def parameters(self) -> Mapping[str, Any]:
        return {"type": "object", "properties": {}}

    def permission_subjects(self, arguments: Mapping[str, Any]) -> list[str]:
        """What permission rules match for this call: by default the ``permission_key`` value."""
        key = self.permission_key
        if key is None or key not in arguments:
            return []
        return [str(arguments[key])]

    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters, self.read_only)

    def validate(self, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return arguments

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        raise NotImplementedError(f"tool {self.name!r} does not implement run()")

    def preview(self, arguments: Mapping[str, Any], ctx: ToolContext) -> str:
        shown = json.dumps(dict(arguments), ensure_ascii=False, sort_keys=True, default=str)
        return f"[dry-run] {self.name} was not run; it would have been called with {shown}"


_HOME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def valid_home(home: str) -> bool:
    """Whether ``home`` can name a process's home (``BaseTool.home_of``): 1-64 letters, digits,
    '-' or '_', so that a task queue named after it is always one the server accepts."""
    return _HOME.fullmatch(home) is not None


def result_from_return(value: Any) -> ToolResult:
    """Turn whatever a tool returned into the ``ToolResult`` the model will read."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        return ToolResult(value)
    if value is None:
        return ToolResult("")
    if isinstance(value, ImagePart | FilePart):
        return ToolResult("", parts=(value,))
    if isinstance(value, list | tuple) and value and any(
            isinstance(v, ImagePart | FilePart) for v in value):
        return _mixed(value)
    if type(value) is int:  # what json.dumps writes for it, without the encoder's setup
        return ToolResult(str(value))
    dump = getattr(value, "model_dump_json", None)
    if callable(dump):
        return ToolResult(str(dump()))
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return ToolResult(str(value))


def _mixed(values: Sequence[Any]) -> ToolResult:
    """A list of text and parts: the text (strings and ``TextPart``s, in order) is the
    content, the images and files its parts."""
    texts: list[str] = []
    parts: list[ImagePart | FilePart] = []
    for v in values:
        if isinstance(v, str | TextPart):
            texts.append(v if isinstance(v, str) else v.text)
        elif isinstance(v, ImagePart | FilePart):
            parts.append(v)
        else:
            raise TypeError("a list a tool returns with images or files may hold only str, "
                            f"TextPart, ImagePart and FilePart, not {type(v).__name__}")
    return ToolResult("\n".join(texts), parts=tuple(parts))
