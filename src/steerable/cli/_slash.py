"""Custom slash commands and skills in the front ends: expanding ``/name args``, listing them
for ``/help``, and the chat's ``/`` completion menu."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from steerable.coding import Skill, SlashCommand, expand_command

__all__ = ["expand_slash", "extra_help", "slash_completer"]


def expand_slash(commands: Sequence[SlashCommand], text: str,
                 skills: Sequence[Skill] = ()) -> str | None:
    """The message ``text`` stands for when it is ``/name args`` of a custom command, or of a
    skill (the task, then the skill's instructions: the model need not look them up)."""
    if not text.startswith("/"):
        return None
    name, _, rest = text[1:].partition(" ")
    found = next((c for c in commands if c.name == name.lower()), None)
    if found is not None:
        return expand_command(found, rest.strip())
    skill = next((s for s in skills if s.name == name.lower()), None)
    if skill is None:
        return None
    task = rest.strip() or f"Use the {skill.name} skill."
    return f"{task}\n\nFollow the {skill.name} skill:\n{skill.body().strip()}"


def extra_help(commands: Sequence[SlashCommand], skills: Sequence[Skill]) -> str:
    lines = []
    if commands:
        lines.append("Custom commands:")
        lines += [f"/{c.name:<13} {c.description}" for c in commands]
    if skills:
        lines.append("Skills (the agent reads one when a task matches it; /NAME TASK uses one):")
        lines += [f"/{s.name:<13} {s.description}" for s in skills]
    return "\n".join(lines)


def slash_completer(builtin: Iterable[str], commands: Sequence[SlashCommand],
                    skills: Sequence[Skill] = ()) -> object:
    """A prompt_toolkit completer offering every command and skill once the line starts
    with ``/``."""
    from prompt_toolkit.completion import Completer, Completion

    # The project's own first: the menu shows a few rows at a time.
    entries = [(f"/{c.name}", c.description) for c in commands]
    taken = {name for name, _ in entries}
    entries += [(f"/{s.name}", f"skill: {s.description}") for s in skills
                if f"/{s.name}" not in taken]
    entries += [(name, "") for name in builtin]

    class SlashCompleter(Completer):
        def get_completions(self, document, complete_event):  # type: ignore[no-untyped-def]
            text = document.text_before_cursor
            if not text.startswith("/") or " " in text:
                return
            for name, meta in entries:
                if name.startswith(text):
                    yield Completion(name, start_position=-len(text), display_meta=meta)

    return SlashCompleter()
