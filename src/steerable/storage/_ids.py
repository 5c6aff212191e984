"""The session ids every store accepts: safe as a file name, a SQL value and a Redis key part."""

from __future__ import annotations

import re

from steerable.errors import ConfigurationError

__all__ = ["check_session_id"]

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str) or not _SESSION_ID.match(session_id):
        raise ConfigurationError(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' "
            "(at most 128, not starting with a dot)"
        )
    return session_id
