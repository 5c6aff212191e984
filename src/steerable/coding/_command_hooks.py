"""Claude Code command hooks, run unchanged on steerable's hook chain.

Each hook is a shell command that reads one JSON object on stdin and answers by its exit code
(0: go on, and its JSON on stdout is read; 2: block, stderr is the reason; anything else: an
error shown to the user, the agent goes on) and, with exit 0, JSON decisions on stdout. Where
they run:

- ``PreToolUse`` in ``before_tool``: a block, ``permissionDecision: "deny"`` or the older
  ``decision: "block"`` refuses the call; ``updatedInput`` changes its arguments (which the
  user's permission rules then judge, so a hook cannot lead a call past a deny rule); "allow"
  and "ask" leave the user's rules and approvals in charge.
- ``PostToolUse`` in ``after_tool``: a block or ``additionalContext`` is added to the result the
  model reads.
- ``SessionStart`` and ``UserPromptSubmit`` in the first ``before_llm`` of a turn: their stdout
  or ``additionalContext`` is added to the instructions; a blocked prompt ends the turn.
- ``Stop`` in ``after_llm`` on the final answer: a block hands the reason back to the agent as
  a follow-up message (``continue_with``), with ``stop_hook_active`` true on the next check.

``continue: false`` in any answer ends the turn with its ``stopReason``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from steerable._messages import Message
from steerable.coding._hook_settings import CommandHookSpec
from steerable.coding.bash import DEFAULT_HIDDEN_ENV, scrubbed_env

__all__ = ["CLAUDE_TOOL_NAMES", "CommandHooks", "HookRun", "run_command_hook"]

log = logging.getLogger("steerable.hooks")

CLAUDE_TOOL_NAMES = {"bash": "Bash", "write": "Write", "edit": "Edit", "read": "Read",
                     "grep": "Grep", "find": "Glob", "ls": "LS"}
"""steerable's tool -> Claude Code's: a project's matcher "Bash|Write" means these."""
# steerable's argument -> the name Claude Code's tools give it in tool_input.
_CLAUDE_ARGS = {"path": "file_path", "old_text": "old_string", "new_text": "new_string"}
_MAX_OUTPUT = 1 << 20
MAX_STOP_CONTINUATIONS = 5
"""Stop hooks may keep the agent working this many times in a row, then it may stop."""


@dataclass(frozen=True, slots=True)
class HookRun:
    """What one command did."""

    code: int | None
    """Its exit status; None when it was killed for running past its timeout."""
    stdout: str
    stderr: str

    @property
    def blocks(self) -> bool:
        return self.code == 2

    def answer(self) -> dict[str, Any]:
        """Its JSON decision (only read after exit 0, as Claude Code does); {} for plain text."""
        text = self.stdout.strip()
        if self.code != 0 or not text.startswith("{"):
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


async def run_command_hook(spec: CommandHookSpec, payload: Mapping[str, Any],
                           cwd: Path) -> HookRun:
    """Run ``spec``'s command in its own process group with ``payload`` on stdin.

    Past its timeout, or when the turn is cancelled, the whole group is killed."""
    env = scrubbed_env(DEFAULT_HIDDEN_ENV)  # a hook needs no API key of the user's
    env["CLAUDE_PROJECT_DIR"] = env["STEERABLE_PROJECT_DIR"] = str(cwd)
    proc = await asyncio.create_subprocess_shell(
        spec.command, cwd=cwd, env=env, start_new_session=True, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(
            proc.communicate(json.dumps(payload).encode()), spec.timeout)
    except TimeoutError:
        _kill(proc)
        await proc.wait()
        return HookRun(None, "", f"timed out after {spec.timeout:g} s")
    except BaseException:  # cancelled with the turn: end the command too, then go on ending
        _kill(proc)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(proc.wait())
        raise
    return HookRun(proc.returncode, out[:_MAX_OUTPUT].decode("utf-8", "replace"),
                   err[:_MAX_OUTPUT].decode("utf-8", "replace"))


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def claude_input(name: str, arguments: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """A call's arguments as Claude Code's hooks read them (steerable's names kept too)."""
    shaped = dict(arguments)
    for ours, theirs in _CLAUDE_ARGS.items():
        if ours in arguments and theirs not in arguments:
            value = arguments[ours]
            shaped[theirs] = str(root / value) if theirs == "file_path" else value
    return shaped


def from_claude_input(updated: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """A hook's ``updatedInput`` back in steerable's argument names."""
    back = {theirs: ours for ours, theirs in _CLAUDE_ARGS.items()}
    result: dict[str, Any] = {}
    for key, value in updated.items():
        if key in back:
            if back[key] == "path" and isinstance(value, str) and Path(value).is_absolute():
                value = os.path.relpath(value, root)
            result[back[key]] = value
        else:
            result[key] = value
    return result


def _specific(answer: Mapping[str, Any]) -> Mapping[str, Any]:
    value = answer.get("hookSpecificOutput")
    return value if isinstance(value, Mapping) else {}


def _stop(answer: Mapping[str, Any], event: str) -> HookDecision | None:
    if answer.get("continue") is False:
        reason = str(answer.get("stopReason") or f"stopped by a {event} hook")
        return HookDecision(HookAction.ABORT_TURN, reason=reason)
    return None


class CommandHooks(Hook):
    """The command hooks of one session's settings, as one hook on the chain."""

    def __init__(self, specs: Sequence[CommandHookSpec], root: Path, *, source: str = "startup",
                 transcript: Callable[[str], str] | None = None,
                 continue_with: Callable[[str, str], object] | None = None,
                 notice: Callable[[str], None] | None = None) -> None:
        self.specs = tuple(specs)
        self.root = root
        self.source = source
        self._transcript = transcript
        self._continue_with = continue_with
        self._notice = notice or log.warning
        self._started = False
        self._session_context: list[str] = []
        self._turn_context: dict[str, list[str]] = {}
        self._stop_active = 0
        self._continuing: str | None = None
        """The text of the follow-up a Stop hook asked for, until its turn starts."""

    async def _run(self, event: str, session_id: str, fields: Mapping[str, Any],
                   names: tuple[str, ...] = ()) -> list[HookRun]:
        payload = {"session_id": session_id, "cwd": str(self.root), "hook_event_name": event,
                   "permission_mode": "default",
                   "transcript_path": self._transcript(session_id) if self._transcript else "",
                   **fields}
        runs = []
        for spec in self.specs:
            if spec.event == event and (not names or spec.matches(*names)):
                run = await run_command_hook(spec, payload, self.root)
                if run.code not in (0, 2):
                    self._notice(f"{event} hook {spec.command!r} ({spec.source}) failed "
                                 f"({run.stderr.strip() or f'exit {run.code}'}); going on")
                elif run.answer().get("systemMessage"):
                    self._notice(str(run.answer()["systemMessage"]))
                runs.append(run)
        return runs

    async def before_llm(self, ctx: LLMRequestContext) -> HookResult:
        if ctx.parent_turn_id is not None:
            return None  # a sub-agent's call: the user's prompt was checked in its parent
        if ctx.turn_id not in self._turn_context:
            stopped = await self._turn_start(ctx)
            if stopped is not None:
                return stopped
        extra = [*self._session_context, *self._turn_context[ctx.turn_id]]
        if not extra:
            return None
        messages = list(ctx.request.messages)
        added = "\n\n".join(extra)
        if messages and messages[0].role == "system":
            messages[0] = Message("system", f"{messages[0].text}\n\n{added}")
        else:
            messages.insert(0, Message("system", added))
        return HookDecision(HookAction.MODIFY, messages=messages)

    async def _turn_start(self, ctx: LLMRequestContext) -> HookDecision | None:
        self._turn_context[ctx.turn_id] = []
        if not self._started:
            self._started = True
            for run in await self._run("SessionStart", ctx.session_id, {"source": self.source}):
                self._session_context += _context(run)
        prompt = next((m.text for m in reversed(ctx.request.messages) if m.role == "user"), "")
        if self._continuing is None or prompt != self._continuing:
            self._stop_active = 0  # the user spoke: the Stop hooks' chain starts over
        self._continuing = None
        for run in await self._run("UserPromptSubmit", ctx.session_id, {"prompt": prompt}):
            answer = run.answer()
            if run.blocks or answer.get("decision") == "block":
                why = run.stderr.strip() if run.blocks else str(answer.get("reason", ""))
                return HookDecision(HookAction.ABORT_TURN,
                                    reason=f"prompt blocked by a UserPromptSubmit hook: {why}")
            stopped = _stop(answer, "UserPromptSubmit")
            if stopped is not None:
                return stopped
            self._turn_context[ctx.turn_id] += _context(run)
        return None

    async def before_tool(self, ctx: ToolCallContext) -> HookResult:
        name = ctx.call.name
        shown = CLAUDE_TOOL_NAMES.get(name, name)
        fields = {"tool_name": shown, "tool_use_id": ctx.call.id,
                  "tool_input": claude_input(name, ctx.call.arguments, self.root)}
        arguments: dict[str, Any] | None = None
        for run in await self._run("PreToolUse", ctx.session_id, fields, (shown, name)):
            answer = run.answer()
            specific = _specific(answer)
            if run.blocks:
                return HookDecision(HookAction.DENY_TOOL, reason=run.stderr.strip()
                                    or "blocked by a PreToolUse hook")
            if specific.get("permissionDecision") == "deny" or answer.get("decision") == "block":
                why = specific.get("permissionDecisionReason") or answer.get("reason")
                return HookDecision(HookAction.DENY_TOOL,
                                    reason=str(why or "denied by a PreToolUse hook"))
            stopped = _stop(answer, "PreToolUse")
            if stopped is not None:
                return stopped
            if isinstance(specific.get("updatedInput"), Mapping):
                arguments = {**(arguments or ctx.call.arguments),
                             **from_claude_input(specific["updatedInput"], self.root)}
        return None if arguments is None else HookDecision(HookAction.MODIFY, arguments=arguments)

    async def after_tool(self, ctx: ToolResultContext) -> HookResult:
        name = ctx.call.name
        shown = CLAUDE_TOOL_NAMES.get(name, name)
        fields = {"tool_name": shown, "tool_use_id": ctx.call.id,
                  "tool_input": claude_input(name, ctx.call.arguments, self.root),
                  "tool_response": {"content": ctx.result.content,
                                    "is_error": ctx.result.is_error}}
        notes = []
        for run in await self._run("PostToolUse", ctx.session_id, fields, (shown, name)):
            answer = run.answer()
            stopped = _stop(answer, "PostToolUse")
            if stopped is not None:
                return stopped
            if run.blocks:
                notes.append(run.stderr.strip())
            elif answer.get("decision") == "block":
                notes.append(str(answer.get("reason", "")))
            notes += [str(c) for c in [_specific(answer).get("additionalContext")] if c]
        notes = [n for n in notes if n]
        if not notes:
            return None
        text = ctx.result.content + "".join(f"\n\n[PostToolUse hook] {n}" for n in notes)
        return HookDecision(HookAction.MODIFY, result=text)

    async def after_llm(self, ctx: LLMResponseContext) -> HookResult:
        if ctx.response.tool_calls or ctx.parent_turn_id is not None:
            return None  # not the final answer of the user's turn
        fields = {"stop_hook_active": self._stop_active > 0,
                  "last_assistant_message": ctx.response.text}
        for run in await self._run("Stop", ctx.session_id, fields):
            answer = run.answer()
            stopped = _stop(answer, "Stop")
            if stopped is not None:
                return stopped
            why = run.stderr.strip() if run.blocks else (
                str(answer.get("reason", "")) if answer.get("decision") == "block" else "")
            if not why:
                continue
            if self._continue_with is None or self._stop_active >= MAX_STOP_CONTINUATIONS:
                self._notice(f"a Stop hook asked to go on ({why}); stopping here")
                return None
            self._stop_active += 1
            self._continuing = why
            self._continue_with(ctx.session_id, why)
            return None
        return None


def _context(run: HookRun) -> list[str]:
    """The text a SessionStart or UserPromptSubmit hook adds: its additionalContext, else its
    plain stdout (exit 0)."""
    if run.code != 0:
        return []
    answer = run.answer()
    if answer:
        extra = _specific(answer).get("additionalContext")
        return [str(extra)] if extra else []
    return [run.stdout.strip()] if run.stdout.strip() else []
