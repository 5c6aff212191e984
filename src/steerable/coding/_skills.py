"""Skills and custom slash commands, in the layout Claude Code users already have.

A skill is a folder holding ``SKILL.md``: a front matter with ``name`` and ``description``, then
the instructions. Only the name and description go into the prompt; the body is read when the
agent uses the skill (the ``skill`` tool), so a project may have many without filling the
context. Skills are found under ``.steerable/skills`` and ``.claude/skills`` of the workspace
and ``skills`` beside the user's config (a project's skill of the same name wins).

A custom slash command is a Markdown file under ``.steerable/commands`` or ``.claude/commands``
(or ``commands`` beside the user's config): ``/name args`` sends its body as the message, with
``$ARGUMENTS`` replaced by the arguments and ``$1``, ``$2``... by each one.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from steerable.tools import FunctionTool, tool

__all__ = [
    "Skill",
    "SlashCommand",
    "expand_command",
    "find_commands",
    "find_skills",
    "make_skill_tool",
    "skills_prompt",
]

PROJECT_SKILLS = (".steerable/skills", ".claude/skills")
PROJECT_COMMANDS = (".steerable/commands", ".claude/commands")
MAX_BYTES = 256 * 1024
_NAME = re.compile(r"[a-z0-9][a-z0-9_:.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path
    """Its SKILL.md."""

    def body(self) -> str:
        return _split(_read(self.path) or "")[1]


@dataclass(frozen=True, slots=True)
class SlashCommand:
    name: str
    description: str
    body: str
    source: Path


def _read(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            return None  # a link could lead a project's skill to a file elsewhere
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _split(text: str) -> tuple[dict[str, str], str]:
    """(front matter fields, body) of a Markdown file with an optional ``---`` front matter."""
    if not text.startswith("---"):
        return {}, text.strip()
    end = text.find("\n---", 3)
    if end == -1:
        return {}, text.strip()
    fields: dict[str, str] = {}
    for line in text[3:end].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and not line.startswith((" ", "\t")):
            fields[key.strip().lower()] = value.strip().strip("'\"")
    return fields, text[end + 4:].strip()


def find_skills(root: Path, user_dirs: Iterable[Path] = ()) -> list[Skill]:
    """The skills of the workspace and the user, by name (the workspace's win), sorted."""
    found: dict[str, Skill] = {}
    places = [*user_dirs, *(root / p for p in PROJECT_SKILLS)]
    for place in places:  # later places override earlier ones: the project's come last
        if not place.is_dir() or place.is_symlink():
            continue
        for folder in sorted(place.iterdir()):
            text = _read(folder / "SKILL.md")
            if text is None:
                continue
            fields, _ = _split(text)
            name = fields.get("name", folder.name).lower()
            if _NAME.fullmatch(name):
                found[name] = Skill(name, fields.get("description", ""), folder / "SKILL.md")
    return sorted(found.values(), key=lambda s: s.name)


def find_commands(root: Path, user_dirs: Iterable[Path] = ()) -> list[SlashCommand]:
    found: dict[str, SlashCommand] = {}
    for place in [*user_dirs, *(root / p for p in PROJECT_COMMANDS)]:
        if not place.is_dir() or place.is_symlink():
            continue
        for path in sorted(place.rglob("*.md")):
            text = _read(path)
            rel = path.relative_to(place).with_suffix("").as_posix().replace("/", ":").lower()
            if text is None or not _NAME.fullmatch(rel):
                continue
            fields, body = _split(text)
            first = next((line for line in body.splitlines() if line.strip()), "")
            found[rel] = SlashCommand(rel, fields.get("description", first[:80]), body, path)
    return sorted(found.values(), key=lambda c: c.name)


def expand_command(command: SlashCommand, arguments: str) -> str:
    """The message a ``/name arguments`` line sends."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    text = command.body.replace("$ARGUMENTS", arguments)
    text = re.sub(r"\$(\d+)", lambda m: words[int(m.group(1)) - 1]
                  if 0 < int(m.group(1)) <= len(words) else "", text)
    if arguments and "$ARGUMENTS" not in command.body and not re.search(r"\$\d", command.body):
        text += f"\n\n{arguments}"  # arguments the file has no place for still reach the agent
    return text


def skills_prompt(skills: Iterable[Skill]) -> str:
    lines = [f"- {s.name}: {s.description or '(no description)'}" for s in skills]
    if not lines:
        return ""
    return ("# Skills\n\nWhen a task matches one of these skills, first call the `skill` tool "
            "with its name and follow the instructions it returns.\n" + "\n".join(lines))


def make_skill_tool(skills: Iterable[Skill]) -> FunctionTool:
    by_name = {s.name: s for s in skills}

    @tool(read_only=True)
    def skill(name: str) -> str:
        """Read the instructions of one of the skills listed in your instructions.

        Args:
            name: The skill's name, as listed.
        """
        found = by_name.get(name.strip().lower())
        if found is None:
            return f"no skill {name!r}; the skills are: {', '.join(by_name) or 'none'}"
        return found.body() or f"skill {found.name} has no instructions"

    return skill
