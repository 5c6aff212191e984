"""The argument checks of the loop's public methods and its constructor: a caller's mistake is
a clear ``TypeError``/``ValueError``/``ConfigurationError`` before anything changes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from steerable._config import Limits, Timeouts
from steerable._core._agent import BaseAgent
from steerable._core._cancel import CancelMode
from steerable._core._permissions import Permissions
from steerable._core._session import SessionStore
from steerable.drivers._lanes import BusyPolicy, check_policy
from steerable.errors import ConfigurationError

__all__ = ["check_agent", "check_busy_policy", "check_config", "check_mode", "check_session_id", "check_str",
           "check_text", "check_type"]


def check_mode(mode: object) -> None:
    if not isinstance(mode, CancelMode):
        raise TypeError(f"mode must be a CancelMode, got {mode!r}")


def check_session_id(session_id: object) -> None:
    if not isinstance(session_id, str) or not session_id:
        raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")


def check_text(what: str, text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what} must not be empty")
    return text


def check_str(what: str, value: object, *, optional: bool = False) -> None:
    if not isinstance(value, str) and not (optional and value is None):
        raise TypeError(f"{what} must be a str{' or None' if optional else ''}, "
                        f"got {type(value).__name__}")


def check_type(what: str, value: object, cls: type) -> None:
    if not isinstance(value, cls):
        raise TypeError(f"{what} must be a {cls.__name__}, got {type(value).__name__}")


def check_agent(agent: object, kind: type[BaseAgent] = BaseAgent) -> None:
    """An optional agent argument: None, or an agent (``kind``)."""
    if agent is not None and not isinstance(agent, kind):
        what = "an Agent" if kind is not BaseAgent else "an agent"
        raise TypeError(f"agent must be {what}, got {type(agent).__name__}")


def check_busy_policy(policy: object) -> BusyPolicy:
    """``AgentLoop``'s ``busy_policy``: a ``ConfigurationError`` names the ones there are."""
    try:
        return check_policy(policy)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def check_config(agent: object, store: object, limits: object, timeouts: object,
                 permissions: Permissions | Iterable[tuple[str, str]] | None) -> Permissions:
    """``AgentLoop``'s arguments; the permissions as a ``Permissions``."""
    if not isinstance(agent, BaseAgent):
        raise ConfigurationError(
            f"AgentLoop needs an agent (Agent or a composite), got {type(agent).__name__}")
    if store is not None and not isinstance(store, SessionStore):
        raise ConfigurationError(
            f"store must implement SessionStore (load/append/replace...), got {type(store).__name__}"
        )
    wanted: tuple[tuple[str, object, type[Any]], ...] = (
        ("limits", limits, Limits), ("timeouts", timeouts, Timeouts))
    for name, value, cls in wanted:
        if value is not None and not isinstance(value, cls):
            raise ConfigurationError(
                f"{name} must be a {cls.__name__}, got {type(value).__name__}")
    if permissions is None:
        return Permissions()
    return permissions if isinstance(permissions, Permissions) else Permissions(permissions)
