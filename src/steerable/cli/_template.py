"""Prompt templates: ``{name}`` filled from ``--var name=value``, each value marked untrusted.

Every value is wrapped in ``<untrusted_input name="...">`` tags so the model can tell the
user's instructions from data pasted into them, and any tag spelled inside a value is escaped so
a value cannot close its wrapper early and speak as the instructions. ``{{`` and ``}}`` are
literal braces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from steerable.cli._args import UsageError

__all__ = ["escape_untrusted", "parse_vars", "render_template"]

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TAG = re.compile(r"<(/?)(\s*untrusted_input)", re.IGNORECASE)


def escape_untrusted(value: str) -> str:
    return _TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", value)


def parse_vars(items: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--var needs NAME=VALUE, got {item!r}")
        out[name] = value
    return out


def render_template(text: str, values: Mapping[str, str]) -> str:
    missing: list[str] = []

    def fill(m: re.Match[str]) -> str:
        if m.group(0) in ("{{", "}}"):
            return m.group(0)[0]
        name = m.group(1)
        if name not in values:
            missing.append(name)
            return m.group(0)
        return (f'<untrusted_input name="{name}">\n{escape_untrusted(values[name])}\n'
                "</untrusted_input>")

    result = _PLACEHOLDER.sub(fill, text)
    if missing:
        raise UsageError(f"template needs a value for {', '.join(sorted(set(missing)))} "
                         "(--var NAME=VALUE)")
    return result


def load_template(path: str, items: Sequence[str]) -> str:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise UsageError(f"cannot read template {path}: {reason}") from None
    return render_template(text, parse_vars(items))
