"""The built-in coding tools: read, write, edit, bash, grep, ls and find.

Every path they take is confined to a workspace root (see ``Workspace``); read, grep, ls and
find are read-only, so the loop runs them in parallel and asks nobody before running them.
``coding_tools`` builds the whole set for one workspace.

``Snapshots`` and ``SnapshotHook`` give them undo: a snapshot of the workspace around every call
that may change it (bash included), and undo, redo and rewind over those snapshots.
``load_conventions`` reads the project's own instructions (AGENTS.md or CLAUDE.md files);
``load_hook_settings`` and ``CommandHooks`` run the command hooks of Claude Code settings files;
``find_skills`` and ``find_commands`` find SKILL.md skills and Markdown slash commands;
``make_todo_tool`` is the agent's plan, streamed as PLAN_UPDATED events; ``make_ask_user_tool``
lets the agent ask the person a question (``ToolContext.ask``).
``BackgroundShells`` holds the commands bash started with ``background=True``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from steerable.coding._ask import make_ask_user_tool
from steerable.coding._bg_shells import BackgroundShells, Shell, ShellNotice
from steerable.coding._command_hooks import CommandHooks
from steerable.coding._conventions import ConventionFile, Conventions, load_conventions
from steerable.coding._hook_settings import (
    CommandHookSpec,
    HookConsent,
    HookSet,
    load_hook_settings,
)
from steerable.coding._sandbox import Sandbox, SandboxLimits
from steerable.coding._skills import (
    Skill,
    SlashCommand,
    expand_command,
    find_commands,
    find_skills,
    make_skill_tool,
    skills_prompt,
)
from steerable.coding._todo import PLAN_STATUSES, make_todo_tool
from steerable.coding._undo import (
    NothingToUndoError,
    SnapshotLimits,
    Snapshots,
    SnapshotStoreError,
    StepInfo,
    UndoConflictError,
    UndoResult,
    remove_session_snapshots,
)
from steerable.coding._undo_hook import SNAPSHOT_HOOK_PRIORITY, SNAPSHOT_HOOK_TIMEOUT, SnapshotHook
from steerable.coding._workspace import Workspace
from steerable.coding.bash import DEFAULT_HIDDEN_ENV, DEFAULT_TIMEOUT, make_bash_tool
from steerable.coding.edit import make_edit_tool
from steerable.coding.find import make_find_tool
from steerable.coding.grep import make_grep_tool
from steerable.coding.ls import make_ls_tool
from steerable.coding.read import make_read_tool
from steerable.coding.write import make_write_tool
from steerable.tools import FunctionTool

__all__ = [
    "PLAN_STATUSES",
    "SNAPSHOT_HOOK_PRIORITY",
    "SNAPSHOT_HOOK_TIMEOUT",
    "BackgroundShells",
    "CommandHookSpec",
    "CommandHooks",
    "ConventionFile",
    "Conventions",
    "HookConsent",
    "HookSet",
    "NothingToUndoError",
    "Sandbox",
    "SandboxLimits",
    "Shell",
    "ShellNotice",
    "Skill",
    "SlashCommand",
    "SnapshotHook",
    "SnapshotLimits",
    "SnapshotStoreError",
    "Snapshots",
    "StepInfo",
    "UndoConflictError",
    "UndoResult",
    "Workspace",
    "coding_tools",
    "expand_command",
    "find_commands",
    "find_skills",
    "load_conventions",
    "load_hook_settings",
    "make_ask_user_tool",
    "make_bash_tool",
    "make_edit_tool",
    "make_find_tool",
    "make_grep_tool",
    "make_ls_tool",
    "make_read_tool",
    "make_skill_tool",
    "make_todo_tool",
    "make_write_tool",
    "remove_session_snapshots",
    "skills_prompt",
]


def coding_tools(
    workspace: str | os.PathLike[str] | Workspace,
    extra_roots: Iterable[str | os.PathLike[str]] = (),
    *,
    bash_timeout: float = DEFAULT_TIMEOUT,
    hidden_env: Iterable[str] = DEFAULT_HIDDEN_ENV,
    use_ripgrep: bool = True,
    sandbox: Sandbox | None = None,
    shells: BackgroundShells | None = None,
) -> list[FunctionTool]:
    """The seven coding tools bound to ``workspace`` (plus any ``extra_roots``).

    ``sandbox`` confines bash (default ``Sandbox()``: bubblewrap when the machine has it;
    ``Sandbox(enabled=False)`` turns it off, ``Sandbox(network=True)`` lets commands reach
    the network). With ``shells``, bash can run commands in the background, and
    ``bash_output`` and ``bash_kill`` come too; whoever made ``shells`` closes it.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace, extra_roots)
    return [
        make_read_tool(ws),
        make_write_tool(ws),
        make_edit_tool(ws),
        make_bash_tool(ws, default_timeout=bash_timeout, hidden_env=hidden_env, sandbox=sandbox,
                       shells=shells),
        make_grep_tool(ws, use_ripgrep=use_ripgrep),
        make_ls_tool(ws),
        make_find_tool(ws),
        *(shells.tools() if shells is not None else ()),
    ]
