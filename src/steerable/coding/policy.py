"""The coding agent's tool policy: what the model may do on each call, and what it may say.

A hook (``before_llm``, ``before_tool``, ``after_llm``) so that every decision is visible: each
``LLM_REQUEST`` carries the ``ToolChoice`` it made (mode, the tools the model may call, why),
replays compare it, traces show it; the provider only translates it into its wire form.

**What the request asks** is decided by the model itself, not by words of the request: before
the first call of a request (and again when steering adds to it), one call of its own asks the
model to classify the request under a JSON schema (``kind``: general, workspace, run, change).
That call (``_classify.py``) starts with fixed instructions and examples and ends with the
request, so the server's prompt cache keeps all but the request evaluated. Every failure is
safe: a reply that is not one of the kinds counts as "workspace" (look, change nothing);
"general" becomes "workspace" when the request names a file or folder that exists in the
workspace (a name is a name in every language).

**Safe by construction**: only "change" opens the workspace for writing. For any other kind the
turn's ``WriteGate`` is closed, so ``write`` and ``edit`` refuse and ``bash`` runs with the
workspace mounted read-only (or not at all without the sandbox), whatever the model emits and
whether or not calls are approved; a call of a tool the choice did not allow is denied.

**The calls**: a look (workspace, run) starts with required calls of a tool that reads the
workspace (``looks``: read, grep, ls, find; ``run`` adds bash; ``todo`` plans but reads
nothing, so it does not count) until one was made, then a call is optional until
``max_rounds`` rounds or a repeated call, then it must answer. A change starts with a required call of any tool; until a change has succeeded a call
stays required and reading stays allowed (so the model can look after a failed edit); after
one, calls are optional (a function and its call site, two files) until the same limits. A
required call is capped at ``call_tokens`` tokens.

**Honest by construction**: a final answer that states a fact (number, name, quoted text)
that no tool result, tool call or the request contains gets one more call of its own asking
for an answer from the evidence; what is still unsupported is marked ``UNVERIFIED_MARK`` in the
answer (so the CLI, the page and the events show it). A change request that changed nothing
says so in the answer, and ``verdict`` tells the front end (the CLI exits non-zero).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from steerable._events import Event, EventKind
from steerable._hooks import (
    Hook,
    HookAction,
    HookDecision,
    HookResult,
    LLMRequestContext,
    LLMResponseContext,
    ToolCallContext,
)
from steerable._messages import Message
from steerable._parts import Content, TextPart
from steerable.coding._classify import (
    Intent,
    asked_in,
    classify_request,
    exchange_start,
    parse_kind,
)
from steerable.coding._evidence import evidence_counts, unsupported_facts
from steerable.coding._workspace import Workspace
from steerable.errors import ProviderError
from steerable.providers._base import LLMRequest, ToolChoice, ToolSpec

__all__ = [
    "NOTHING_CHANGED_MARK",
    "UNVERIFIED_MARK",
    "WORKSPACE_READERS",
    "Intent",
    "ToolPolicy",
    "Verdict",
    "classify_request",
    "entry_names",
    "parse_kind",
]

UNVERIFIED_MARK = "⚠ unverified"
"""Starts the line that lists what the answer states but no tool result showed."""
NOTHING_CHANGED_MARK = "✗ nothing was changed"
"""Starts the line a change request that changed no file ends with."""

WORKSPACE_READERS = frozenset({"read", "grep", "ls", "find"})
"""The tools whose call counts as the required first look: they read the workspace (``todo``
is read-only too but reads nothing, so a plan is not a look)."""

_GENERAL_NOTE = ("(Note: this needs no tool; answer it directly in words, or say you cannot "
                 "do it.)")
_RECHECK = ("Your answer states {facts}, but no tool result above shows {it}. Answer my "
            "request again using only what the tool results say; where they do not show "
            "something, say you do not know it.")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policy concluded about a finished turn (``ToolPolicy.verdict``)."""

    intent: Intent
    changed: bool
    unverified: tuple[str, ...] = ()
    rechecked: bool = False

    @property
    def change_missing(self) -> bool:
        """The request asked for a change and no tool changed anything."""
        return self.intent == "change" and not self.changed


@dataclass
class _Turn:
    intent: Intent | None = None
    asked: tuple[str, ...] = ()
    choice: ToolChoice = field(default_factory=ToolChoice)


class ToolPolicy(Hook):
    """The coding agent's tool policy (see the module doc). Register it on the loop; pass the
    workspace whose tools it governs.

    ``read_names`` reads the names of the workspace's files and folders (``entry_names``
    here, in a worker thread, by default): its one look at the world outside the turn. Where
    the policy must decide deterministically (in a Temporal workflow) it is given a read that
    the engine records (``steerable.temporal.workflow_read``)."""

    def __init__(self, workspace: Workspace, *, max_rounds: int = 4,
                 call_tokens: int = 1024, looks: frozenset[str] = WORKSPACE_READERS,
                 read_names: Callable[[], Awaitable[Sequence[str]]] | None = None) -> None:
        self.workspace = workspace
        self._read_names = read_names or (lambda: asyncio.to_thread(entry_names, workspace))
        self.looks = looks
        self.max_rounds = max_rounds
        self.call_tokens = call_tokens
        self._turns: dict[str, _Turn] = {}
        self._verdicts: dict[str, Verdict] = {}
        workspace.gate.close_by_default("the request was not read as asking for a change")

    def verdict(self, turn_id: str) -> Verdict | None:
        """The verdict on ``turn_id``'s last answer (None: no answer checked)."""
        return self._verdicts.get(turn_id)

    # -- before_llm -------------------------------------------------------------------------

    async def before_llm(self, ctx: LLMRequestContext) -> HookResult:
        request = ctx.request
        if (not request.tools or request.tool_choice.mode == "none"
                or ctx.parent_turn_id is not None):
            return None  # a call that must answer (the last one, a summary), or a sub-agent's
        turn = self._turns.setdefault(ctx.turn_id, _Turn())
        asked = asked_in(request.messages)
        if turn.intent is None or asked != turn.asked:
            self.workspace.gate.close(ctx.turn_id, "the request is being read")
            turn.intent = await self._classify(ctx, asked)
            turn.asked = asked
            if turn.intent == "change":
                self.workspace.gate.open(ctx.turn_id)
            else:
                self.workspace.gate.close(
                    ctx.turn_id, f"the request was read as '{turn.intent}', which asks for "
                    "no change")
        turn.choice = self._choice(turn.intent, request)
        messages = None
        if turn.intent == "general" and request.messages[-1].role == "user":
            last = request.messages[-1].content
            note: Content = (f"{last}\n\n{_GENERAL_NOTE}" if isinstance(last, str)
                             else (*last, TextPart(_GENERAL_NOTE)))
            messages = [*request.messages[:-1], Message("user", note)]
        return HookDecision(HookAction.MODIFY, tool_choice=turn.choice, messages=messages)

    async def _classify(self, ctx: LLMRequestContext, asked: Sequence[str]) -> Intent:
        try:
            reply = await ctx.ask(classify_request(ctx.request), "classify")
        except ProviderError:
            return "workspace"  # the safe reading: look, change nothing
        kind = parse_kind(reply.text)
        if kind == "general" and await self._names_workspace(" ".join(asked)):
            kind = "workspace"
        return kind

    async def _names_workspace(self, text: str) -> bool:
        """Whether ``text`` names a file or folder of the workspace (typos forgiven)."""
        names = list(await self._read_names())
        for word in re.findall(r"[\w.-]{3,}", text.lower()):
            if word in names or difflib.get_close_matches(word, names, n=1, cutoff=0.8):
                return True
        return False

    def _choice(self, intent: Intent, request: LLMRequest) -> ToolChoice:
        tools = request.tools
        if intent == "general":
            return ToolChoice("none", reason="general: needs nothing from the workspace")
        bash = ("bash",) if intent == "run" and _has(tools, "bash") else ()
        if intent == "change":
            allowed: tuple[str, ...] | None = None
            why = "change"
        else:
            allowed = tuple(t.name for t in tools if t.read_only) + bash
            why = f"{intent}: nothing may change"
        turn = _turn_messages(request.messages)
        rounds = sum(1 for m in turn if m.role == "assistant" and m.tool_calls)
        looks = tuple(t.name for t in tools if t.name in self.looks) + bash
        if looks and not _looked(turn, {*looks}) and intent != "change":
            return ToolChoice("required", looks, self.call_tokens, f"{why}; look first")
        if rounds == 0:
            return ToolChoice("required", allowed, self.call_tokens, f"{why}; look first")
        if rounds >= self.max_rounds or _repeated(turn):
            return ToolChoice("none", allowed, reason=f"{why}; answer now ({rounds} rounds)")
        if intent == "change" and not _changed(turn, tools):
            return ToolChoice("required", allowed, self.call_tokens,
                              f"{why}; no change made yet")
        return ToolChoice("auto", allowed, self.call_tokens, why)

    # -- before_tool ------------------------------------------------------------------------

    def before_tool(self, ctx: ToolCallContext) -> HookResult:
        turn = self._turns.get(ctx.turn_id)
        if turn is None or turn.choice.allows(ctx.call.name):
            return None
        return HookDecision(HookAction.DENY_TOOL, reason=(
            f"{ctx.call.name} was not offered on this call ({turn.choice.reason})"))

    # -- after_llm --------------------------------------------------------------------------

    async def after_llm(self, ctx: LLMResponseContext) -> HookResult:
        turn = self._turns.get(ctx.turn_id)
        response = ctx.response
        if turn is None or turn.intent is None or response.tool_calls:
            return None
        messages = _turn_messages(ctx.request.messages)
        evidence, results = _evidence(ctx.request.messages, messages)
        counts = evidence_counts(results)
        looked = turn.intent != "general" or bool(results)
        text = response.text
        missing = unsupported_facts(text, evidence, counts, numbers=looked)
        rechecked = False
        if missing and looked:
            rechecked = True
            try:
                again = await ctx.ask(_recheck_request(ctx.request, text, missing), "evidence")
            except ProviderError:
                again = response  # no second chance: what is unsupported stays marked
            if again.text.strip():
                text = again.text
                missing = unsupported_facts(text, evidence, counts, numbers=looked)
        changed = _changed(messages, ctx.request.tools)
        verdict = Verdict(turn.intent, changed, tuple(missing), rechecked)
        self._verdicts[ctx.turn_id] = verdict
        notes = []
        if missing:
            notes.append(f"{UNVERIFIED_MARK}: {', '.join(missing)} (no tool result shows "
                         f"{'this' if len(missing) == 1 else 'these'})")
        if verdict.change_missing:
            notes.append(f"{NOTHING_CHANGED_MARK}: the request asked for a change, and no "
                         "tool changed a file")
        if not notes and text == response.text:
            return None
        return HookDecision(HookAction.MODIFY, text="\n\n".join([text.rstrip(), *notes]))

    # -- on_event ---------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        if event.kind is EventKind.TURN_END:
            self._turns.pop(event.turn_id, None)
            self.workspace.gate.forget(event.turn_id)
            while len(self._verdicts) > 64:  # kept for the front end to read, not forever
                self._verdicts.pop(next(iter(self._verdicts)))


def entry_names(ws: Workspace, limit: int = 2000) -> list[str]:
    """Names (and stems) of the workspace's files and folders, a bounded walk."""
    names: set[str] = set()
    for _, dirs, files in os.walk(ws.root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"]
        for name in (*dirs, *files):
            low = name.lower()
            names.add(low)
            stem = low.rsplit(".", 1)[0]
            if len(stem) >= 3:
                names.add(stem)
        if len(names) >= limit:
            break
    return sorted(names)


def _has(tools: Sequence[ToolSpec], name: str) -> bool:
    return any(t.name == name for t in tools)


def _turn_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages[exchange_start(messages):] if m.role != "system"]


def _looked(turn: Sequence[Message], looks: set[str]) -> bool:
    """A tool that reads the workspace was called in this exchange."""
    return any(c.name in looks for m in turn if m.role == "assistant" for c in m.tool_calls)


def _repeated(turn: Sequence[Message]) -> bool:
    """The latest calls repeat one already made in this exchange."""
    seen: list[str] = []
    latest: list[str] = []
    for m in turn:
        if m.role == "assistant" and m.tool_calls:
            seen.extend(latest)
            latest = [f"{c.name}:{json.dumps(dict(c.arguments), sort_keys=True)}"
                      for c in m.tool_calls]
    return any(key in seen for key in latest)


def _changed(turn: Sequence[Message], tools: Sequence[ToolSpec]) -> bool:
    """A tool that is not read-only ran without error in this exchange."""
    acting = {t.name for t in tools if not t.read_only}
    return any(m.role == "tool" and not m.is_error and m.name in acting for m in turn)


def _evidence(messages: Sequence[Message], turn: Sequence[Message]) -> tuple[str, list[str]]:
    """Everything the answer may draw on (the request, the calls, the results), and the
    results alone."""
    parts: list[str] = []
    results: list[str] = []
    for m in turn:
        if m.role == "tool":
            results.append(m.text)
        parts.append(m.text)
        parts.extend(json.dumps(dict(c.arguments), ensure_ascii=False) for c in m.tool_calls)
    return "\n".join(parts), results


def _recheck_request(request: LLMRequest, answer: str, missing: Sequence[str]) -> LLMRequest:
    facts = ", ".join(f"'{m}'" for m in missing)
    note = _RECHECK.format(facts=facts, it="it" if len(missing) == 1 else "them")
    return LLMRequest(
        messages=(*request.messages, Message("assistant", answer), Message("user", note)),
        tools=request.tools, model=request.model, params=request.params,
        tool_choice=ToolChoice("none", reason="answer from the evidence"))
