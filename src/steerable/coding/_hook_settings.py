"""Command hooks as Claude Code users already write them, read from their settings files.

``{"hooks": {"PreToolUse": [{"matcher": "Bash|Write", "hooks": [{"type": "command",
"command": "./check.sh", "timeout": 30}]}]}}`` in ``.claude/settings.json``,
``.claude/settings.local.json`` or ``.steerable/settings.json`` of the project, or in the user's
own files (``~/.claude/settings.json``, ``settings.json`` beside steerable's user config).

A project's hooks are programs that arrived with a clone: they run only with the user's consent,
which is remembered per project and keyed by the hooks' content (``HookConsent``), so a hook
that changes asks again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from steerable.errors import ConfigurationError

__all__ = ["EVENTS", "PROJECT_SETTINGS", "CommandHookSpec", "HookConsent", "HookSet",
           "load_hook_settings"]

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart")
PROJECT_SETTINGS = (".claude/settings.json", ".claude/settings.local.json",
                    ".steerable/settings.json")
DEFAULT_TIMEOUT = 60.0
"""Seconds, as Claude Code's default for a command hook."""
_MAX_SETTINGS_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class CommandHookSpec:
    event: str
    matcher: str
    """A regular expression over the tool's name ('' or '*': every tool)."""
    command: str
    timeout: float
    source: str
    """The settings file it came from."""

    def matches(self, *names: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        try:
            pattern = re.compile(self.matcher)
        except re.error:
            return self.matcher in names  # Claude Code compares an invalid pattern as text
        return any(pattern.fullmatch(name) for name in names)


@dataclass(frozen=True, slots=True)
class HookSet:
    user: tuple[CommandHookSpec, ...] = ()
    project: tuple[CommandHookSpec, ...] = ()

    def fingerprint(self) -> str:
        """What the consent is for: the project's hooks, every field of each."""
        text = json.dumps([[h.event, h.matcher, h.command, h.timeout, h.source]
                           for h in self.project])
        return hashlib.sha256(text.encode()).hexdigest()


def _specs(path: Path, label: str) -> list[CommandHookSpec]:
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_SETTINGS_BYTES + 1)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
    table = data.get("hooks", {}) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: 'hooks' must be an object of events")
    found: list[CommandHookSpec] = []
    for event, groups in table.items():
        if event not in EVENTS:
            continue  # events steerable has no equivalent for (Notification, PreCompact...)
        if not isinstance(groups, list):
            raise ConfigurationError(f"{path}: hooks.{event} must be a list")
        for group in groups:
            found += _group(path, label, event, group)
    return found


def _group(path: Path, label: str, event: str, group: object) -> list[CommandHookSpec]:
    where = f"{path}: hooks.{event}"
    if not isinstance(group, dict) or not isinstance(group.get("hooks", []), list):
        raise ConfigurationError(f"{where}: each entry must be {{'matcher': ..., 'hooks': [...]}}")
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str):
        raise ConfigurationError(f"{where}: 'matcher' must be a string")
    found = []
    for hook in group.get("hooks", []):
        if not isinstance(hook, dict) or hook.get("type", "command") != "command":
            continue  # prompt and agent hooks are Claude's own; only commands are run here
        command, timeout = hook.get("command"), hook.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(command, str) or not command.strip():
            raise ConfigurationError(f"{where}: a command hook needs a 'command' string")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigurationError(f"{where}: 'timeout' must be a positive number of seconds")
        found.append(CommandHookSpec(event, matcher, command, float(timeout), label))
    return found


def user_settings_paths(config_dir: Path) -> list[Path]:
    return [Path(os.path.expanduser("~/.claude/settings.json")), config_dir / "settings.json"]


def load_hook_settings(root: Path, user_paths: list[Path]) -> HookSet:
    """The command hooks of the user's files (trusted) and of the project at ``root``."""
    user = [spec for p in user_paths for spec in _specs(p, str(p))]
    project = [spec for rel in PROJECT_SETTINGS for spec in _specs(root / rel, rel)]
    return HookSet(tuple(user), tuple(project))


class HookConsent:
    """The projects whose hooks the user agreed to run: root -> fingerprint, in one JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}  # unreadable consent is no consent: the user is asked again
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def granted(self, root: Path, hooks: HookSet) -> bool:
        return self._load().get(str(root)) == hooks.fingerprint()

    def grant(self, root: Path, hooks: HookSet) -> None:
        data = self._load()
        data[str(root)] = hooks.fingerprint()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(tmp, self.path)  # never a half-written file
