"""Custom slash commands and skills in the front ends: expanding ``/name args``, listing them
for ``/help``, and the chat's ``/`` completion menu."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from steerable.coding import Skill, SlashCommand, expand_command

__all__ = ["expand_slash", "extra_help", "slash_completer"]


def expand_slash(commands: Sequence[SlashCommand], text: str) -> str | None:
    """The message ``text`` stands for when it is ``/name args`` of a custom command."""
    if not text.startswith("/"):
        return None
    name, _, rest = text[1:].partition(" ")
    found = next((c for c in commands if c.name == name.lower()), None)
    return None if found is None else expand_command(found, rest.strip())


def extra_help(commands: Sequence[SlashCommand], skills: Sequence[Skill]) -> str:
    lines = []
    if commands:
        lines.append("Custom commands:")
        lines += [f"/{c.name:<13} {c.description}" for c in commands]
    if skills:
        lines.append("Skills (the agent reads one when a task matches it):")
        lines += [f"  {s.name:<13} {s.description}" for s in skills]
    return "\n".join(lines)


def slash_completer(builtin: Iterable[str], commands: Sequence[SlashCommand]) -> object:
    """A prompt_toolkit completer offering every command once the line starts with ``/``."""
    from prompt_toolkit.completion import Completer, Completion

    entries = [(name, "") for name in builtin] + [(f"/{c.name}", c.description) for c in commands]

    class SlashCompleter(Completer):
        def get_completions(self, document, complete_event):  # type: ignore[no-untyped-def]
            text = document.text_before_cursor
            if not text.startswith("/") or " " in text:
                return
            for name, meta in entries:
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=meta)

    return SlashCompleter()
