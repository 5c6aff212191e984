"""Everything a run or chat needs, built from settings: provider, tools, store, loop, approvals."""

from __future__ import annotations

import logging
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steerable import (
    Agent,
    AgentLoop,
    Message,
    Permissions,
    ScriptedProvider,
    Timeouts,
    Tool,
)
from steerable._secrets import Redactor
from steerable.cli._args import UsageError
from steerable.cli._hook_setup import command_hooks
from steerable.cli._settings import Settings, turn_limits, user_config_path
from steerable.cli._undo_setup import snapshot_hook
from steerable.coding import (
    SNAPSHOT_HOOK_PRIORITY,
    SNAPSHOT_HOOK_TIMEOUT,
    BackgroundShells,
    CommandHooks,
    Conventions,
    HookSet,
    Sandbox,
    ShellNotice,
    Skill,
    SlashCommand,
    SnapshotHook,
    Workspace,
    coding_tools,
    find_commands,
    find_skills,
    load_conventions,
    make_ask_user_tool,
    make_skill_tool,
    make_todo_tool,
    skills_prompt,
)
from steerable.coding.policy import ToolPolicy
from steerable.errors import ConfigurationError, SteerableError
from steerable.providers import FallbackProvider, Provider, select_provider
from steerable.storage import JSONLSessionStore

__all__ = ["App", "ProjectSetup", "Redactor", "build_app", "coding_agents", "make_provider",
           "new_session_id", "project_setup", "tell_session", "workspace_tools"]

log = logging.getLogger("steerable")

# Written for small local models as much as for big ones: short rules, nothing that invites a
# report of changes (a small model asked to "say what you changed" claims changes it never made).
# No folder name in it: the tools take relative paths, and a prompt that is the same in every
# folder is a prefix the local server's cache keeps (the tool definitions come after it).
BASE_INSTRUCTIONS = """\
You are a coding agent working in the user's folder; paths are relative to it.
- To answer about files, first look with a tool (read, grep, find, ls); never guess contents.
- To run a program, use bash (python3 for Python). Give numbers from tool output: to count
  lines use bash `wc -l`, never count yourself.
- Change files only when asked: edit replaces text; to add a line at the end of a file use
  bash `echo 'text' >> file`.
- A general question (arithmetic, how Python works) needs no tool: just answer it.
- You cannot send email or messages or use the internet: if asked, say you cannot.
- Report only what the tools really did. Keep answers short.
The user may send new messages while you work: follow the latest one."""

EXPLORER_INSTRUCTIONS = """\
You explore the folder {root} to answer one question for another agent. You can only read:
list, find, grep and read files. Answer with the facts found (file paths, line numbers, short
quotes), concisely; say so if you could not find something."""

# Approvals wait for a person, who may be away for a while; the loop's 60 s default is for bots.
HUMAN_APPROVAL_TIMEOUT = 24 * 3600.0
POLICY_TIMEOUT = 3600.0
PAGE_PARK_AFTER = 300.0
"""The server's page answers requests live for this long; then the turn parks (and waits in
the store, for an answer from the page, the API or ``steerable answer``, as long as it takes)."""


@dataclass
class App:
    settings: Settings
    workspace: Workspace
    store: JSONLSessionStore
    loop: AgentLoop
    agent: Agent
    dry_agent: Agent
    session_id: str
    redact: Redactor
    interactive_approvals: bool
    policy: ToolPolicy | None = None
    undo: SnapshotHook | None = None
    """Takes undo's snapshots (None: the ``undo`` setting is off)."""
    conventions: Conventions = field(default_factory=Conventions)
    """The project's AGENTS.md / CLAUDE.md files, in the instructions."""
    command_hooks: CommandHooks | None = None
    """The command hooks of the settings files that run (None: none do)."""
    skills: list[Skill] = field(default_factory=list)
    commands: list[SlashCommand] = field(default_factory=list)
    """Custom slash commands (Markdown files)."""
    shells: BackgroundShells = field(default_factory=BackgroundShells)
    """The commands bash runs in the background; each front end closes it when it ends."""

    def agent_for(self, dry_run: bool) -> Agent:
        return self.dry_agent if dry_run else self.agent


def new_session_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def make_store(settings: Settings, redact: Redactor | None = None) -> JSONLSessionStore:
    data_dir = settings["data_dir"]
    directory = Path(data_dir).expanduser() / "sessions" if data_dir else None
    return JSONLSessionStore(directory, redact=redact)


def _workspace(settings: Settings) -> Workspace:
    root = Path(settings["workspace"]).expanduser()
    if not root.is_dir():
        raise UsageError(f"workspace {str(root)!r} does not exist or is not a folder")
    return Workspace(root, settings["extra_roots"])


def existing_session(store: JSONLSessionStore, session_id: str) -> list[Message]:
    """The messages of a session that must exist; a usage error naming it otherwise.
    A corrupt file fails here, before anything runs."""
    try:
        # A session whose first turn was cut off has only its checkpoint so far.
        known = store.exists(session_id) or store.checkpoint_path(session_id).exists()
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from None
    if not known:
        raise UsageError(f"no session {session_id!r}; see 'steerable sessions list'")
    return store.load(session_id)


def _session(store: JSONLSessionStore, requested: str | None) -> str:
    if requested in (None, "new"):
        return new_session_id()
    assert requested is not None
    existing_session(store, requested)
    return requested


def make_provider(settings: Settings, script: str | None = None) -> Provider:
    """The provider the settings ask for, behind a ``FallbackProvider`` when they list
    fallbacks (each built now, so a missing key or package is said before the run starts)."""
    provider = select_provider(settings["provider"], model=settings["model"],
                               base_url=settings["base_url"], script=script)
    entries = settings["fallback"]
    if not entries:
        return provider
    others = [select_provider(e["provider"], model=e.get("model"), base_url=e.get("base_url"))
              for e in entries]
    windows = [settings["context_window"], *(e.get("context_window") for e in entries)]
    return FallbackProvider([provider, *others], context_windows=windows)


@dataclass(frozen=True)
class ProjectSetup:
    """What the workspace adds to the coder: its instructions and skills."""

    instructions: str
    conventions: Conventions
    skills: list[Skill]


def project_setup(settings: Settings, workspace: Workspace) -> ProjectSetup:
    """The coder's instructions: steerable's own, the configured ones, then the project's
    AGENTS.md files and skills (after the fixed part, so the prompt's prefix stays the same
    from one project to the next)."""
    instructions = BASE_INSTRUCTIONS
    if settings["instructions"]:
        instructions += "\n\n" + settings["instructions"]
    conventions = load_conventions(workspace)
    if conventions.text:
        instructions += "\n\n" + conventions.text
    skills = find_skills(workspace.root, [user_config_path().parent / "skills"])
    if skills:
        instructions += "\n\n" + skills_prompt(skills)
    return ProjectSetup(instructions, conventions, skills)


def coding_agents(settings: Settings, provider: Any, workspace: Workspace,
                  tools: Sequence[Tool], project: ProjectSetup | None = None) -> tuple[Agent, Agent]:
    """The coding agent over ``tools`` (plus ``skill`` when the workspace has skills) and its
    dry-run twin (the same agent when the settings ask for a dry run already)."""
    project = project or project_setup(settings, workspace)
    if project.skills:
        tools = [*tools, make_skill_tool(project.skills)]
    common: dict[str, Any] = {"provider": provider, "name": "coder",
                              "instructions": project.instructions, "tools": list(tools), "max_iterations": settings["max_iterations"],
                              "model": settings["model"]}
    if settings["explorer"]:
        common["subagents"] = [Agent(
            name="explorer", provider=provider, model=settings["model"],
            description="reads and searches the workspace to answer a question; changes nothing",
            instructions=EXPLORER_INSTRUCTIONS.format(root=workspace.root),
            # Read-only, and never asking the person: a sub-turn's question cannot park.
            tools=[t for t in tools if t.read_only and t.name != "ask_user"],
            max_iterations=settings["max_iterations"])]
    agent = Agent(dry_run=bool(settings["dry_run"]), **common)
    dry_agent = Agent(dry_run=True, **common) if not settings["dry_run"] else agent
    return agent, dry_agent


def workspace_tools(settings: Settings, workspace: Workspace,
                    shells: BackgroundShells | None = None) -> list[Tool]:
    """The coding tools of ``workspace``, bash sandboxed as the settings say (and able to run
    commands in the background with ``shells``)."""
    sandbox = Sandbox(enabled=bool(settings["sandbox"]), network=bool(settings["sandbox_network"]))
    return [*coding_tools(workspace, bash_timeout=settings["bash_timeout"], sandbox=sandbox,
                          shells=shells),
            make_todo_tool(), make_ask_user_tool()]


def tell_session(loop: AgentLoop, notice: ShellNotice) -> None:
    """A background command ended: its session is told with a message (SPEC 10) sent with
    the ``steer`` policy: a running turn takes it before its next model call; a turn that is
    ending, or an idle session, runs it as a turn of its own, so the model always hears of it.
    A session whose pending turn refuses new ones hears nothing; bash_output still answers."""
    try:
        loop.send(notice.text, notice.session_id, "steer")
    except (SteerableError, RuntimeError) as exc:
        log.warning("background command %s ended, but session %s was not told: %s",
                    notice.shell_id, notice.session_id, exc)


def build_app(settings: Settings, *, session: str | None, can_ask: bool,
              script: str | None = None, record_events: str | None = None,
              extra_tools: Sequence[Tool] = (), ask_by_events: bool = False,
              approver: Any = None, checkpoints: bool = True, snapshots: bool = True,
              ask_hooks: Callable[[HookSet], bool] | None = None) -> App:
    """``can_ask``: approvals may be asked on this terminal; ``ask_by_events``: they are asked
    through APPROVAL_REQUESTED events and answered by a front end (the server's page);
    ``approver``: a hook that asks instead (an editor, over ACP). ``checkpoints=False``: a
    cancelled turn is saved as it stands instead of leaving a checkpoint to resume.
    ``snapshots=False``: no undo snapshots of the settings' workspace (ACP sessions each work
    in a folder of their own). ``ask_hooks``: asks the user whether the project's command hooks
    may run."""
    workspace = _workspace(settings)
    redact = Redactor()
    store = make_store(settings, redact)
    session_id = _session(store, session)
    provider = make_provider(settings, script)
    project = project_setup(settings, workspace)
    shells = BackgroundShells()
    agent, dry_agent = coding_agents(settings, provider, workspace,
                                     [*workspace_tools(settings, workspace, shells), *extra_tools],
                                     project)
    try:
        permissions = Permissions([(action, pattern) for action, pattern, _ in settings.rules])
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # Nobody to ask now (no terminal, no page, no editor): requests park at once and wait in
    # the store; a page parks them after a while; a terminal or an editor asks live.
    asks_live = approver is not None or (not ask_by_events and can_ask and sys.stdin.isatty())
    park = checkpoints and not asks_live
    loop = AgentLoop(agent, store=store, permissions=permissions, limits=turn_limits(settings),
                     timeouts=Timeouts(approval=HUMAN_APPROVAL_TIMEOUT,
                                       park_after=PAGE_PARK_AFTER if ask_by_events else 0.0),
                     record_events=record_events, checkpoints=checkpoints, park=park)
    shells.notify = lambda notice: tell_session(loop, notice)
    loop.register_hook(shells)  # a hard abort stops the commands its turn started
    undo = snapshot_hook(settings, workspace.root) if snapshots else None
    if undo is not None:
        loop.register_hook(undo, priority=SNAPSHOT_HOOK_PRIORITY, timeout=SNAPSHOT_HOOK_TIMEOUT)
    policy = _policy(settings, workspace, provider)
    if policy is not None:
        # Its own model calls (classify, recheck) take as long as any model call.
        loop.register_hook(policy, priority=100, timeout=POLICY_TIMEOUT)
    hooks = command_hooks(settings, workspace.root, loop, store,
                          resumed=session not in (None, "new"), ask=ask_hooks)
    interactive = False
    if not settings["yes"]:
        if approver is not None:
            loop.register_hook(approver)
        else:
            from steerable import HumanApprover

            loop.register_hook(HumanApprover())
            interactive = asks_live
    return App(settings, workspace, store, loop, agent, dry_agent, session_id, redact,
               interactive, policy, undo, project.conventions, hooks, project.skills,
               find_commands(workspace.root, [user_config_path().parent / "commands"]), shells)


def _policy(settings: Settings, workspace: Workspace, provider: object) -> ToolPolicy | None:
    """The coding agent's tool policy, unless turned off (``auto``: off only for the scripted
    provider, whose scripts would otherwise have to answer its classification calls)."""
    mode = settings["policy"]
    if mode not in ("auto", "on", "off"):
        raise UsageError(f"policy must be auto, on or off, not {mode!r}")
    if mode == "off" or (mode == "auto" and isinstance(provider, ScriptedProvider)):
        return None
    return ToolPolicy(workspace)
