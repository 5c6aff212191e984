"""Configuration: the user file, the project file, the environment and the flags, merged.

Precedence, highest first: command-line flags, environment variables (``STEERABLE_*``),
``./.steerable.toml`` (the project), the user's ``config.toml`` (``~/.config/steerable`` on
Linux, via platformdirs; ``STEERABLE_CONFIG`` names another file), built-in defaults.
Permission rules are not overridden but collected from every source (deny still wins).

A project file comes with whatever repository was cloned, so it is not trusted with what could
hurt the user: its ``allow`` rules, ``base_url`` (which would send the API key elsewhere),
``fallback`` (other providers, other URLs), ``workspace``, ``extra_roots`` and ``data_dir``
are ignored with a warning.
API keys are never read from these files: providers take them from the environment.
"""

from __future__ import annotations

import argparse
import logging
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from steerable._config import Limits
from steerable.errors import ConfigurationError

__all__ = ["SECRET_ENV", "Settings", "load_settings", "mask", "turn_limits", "user_config_path"]

log = logging.getLogger("steerable.cli")

SECRET_ENV = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")

# key -> (type, default, environment variable)
_KEYS: dict[str, tuple[type, Any, str | None]] = {
    "provider": (str, None, "STEERABLE_PROVIDER"),
    "model": (str, None, "STEERABLE_MODEL"),
    "base_url": (str, None, "STEERABLE_BASE_URL"),
    "context_window": (int, None, "STEERABLE_CONTEXT_WINDOW"),
    "fallback": (list, [], None),
    "workspace": (str, ".", "STEERABLE_WORKSPACE"),
    "data_dir": (str, None, "STEERABLE_DATA_DIR"),
    "max_iterations": (int, 30, "STEERABLE_MAX_ITERATIONS"),
    "max_turn_tokens": (int, None, "STEERABLE_MAX_TURN_TOKENS"),
    "max_turn_cost_usd": (float, None, "STEERABLE_MAX_TURN_COST_USD"),
    "max_tool_calls": (int, None, "STEERABLE_MAX_TOOL_CALLS"),
    "dry_run": (bool, False, None),
    "yes": (bool, False, None),
    "otel": (bool, False, "STEERABLE_OTEL"),
    "instructions": (str, "", None),
    "extra_roots": (list, [], None),
    "bash_timeout": (float, 120.0, None),
    "sandbox": (bool, True, "STEERABLE_SANDBOX"),
    "sandbox_network": (bool, False, None),
    "explorer": (bool, False, None),
    "policy": (str, "auto", "STEERABLE_POLICY"),
    "undo": (bool, True, "STEERABLE_UNDO"),
    "undo_on_abort": (bool, False, "STEERABLE_UNDO_ON_ABORT"),
    "undo_max_file_mb": (float, 50.0, None),
    "undo_max_store_mb": (float, 2048.0, None),
    "undo_max_age_days": (float, 30.0, None),
}
# A cloned repository must not turn the bash sandbox off or open its network either, nor turn
# undo off (or starve it), which is the user's way back from what the agent did there.
_UNTRUSTED_IN_PROJECT = frozenset({"base_url", "fallback", "workspace", "extra_roots", "data_dir",
                                   "yes", "sandbox", "sandbox_network", "policy", "undo",
                                   "undo_max_file_mb", "undo_max_store_mb", "undo_max_age_days"})
_RULE_KINDS = ("allow", "ask", "deny")


@dataclass
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    rules: list[tuple[str, str, str]] = field(default_factory=list)
    """(action, pattern, source) for every permission rule."""
    files: list[str] = field(default_factory=list)
    mcp_servers: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    """name -> (the server's table, source): MCP servers, from trusted files only."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


def user_config_path() -> Path:
    env = os.environ.get("STEERABLE_CONFIG")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("steerable", appauthor=False)) / "config.toml"


_FALLBACK_KEYS = {"provider": str, "model": str, "base_url": str, "context_window": int}
_FALLBACK_PROVIDERS = ("openai", "anthropic", "local")


def _fallback(value: Any, where: str) -> list[dict[str, Any]]:
    """The ``[[fallback]]`` tables: providers to try in turn when the main one fails."""
    example = ('e.g. [[fallback]] with provider = "anthropic" and model = "claude-sonnet-4-5" '
               '(optional: base_url, context_window)')
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigurationError(f"{where}: 'fallback' must be a list of tables, {example}")
    out = []
    for i, entry in enumerate(value):
        for key, item in entry.items():
            kind = _FALLBACK_KEYS.get(key)
            if kind is None:
                raise ConfigurationError(f"{where}: fallback #{i + 1}: unknown key '{key}' "
                                         f"(known: {', '.join(_FALLBACK_KEYS)})")
            if not isinstance(item, kind) or isinstance(item, bool):
                raise ConfigurationError(f"{where}: fallback #{i + 1}: '{key}' must be "
                                         f"{kind.__name__}, got {item!r}")
        if entry.get("provider") not in _FALLBACK_PROVIDERS:
            raise ConfigurationError(
                f"{where}: fallback #{i + 1}: 'provider' must be one of "
                f"{', '.join(_FALLBACK_PROVIDERS)}, got {entry.get('provider')!r}")
        if entry.get("context_window", 1) < 1:
            raise ConfigurationError(f"{where}: fallback #{i + 1}: 'context_window' must be "
                                     "at least 1")
        out.append(dict(entry))
    return out


def _coerce(key: str, value: Any, where: str) -> Any:
    if key == "fallback":
        return _fallback(value, where)
    kind = _KEYS[key][0]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ConfigurationError(f"{where}: '{key}' must be {kind.__name__}, got {value!r}")


def _from_env(kind: type, raw: str) -> Any:
    if kind is int:
        return int(raw)
    if kind is bool:
        flag = {"1": True, "true": True, "yes": True, "on": True,
                "0": False, "false": False, "no": False, "off": False}.get(raw.strip().lower())
        if flag is None:
            raise ValueError(raw)
        return flag
    return raw


def _read_toml(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigurationError(f"cannot read config file {path}: {reason}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from None


def _apply_file(s: Settings, path: Path, source: str, trusted: bool) -> None:
    data = _read_toml(path)
    if data is None:
        return
    s.files.append(str(path))
    for key, value in data.items():
        if key == "permissions":
            _apply_rules(s, value, path, source, trusted)
        elif key == "mcp_servers":
            _apply_mcp(s, value, path, source, trusted)
        elif key not in _KEYS:
            log.warning("%s: unknown setting '%s' ignored", path, key)
        elif not trusted and key in _UNTRUSTED_IN_PROJECT:
            log.warning("%s: '%s' is not accepted from a project file; set it in your user "
                        "config, the environment or a flag", path, key)
        else:
            s.values[key] = _coerce(key, value, str(path))
            s.sources[key] = source


def _apply_rules(s: Settings, table: Any, path: Path, source: str, trusted: bool) -> None:
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: [permissions] must be a table of allow/ask/deny lists")
    for kind, patterns in table.items():
        if kind not in _RULE_KINDS or not isinstance(patterns, list):
            raise ConfigurationError(f"{path}: permissions.{kind} is not an allow/ask/deny list")
        if kind == "allow" and not trusted:
            log.warning("%s: 'allow' rules from a project file are ignored; approve them when "
                        "asked or add them to your user config", path)
            continue
        s.rules += [(kind, str(p), source) for p in patterns]


def _apply_mcp(s: Settings, table: Any, path: Path, source: str, trusted: bool) -> None:
    if not trusted:  # a server is a program to run or a place to send data: the user's call
        log.warning("%s: [mcp_servers] from a project file are ignored; add them to your user "
                    "config", path)
        return
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise ConfigurationError(f"{path}: [mcp_servers] must hold one table per server, "
                                 "e.g. [mcp_servers.fs] with command = ... or url = ...")
    for name, spec in table.items():
        s.mcp_servers[str(name)] = (dict(spec), source)


def load_settings(args: argparse.Namespace, cwd: Path | None = None) -> Settings:
    s = Settings()
    for key, (_, default, _) in _KEYS.items():
        s.values[key] = default
        s.sources[key] = "default"
    _apply_file(s, user_config_path(), "user config", trusted=True)
    _apply_file(s, (cwd or Path.cwd()) / ".steerable.toml", "project config", trusted=False)
    for key, (_, _, env) in _KEYS.items():
        if env and os.environ.get(env):
            raw = os.environ[env]
            try:
                s.values[key] = _from_env(_KEYS[key][0], raw)
            except ValueError:
                raise ConfigurationError(
                    f"{env} must be {_KEYS[key][0].__name__}, got {raw!r}") from None
            s.sources[key] = f"env {env}"
    for key in _KEYS:
        value = getattr(args, key, None)
        if value is not None:
            s.values[key] = value
            s.sources[key] = "flag"
    s.rules += [("allow", p, "flag") for p in getattr(args, "allow", [])]
    s.rules += [("deny", p, "flag") for p in getattr(args, "deny", [])]
    if s.values["max_iterations"] < 1:
        raise ConfigurationError("max_iterations must be at least 1")
    if s.values["context_window"] is not None and s.values["context_window"] < 1:
        raise ConfigurationError("context_window must be at least 1")
    try:
        turn_limits(s)
    except ValueError as exc:
        raise ConfigurationError(str(exc).replace("Limits.", "")) from None
    return s


def turn_limits(s: Settings) -> Limits:
    """The turn budgets the settings ask for (``Limits``' other bounds keep their defaults)."""
    return Limits(max_turn_tokens=s.values["max_turn_tokens"],
                  max_turn_cost_usd=s.values["max_turn_cost_usd"],
                  max_tool_calls=s.values["max_tool_calls"])


def mask(value: str) -> str:
    """Enough of a secret to recognise which one it is, never enough to use it."""
    if len(value) <= 8:
        return "****"
    return f"{value[:3]}…{value[-4:]} (masked)"
