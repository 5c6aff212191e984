"""Which command hooks a run or chat runs: the user's always, the project's with consent.

Consent is asked once per project in ``chat`` (the hooks are shown first), remembered in the
data folder keyed by the hooks' content (a changed hook asks again); ``--yes`` counts as
consent, as ``claude -p`` runs a project's hooks. Without it ``run`` leaves them out and says so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from steerable import AgentLoop
from steerable.cli._settings import Settings, user_config_path
from steerable.cli._undo_setup import data_folder
from steerable.coding import CommandHooks, HookConsent, HookSet, load_hook_settings
from steerable.coding._hook_settings import user_settings_paths
from steerable.storage import JSONLSessionStore

__all__ = ["ask_on_terminal", "command_hooks", "describe_hooks", "hooks_listing"]

CONSENT_FILE = "hook-consent.json"


def _shown(text: str) -> str:
    """A project's text as printable characters: no escape sequence can redraw the question."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def describe_hooks(hooks: HookSet) -> str:
    lines = [f"This project has {len(hooks.project)} command hook(s) that would run on "
             "this machine:"]
    for h in hooks.project:
        on = f" on {_shown(h.matcher)}" if h.matcher not in ("", "*") else ""
        lines.append(f"  {h.event}{on}: {_shown(h.command)}    ({h.source}, "
                     f"timeout {h.timeout:g} s)")
    return "\n".join(lines)


def ask_on_terminal(hooks: HookSet) -> bool:
    print(describe_hooks(hooks), file=sys.stderr)
    try:
        answer = input("Run them in this project? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _project_allowed(settings: Settings, root: Path, hooks: HookSet,
                     ask: Callable[[HookSet], bool] | None) -> bool:
    if not hooks.project:
        return False
    consent = HookConsent(data_folder(settings) / CONSENT_FILE)
    if settings["yes"] or consent.granted(root, hooks):
        return True
    if ask is not None and ask(hooks):
        consent.grant(root, hooks)
        return True
    print(f"steerable: {len(hooks.project)} project hook(s) not run: approve them in "
          "'steerable chat' or pass --yes", file=sys.stderr)
    return False


def command_hooks(settings: Settings, root: Path, loop: AgentLoop, store: JSONLSessionStore, *,
                  resumed: bool, ask: Callable[[HookSet], bool] | None) -> CommandHooks | None:
    """The command hooks of this session, registered on ``loop`` (None when none applies)."""
    hooks = load_hook_settings(root, user_settings_paths(user_config_path().parent))
    specs = [*hooks.user, *(hooks.project if _project_allowed(settings, root, hooks, ask)
                            else ())]
    if not specs:
        return None

    def continue_with(session_id: str, text: str) -> None:
        loop.inject_follow_up(text, session_id)  # run after this turn, as its follow-up

    runner = CommandHooks(specs, root, source="resume" if resumed else "startup",
                          transcript=lambda sid: str(store.path(sid)),
                          continue_with=continue_with,
                          notice=lambda text: print(f"steerable: {text}", file=sys.stderr))
    # Each command has its own timeout and they run one after the other.
    loop.register_hook(runner, timeout=sum(s.timeout for s in specs) + 5.0)
    return runner


def hooks_listing(settings: Settings) -> list[dict[str, object]]:
    """Every command hook a run in the configured workspace would find, and whether it runs."""
    root = Path(settings["workspace"]).expanduser().resolve()
    if not root.is_dir():
        return []
    hooks = load_hook_settings(root, user_settings_paths(user_config_path().parent))
    consented = HookConsent(data_folder(settings) / CONSENT_FILE).granted(root, hooks)
    project = ("runs (approved)" if consented else
               "runs with --yes" + ("" if settings["yes"] else "; not approved for chat yet"))
    return [{"event": h.event, "matcher": h.matcher, "command": h.command, "timeout": h.timeout,
             "source": h.source, "runs": "runs (yours)" if h in hooks.user else project}
            for h in (*hooks.user, *hooks.project)]
