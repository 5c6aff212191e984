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
workspace (a name is a name in every language). "General" allows none of the agent's own tools
(``own``); a read-only tool beside them (an MCP server's) may still be called.

**Safe by construction**: only "change" opens the workspace for writing, and only when a second
reading of the request agrees (``_confirm``: one call of one model is not enough; a
disagreement reads as "workspace", and a change the model tries anyway is refused and reported
in the answer and ``Verdict.held``). For any other kind the
turn's ``WriteGate`` is closed, so ``write`` and ``edit`` refuse and ``bash`` runs with the
workspace mounted read-only (or not at all without the sandbox), whatever the model emits and
whether or not calls are approved; a call of a tool the choice did not allow is denied.

**The calls**: a question (workspace) starts with required calls of a tool that reads the
workspace (``looks``: read, grep, ls, find; ``todo`` plans but reads nothing, so it does not
count) until one was made; a run starts with a required ``bash`` call (reading a script is not
running it). Then a call is optional until ``max_rounds`` rounds or a repeated call, then it
must answer. A required call is capped at ``call_tokens`` tokens, an answer at
``answer_tokens``.

**A change is judged by the workspace** (``_changes.py``): a successful command is no change by
itself, a file that differs from the moment the request was read is. It starts with a required
call of any tool; until something changed a call stays required and reading stays allowed (so
the model can look after a failed edit); after that, calls are optional (a function and its
call site, two files) until the same limits, and none once every file the request names has
changed (names are the same in every language). An acting call that already succeeded with the
same arguments is denied (an append applied twice), and so is a ``write`` over a file that
existed and was not read in this request; a command that changed nothing may run again (the
tests after a fix). A change that reaches the limits with nothing changed gets one last
required call of ``edit`` or ``write``. A command's result on a change request lists the files
it changed, with a diff of the named ones; a call that left a Python, JSON or TOML file that
parsed before unparsable gets an error result, and calls stay required until it parses again
(a repeat then gets a required ``read`` of it, once per file, then required ``edit`` calls,
for ``repair_rounds`` more rounds). Every look at the files goes through the policy's
``reads`` (``_reads.py``; it holds no path of the workspace): direct locally, recorded by the
engine where a replay must decide the same (a Temporal workflow).

**Honest by construction**: an answer that only repeats raw tool output is asked for again in
words (the words, then the output, are shown). A final answer that states a fact (number,
name, quoted text) that no tool result, tool call or the request contains gets one more look,
then a call asking for an answer from the evidence; what is still unsupported is marked
``UNVERIFIED_MARK`` in the answer (the CLI, the page and the events show it). An answer to a question that leaves out values the results show
side by side (``_compare``), or that states no fact any result shows, is asked again (the
latter reads first a file no result showed, even after a repeat). A change request that changed nothing says so
in the answer, and ``verdict`` tells the front end (the CLI exits non-zero).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
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
    ToolResultContext,
)
from steerable._messages import Message, ToolCall
from steerable._parts import Content, TextPart
from steerable.coding._changes import Snapshot, broken_files, change_report
from steerable.coding._classify import (
    Intent,
    asked_in,
    classify_request,
    parse_kind,
)
from steerable.coding._compare import bare, from_results, unshown
from steerable.coding._confirm import READ_AS_QUESTION_MARK, UNCONFIRMED, held_note
from steerable.coding._evidence import (
    echoes,
    evidence_counts,
    path_names,
    tool_vocabulary,
    unsupported_facts,
)
from steerable.coding._exchange import (
    as_shown,
    call_key,
    called,
    changed_in,
    evidence_of,
    has_tool,
    looked_at,
    repeated,
    turn_messages,
    without_calls,
)
from steerable.coding._paths import QUOTING, failed_paths, held_values
from steerable.coding._reading import read_request
from steerable.coding._reads import (
    DirectReads,
    RecordedReads,
    WorkspaceReads,
    entry_names,
    read_functions,
)
from steerable.coding._recheck import recheck_request, restated
from steerable.coding._verdict import BROKEN_MARK, NOTHING_CHANGED_MARK, UNVERIFIED_MARK, Verdict
from steerable.coding._walk import FOUND_NOTHING
from steerable.coding._workspace import Workspace
from steerable.providers._base import LLMRequest, ToolChoice, ToolSpec

__all__ = [
    "BROKEN_MARK",
    "NOTHING_CHANGED_MARK",
    "UNVERIFIED_MARK",
    "WORKSPACE_READERS",
    "DirectReads",
    "Intent",
    "RecordedReads",
    "ToolPolicy",
    "Verdict",
    "WorkspaceReads",
    "classify_request",
    "entry_names",
    "parse_kind",
    "read_functions",
]

WORKSPACE_READERS = frozenset({"read", "grep", "ls", "find"})
"""The tools whose call counts as the required first look: they read the workspace (``todo``
is read-only too but reads nothing, so a plan is not a look)."""
COMMANDS = frozenset({"bash"})
"""Acting tools whose success is no change by itself (``ls`` succeeds and changes nothing):
what they changed is read off the workspace."""
OVERWRITERS = frozenset({"write"})
"""Tools that replace a whole file: over an existing one, only after it was read."""
EDITORS = frozenset({"edit"})
"""Tools that change part of a file by quoting it: one that failed on a file not read in this
request is followed by a required ``read`` of it (the 1.5B quoted a line calc.py never had,
twice, and gave up with nothing changed)."""
READERS_WHOLE = frozenset({"read"})
"""Tools whose success shows a file, so that it may then be written whole."""
FILE_CHANGERS = ("edit", "write")
"""The tools offered for the last chance of a change request that changed nothing."""
AGENT_TOOLS = frozenset({"read", "write", "edit", "bash", "grep", "ls", "find", "bash_output",
                         "bash_kill", "todo", "ask_user", "skill"})
"""The coding agent's own tools. A request read as "general" needs none of them; a read-only
tool beside them (an MCP server's, a function of BFCL's) may still answer it."""

_GENERAL_NOTE = ("(Note: this needs no tool; answer it directly in words, or say you cannot "
                 "do it.)")

@dataclass
class _Turn:
    intent: Intent | None = None
    asked: tuple[str, ...] = ()
    choice: ToolChoice = field(default_factory=ToolChoice)
    start: Snapshot | None = None
    """The workspace when a change request was read (what it changed is judged against it)."""
    last_chance: bool = False
    """A change request that changed nothing was given its one required change call."""
    made: set[str] = field(default_factory=set)
    """The acting calls (name and arguments) that succeeded: one is never run twice."""
    pending: dict[str, str] = field(default_factory=dict)
    before: dict[str, Snapshot] = field(default_factory=dict)
    """The workspace before each acting call of a change request, by call id."""
    broken: dict[str, str] = field(default_factory=dict)
    """Files a call of this request left unparsable, and why."""
    blank: set[str] = field(default_factory=set)
    """Calls that failed or found nothing (no match): not a look at the workspace."""
    read: set[str] = field(default_factory=set)
    """The files ``read`` showed in this request (a file is overwritten whole only after)."""
    unread: set[str] = field(default_factory=set)
    """Files a ``write`` was denied for, not read yet: the next call is a ``read``."""
    changers: set[str] = field(default_factory=set)
    """The calls that changed files (a look after one is no repeat of a look before it)."""
    denied: set[str] = field(default_factory=set)
    """The calls the policy denied: they did not run, so the same call later is no repeat."""
    looked_again: bool = False
    """An answer stating what no result showed was given one more look instead."""
    looked_further: bool = False  # an answer stating no fact was given a read of another file
    repair_read: set[str] = field(default_factory=set)
    """Broken files a repeat was answered with a read of (once per file, so it ends)."""
    unconfirmed: bool = False
    """The classification read a change and the second reading did not: held to a look."""
    held: set[str] = field(default_factory=set)
    """The acting tools the model called on an unconfirmed change (refused; the user is told)."""
    acting: frozenset[str] = frozenset()
    """The request's tools that are not read-only (a call of a tool it does not have is no
    attempt to change a file: the 0.5B called an ``add`` tool)."""


class ToolPolicy(Hook):
    """The coding agent's tool policy (see the module doc). Register it on the loop; pass the
    workspace whose tools it governs (its write gate is the policy's to open and close).

    ``reads`` is every look the policy takes at the files (``_reads``): the workspace's own, in
    a worker thread, by default. The policy keeps no path of the workspace, so it cannot read
    the files past it: where it must decide deterministically (in a Temporal workflow) it is
    given ``RecordedReads(steerable.temporal.workflow_read)``, reads the engine records."""

    def __init__(self, workspace: Workspace, *, max_rounds: int = 4,
                 call_tokens: int = 1024, answer_tokens: int = 512,
                 looks: frozenset[str] = WORKSPACE_READERS,
                 reads: WorkspaceReads | None = None, repair_rounds: int = 2,
                 own: frozenset[str] = AGENT_TOOLS) -> None:
        self.gate = workspace.gate
        self.reads = reads or DirectReads(workspace.root)
        self.looks = looks
        self.max_rounds = max_rounds
        self.repair_rounds = repair_rounds
        self.own = own
        self.call_tokens = call_tokens
        self.answer_tokens = answer_tokens
        self._turns: dict[str, _Turn] = {}
        self._verdicts: dict[str, Verdict] = {}
        self.gate.close_by_default("the request was not read as asking for a change")

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
            self.gate.close(ctx.turn_id, "the request is being read")
            turn.intent, turn.unconfirmed = await read_request(ctx, asked, self.reads)
            turn.asked = asked
            if turn.intent == "change":
                turn.held.clear()  # refused before the change was confirmed: it stands now
                if turn.start is None:  # steering adds to a change: judged from the start
                    turn.start = await self.reads.start(" ".join(asked))
                self.gate.open(ctx.turn_id)
            else:
                self.gate.close(ctx.turn_id, UNCONFIRMED if turn.unconfirmed else (
                    f"the request was read as '{turn.intent}', which asks for no change"))
        turn.acting = frozenset(t.name for t in request.tools if not t.read_only)
        now = None if turn.start is None else await self.reads.snapshot(turn.start.names)
        turn.choice = await self._held(turn, request, self._choice(turn, request, now))
        if turn.choice.mode == "none" and turn.choice.max_tokens is None:
            # An answer is bounded as a call is: under load the 1.5B wrote one for 10 minutes.
            turn.choice = dataclasses.replace(turn.choice, max_tokens=self.answer_tokens)
        messages = None
        if turn.choice.mode == "none" and turn.intent == "general" \
                and request.messages[-1].role == "user":
            last = request.messages[-1].content
            note: Content = (f"{last}\n\n{_GENERAL_NOTE}" if isinstance(last, str)
                             else (*last, TextPart(_GENERAL_NOTE)))
            messages = [*request.messages[:-1], Message("user", note)]
        elif turn.blank and looked_at(turn_messages(request.messages), self.looks, turn.blank):
            # Once a look showed something, the looks that showed nothing are left out of what
            # the model reads (the 1.5B read notes.txt after a grep found nothing, and answered
            # "notes.txt does not contain any lines"), but for a failed look at a file the
            # request names: "secrets.txt does not exist" answers "what does secrets.txt say?"
            # (a grep that matched nothing in a named README, kept, drew a re-read of it).
            named = set(path_names(" ".join(turn.asked)))
            messages = without_calls(request.messages, turn.blank, keep=named)
        return HookDecision(HookAction.MODIFY, tool_choice=turn.choice, messages=messages)

    async def _held(self, turn: _Turn, request: LLMRequest, choice: ToolChoice) -> ToolChoice:
        """``choice`` with the paths a required call may name held to the ones that exist, and
        an edit's quote to a line of the file (``_paths``): the 1.5B guessed a missing path
        again and again, and quoted lines a file never had."""
        if choice.mode != "required" or choice.values:
            return choice  # an optional call, or one whose values the policy chose itself
        tools = [t.name for t in choice.callable(request.tools)]
        paths = await self.reads.paths()
        quoted: dict[str, list[str]] = {}
        if paths is not None and turn.start is not None and QUOTING.keys() & set(tools):
            known = [f for f in (*turn.start.names, *sorted(turn.read)) if f in paths["files"]]
            for name in dict.fromkeys(known):
                lines = await self.reads.lines(name)
                if lines:
                    quoted[name] = lines
        named = path_names(" ".join(turn.asked))
        values = held_values(tools, paths, named,
                             failed_paths(turn_messages(request.messages)), quoted)
        only = choice.only
        if paths is not None and OVERWRITERS & set(tools) and len(tools) > 1:
            # A file that exists changes by edit (its quote held to its lines), not rewritten
            # whole: the 1.5B rewrote greet.py with hello() alone, after reading shout() in it.
            # A request that names no file may still ask for one ("write a script that...").
            new = tuple(n for n in named if n not in paths["files"] and n not in paths["folders"])
            values += tuple((w, (("path", new),)) for w in sorted(OVERWRITERS & set(tools))
                            if new)
            if named and not new:
                only = tuple(t for t in tools if t not in OVERWRITERS)
        return dataclasses.replace(choice, only=only, values=values)

    def _choice(self, state: _Turn, request: LLMRequest, now: Snapshot | None) -> ToolChoice:
        intent, tools = state.intent, request.tools
        turn = turn_messages(request.messages)
        rounds = sum(1 for m in turn if m.role == "assistant" and m.tool_calls)
        if intent == "general" or intent is None:
            # The reading is about the workspace, not about the other tools: with none of its
            # own tools allowed, BFCL's "area of a triangle" was answered "I cannot do it"
            # beside the function that computes it (simple and multiple: 1/3 with the policy).
            other = tuple(t.name for t in tools if t.read_only and t.name not in self.own)
            if other and intent == "general" and rounds < self.max_rounds \
                    and not repeated(turn, skip=state.denied):
                return ToolChoice("auto", other, self.call_tokens,
                                  "general: nothing from the workspace; other tools may answer")
            return ToolChoice("none", reason="general: needs nothing from the workspace")
        if intent == "change":
            return self._change_choice(state, turn, tools, rounds, now)
        # A "run" request runs first: reading the script instead of running it answers
        # another question.
        looks = (("bash",) if intent == "run" and has_tool(tools, "bash")
                 else tuple(t.name for t in tools if t.name in self.looks))
        allowed = tuple(dict.fromkeys([*(t.name for t in tools if t.read_only), *looks]))
        why = f"{intent}: nothing may change" + (
            " (the readings of the request disagreed on a change)" if state.unconfirmed else "")
        if rounds >= self.max_rounds:
            return ToolChoice("none", allowed, reason=f"{why}; answer now ({rounds} rounds)")
        # A look that failed or matched nothing showed nothing: the model looks again, with
        # the other tools (``find`` for "find the TODOs" lists names, ``grep`` reads text).
        if looks and not looked_at(turn, {*looks}, state.blank):
            tried = called(turn, state.blank)
            others = tuple(n for n in looks if n not in tried) or looks
            return ToolChoice("required", others, self.call_tokens, f"{why}; look first")
        if repeated(turn, skip=state.denied):
            return ToolChoice("none", allowed, reason=f"{why}; answer now ({rounds} rounds)")
        if rounds == 0:
            return ToolChoice("required", allowed, self.call_tokens, f"{why}; look first")
        return ToolChoice("auto", allowed, self.call_tokens, why)

    def _change_choice(self, state: _Turn, turn: Sequence[Message], tools: Sequence[ToolSpec],
                       rounds: int, now: Snapshot | None) -> ToolChoice:
        """A change: required calls until something changed (reading allowed) and while a file
        it changed no longer parses, optional ones after, none once every file the request
        names has changed (the change is done), and one required call of a file-changing tool
        before a change request gives up."""
        changed = changed_in(turn, tools, state.start, now, COMMANDS)
        if rounds == 0:
            return ToolChoice("required", None, self.call_tokens, "change; look first")
        looks = frozenset(t.name for t in tools if t.read_only)
        repeat = repeated(turn, state.changers, looks, state.denied)
        # A broken file gets a look and ``repair_rounds`` more rounds, not the end: the 1.5B
        # broke two files with `echo` and sent the same calls twice more; after the read,
        # a repeat gets only an edit, its quote held to their lines (the bad one among them).
        unseen = tuple(n for n in state.broken if n not in state.repair_read)
        fix = ("read",) if unseen else ("edit",)
        if repeat and state.broken and has_tool(tools, fix[0]) \
                and rounds < self.max_rounds + self.repair_rounds:
            state.repair_read.update(unseen)
            why = f"{', '.join(state.broken)} no longer parses and the calls repeated"
            return ToolChoice("required", fix, self.call_tokens, f"change: {why}; {fix[0]} it",
                              values=(("read", (("path", unseen),)),) if unseen else ())
        limit = self.max_rounds + (self.repair_rounds if state.broken else 0)
        if rounds >= limit or repeat:
            changers = tuple(n for n in FILE_CHANGERS if has_tool(tools, n)) or None
            if not changed and not state.last_chance:
                state.last_chance = True
                return ToolChoice("required", changers, self.call_tokens,
                                  "change: nothing changed yet; the last chance to change it")
            return ToolChoice("none", reason=f"change; answer now ({rounds} rounds)")
        # Reading comes before a repair: a file broken by a command holds text the model never
        # saw, and an edit quoting what it held before fails again and again (the 1.5B quoted
        # `TIMEOUT = 30` twice after a `sed` had replaced it).
        if state.unread - state.read and has_tool(tools, "read"):
            return ToolChoice("required", ("read",), self.call_tokens,
                              f"change: read {', '.join(sorted(state.unread - state.read))} "
                              "before changing it")
        if state.broken:
            return ToolChoice("required", None, self.call_tokens,
                              f"change: {', '.join(state.broken)} no longer parses; fix it")
        if changed and state.start is not None and now is not None \
                and state.start.targets_done(now):
            return ToolChoice("none", reason="change: every file the request names has "
                              "changed; answer now")
        if not changed:
            return ToolChoice("required", None, self.call_tokens, "change; no change made yet")
        return ToolChoice("auto", None, self.call_tokens, "change")

    # -- before_tool ------------------------------------------------------------------------

    async def before_tool(self, ctx: ToolCallContext) -> HookResult:
        turn = self._turns.get(ctx.turn_id)
        if turn is None:
            return None
        if not turn.choice.allows(ctx.call.name):
            turn.blank.add(ctx.call.id)  # a denied call showed nothing
            turn.denied.add(ctx.call.id)
            if turn.unconfirmed and ctx.call.name in turn.acting:
                turn.held.add(ctx.call.name)  # it tried to change: the user must hear why not
            return HookDecision(HookAction.DENY_TOOL, reason=(
                f"{ctx.call.name} was not offered on this call ({turn.choice.reason})"))
        if ctx.read_only:
            return None
        unread = await self._unread(turn, ctx.call)
        if unread is not None:  # a write in place of an edit would drop what it never saw
            turn.unread.add(unread)
            turn.denied.add(ctx.call.id)
            return HookDecision(HookAction.DENY_TOOL, reason=(
                f"{unread} exists and was not read in this request: change it with edit, or "
                "read it first and then write it whole"))
        key = call_key(ctx.call.name, ctx.call.arguments)
        if key in turn.made:  # the same change again would apply it twice (an append, a sed)
            return HookDecision(HookAction.DENY_TOOL, reason=(
                "this exact call already succeeded in this request; it is done"))
        turn.pending[ctx.call.id] = key
        if turn.start is not None:
            path = ctx.call.arguments.get("path")
            names = (*turn.start.names, *([path] if isinstance(path, str) else []))
            turn.before[ctx.call.id] = await self.reads.snapshot(names)
        return None

    async def _unread(self, turn: _Turn, call: ToolCall) -> str | None:
        """The file that existed before the request, and is not empty, that a ``write`` of a
        change request would replace without having read it (None: the write may run)."""
        if call.name not in OVERWRITERS:
            return None
        return await self._not_read(turn, call.arguments.get("path"))

    async def _not_read(self, turn: _Turn, path: object) -> str | None:
        """``path`` as a file that existed before the change request, is not empty and was not
        read in it (None otherwise)."""
        if turn.start is None or not isinstance(path, str):
            return None
        rel = await self.reads.non_empty_file(path)
        if rel is None:
            return None
        if rel in turn.read or rel not in turn.start.files:
            return None  # read, or made by this request: the model knows what it holds
        return rel

    # -- after_tool -------------------------------------------------------------------------

    async def after_tool(self, ctx: ToolResultContext) -> HookResult:
        """Remembers an acting call that succeeded; tells what a command changed and which
        file a call left unparsable."""
        turn = self._turns.get(ctx.turn_id)
        if turn is None:
            return None
        if ctx.call.name in self.looks and (ctx.result.is_error
                                            or ctx.result.metadata.get(FOUND_NOTHING)):
            turn.blank.add(ctx.call.id)
        elif ctx.call.name in READERS_WHOLE and isinstance(ctx.call.arguments.get("path"), str):
            rel = await self.reads.relative(ctx.call.arguments["path"])
            if rel is not None:
                turn.read.add(rel)
        elif ctx.call.name in EDITORS and ctx.result.is_error:
            unread = await self._not_read(turn, ctx.call.arguments.get("path"))
            if unread is not None and unread not in turn.unread:
                # It quoted a file it never saw: it reads it next, and a last chance spent on
                # that edit is given again after the read (once per file, so it ends).
                turn.unread.add(unread)
                turn.last_chance = False
        key = turn.pending.pop(ctx.call.id, None)
        before = turn.before.pop(ctx.call.id, None)
        now = None if before is None else await self.reads.snapshot(before.names)
        report = "" if before is None or now is None or ctx.call.name not in COMMANDS \
            else change_report(before, now)
        moved = [] if before is None or now is None else before.changed(now)
        if moved:
            turn.changers.add(ctx.call.id)
        if report:
            # A command's change was never shown whole: what was read of those files is stale.
            turn.read.difference_update(moved)
        # A command that changed nothing may run again (the tests after a fix).
        if key is not None and not ctx.result.is_error \
                and (ctx.call.name not in COMMANDS or report):
            turn.made.add(key)
        broken = {} if before is None or now is None else broken_files(before, now)
        turn.broken.update(broken)
        for name in [n for n in turn.broken if n not in broken]:
            if await self.reads.parses(name):
                del turn.broken[name]  # repaired (or removed) since
        notes = [report] if report else []
        notes += [f"[this left {name} unparsable: {why}; fix it]" for name, why in broken.items()]
        if not notes:
            return None
        return HookDecision(HookAction.MODIFY, result="\n".join([ctx.result.content.rstrip(),
                                                                *notes]),
                            is_error=True if broken else None)

    # -- after_llm --------------------------------------------------------------------------

    async def after_llm(self, ctx: LLMResponseContext) -> HookResult:
        turn = self._turns.get(ctx.turn_id)
        response = ctx.response
        if turn is None or turn.intent is None or response.tool_calls:
            return None
        messages = turn_messages(ctx.request.messages)
        evidence, results = evidence_of(ctx.request.messages, messages)
        counts = evidence_counts(results)
        words = tool_vocabulary([(t.name, t.parameters) for t in ctx.request.tools])
        looked = turn.intent != "general" or bool(results)
        text = response.text
        if results and echoes(text, [*results, *as_shown(messages)]):
            text = await restated(ctx, text, results, self.answer_tokens)
        missing = unsupported_facts(text, evidence, counts, numbers=looked,
                                    vocabulary=words)
        rechecked = False
        if missing and looked:
            again_look = await self._look_again(ctx, turn, text, missing)
            if again_look is not None:
                return again_look
            rechecked = True
            try:
                asked_again = recheck_request(ctx.request, text, missing,
                                              max_tokens=self.answer_tokens)
                again = await ctx.ask(asked_again, "evidence")
            except Exception:  # any failure of the call: what is unsupported must stay marked
                again = response
            if again.text.strip():
                text = again.text
                missing = unsupported_facts(text, evidence, counts, numbers=looked,
                                            vocabulary=words)
        if not missing and turn.intent == "workspace" and bare(text, messages):
            again_look = await self._look_again(ctx, turn, text, ())
            if again_look is not None:  # "I do not know" with a file never read: read it
                return again_look
        fuller = None if missing or rechecked or turn.intent not in ("workspace", "run") \
            else await from_results(ctx, text, messages, self.answer_tokens)
        if fuller is not None:  # values compared left out ("both the same"), or no fact at all
            text, rechecked = fuller, True
            missing = unsupported_facts(text, evidence, counts, numbers=looked, vocabulary=words)
        now = None if turn.start is None else await self.reads.snapshot(turn.start.names)
        changed = changed_in(messages, ctx.request.tools, turn.start, now, COMMANDS)
        verdict = Verdict(turn.intent, changed, tuple(missing), rechecked, tuple(turn.broken),
                          held=tuple(sorted(turn.held)))
        self._verdicts[ctx.turn_id] = verdict
        notes = []
        if missing:
            notes.append(f"{UNVERIFIED_MARK}: {', '.join(missing)} (no tool result shows "
                         f"{'this' if len(missing) == 1 else 'these'})")
        if verdict.change_missing:
            notes.append(f"{NOTHING_CHANGED_MARK}: the request asked for a change, and no "
                         "tool changed a file")
        notes += [f"{BROKEN_MARK}: {name} ({why})" for name, why in turn.broken.items()]
        if verdict.held:
            notes.append(f"{NOTHING_CHANGED_MARK}: {held_note(verdict.held)}")
        elif turn.unconfirmed:  # no attempt to change, but the user may have meant one
            notes.append(f"{READ_AS_QUESTION_MARK}: {held_note(())}")
        if not notes and text == response.text:
            return None
        return HookDecision(HookAction.MODIFY, text="\n\n".join([text.rstrip(), *notes]))

    async def _look_again(self, ctx: LLMResponseContext, turn: _Turn, answer: str,
                          missing: Sequence[str]) -> HookResult:
        """Once per request each, an answer to a question that states what no result showed
        gets one more look (paths held), one that states no fact any result showed a ``read``
        of a file none showed (``unshown``); the calls replace the answer (None: no look). The
        1.5B read only the README a question named in passing ("See server.py.") and answered
        "port 8080"; asked when the team sync was, it read README.md twice (a repeat: answer
        now) and answered "I do not know", notes.txt never read."""
        choice = ctx.request.tool_choice
        looks = tuple(t.name for t in ctx.request.tools if t.name in self.looks and (
            choice.allows(t.name) or (not missing and t.name in (choice.only or ()))))
        if turn.intent == "change" or not looks \
                or (turn.looked_again if missing else turn.looked_further):
            return None
        if missing:
            turn.looked_again = True
            held = await self._held(turn, ctx.request, ToolChoice("required", looks,
                                    self.call_tokens, "the answer states what none showed: look"))
        else:
            unread = unshown(((await self.reads.paths()) or {}).get("files", []), turn.read,
                             turn_messages(ctx.request.messages), turn.asked)
            if not unread or "read" not in looks:
                return None
            turn.looked_further = True
            held = ToolChoice("required", ("read",), self.call_tokens, "the answer states "
                              "nothing the results show: read a file no result showed",
                              values=(("read", (("path", unread),)),))
        try:
            reply = await ctx.ask(recheck_request(ctx.request, answer, missing, held), "evidence")
        except Exception:  # any failure of the call: the answer is rechecked as it is
            return None
        calls = [(c.name, dict(c.arguments)) for c in reply.tool_calls if c.name in looks]
        turn.choice = held if calls else turn.choice  # the calls run under the look's choice
        return HookDecision(HookAction.MODIFY, text="", tool_calls=calls) if calls else None

    # -- on_event ---------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        if event.kind is EventKind.TURN_END:
            self._turns.pop(event.turn_id, None)
            self.gate.forget(event.turn_id)
            while len(self._verdicts) > 64:  # kept for the front end to read, not forever
                self._verdicts.pop(next(iter(self._verdicts)))

