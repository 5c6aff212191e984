"""Start-up cost of reading a project's conventions on a 10,000-file repository: AGENTS.md /
CLAUDE.md (nested files and their ``@`` imports), the command hooks of ``.claude/settings.json``,
skills (SKILL.md) and custom slash commands. Median and p95 wall-clock and CPU time over
repeated runs (warm page cache, as on a second start-up), plus one cold-ish first run, for the
whole of it and per part. The repository has 200 folders of source-like files, a .gitignore'd
build folder of 2,000 more files, a root AGENTS.md importing two documents, 20 nested files,
hooks on five events, 10 skills and 10 commands.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from steerable.coding import find_commands, find_skills, load_conventions, load_hook_settings

PARTS = {
    "conventions": lambda root: len(load_conventions(root).files),
    "hooks": lambda root: len(load_hook_settings(root, []).project),
    "skills": lambda root: len(find_skills(root)),
    "commands": lambda root: len(find_commands(root)),
}


def make_repo(root: Path, files: int) -> None:
    (root / ".gitignore").write_text("build/\n")
    for i in range(files):
        folder = root / f"pkg{i % 20}" / f"mod{i % 200}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    build = root / "build"
    build.mkdir()
    for i in range(files // 5):
        (build / f"out{i}.o").write_text("x")
    (root / "docs").mkdir()
    (root / "docs" / "style.md").write_text("# Style\n" + "Use four spaces.\n" * 40)
    (root / "docs" / "testing.md").write_text("# Tests\n" + "Run make check.\n" * 40)
    (root / "AGENTS.md").write_text("# Project\nSee @docs/style.md and @docs/testing.md.\n")
    for i in range(20):
        (root / f"pkg{i}" / "AGENTS.md").write_text(f"Package {i}: keep the API stable.\n")
    events = ["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SessionStart"]
    hooks = {e: [{"matcher": "bash", "hooks": [{"type": "command", "command": f"./check-{e}"}]}]
             for e in events}
    (root / ".claude").mkdir()
    (root / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    for i in range(10):
        skill = root / ".claude" / "skills" / f"skill{i}"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: skill{i}\ndescription: Does task {i}\n"
                                        f"---\nStep one.\nStep two.\n")
        commands = root / ".claude" / "commands"
        commands.mkdir(exist_ok=True)
        (commands / f"cmd{i}.md").write_text(f"---\ndescription: Command {i}\n---\nDo $1.\n")


def timed(root: Path, parts: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds to read ``parts`` of the project, and how many things were found."""
    wall, cpu = time.perf_counter(), time.process_time()
    found = sum(PARTS[name](root) for name in parts)
    return time.perf_counter() - wall, time.process_time() - cpu, found


def report(label: str, root: Path, parts: list[str], runs: int) -> None:
    first_wall, _, count = timed(root, parts)
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, _ = timed(root, parts)
        walls.append(wall)
        cpus.append(cpu)
    walls.sort()
    p95 = max(0, int(len(walls) * 0.95) - 1)
    print(f"  {label:<12} {count:>3} found · first {first_wall * 1000:6.1f} ms · median "
          f"{statistics.median(walls) * 1000:6.1f} ms wall (p95 {walls[p95] * 1000:.1f}), "
          f"{statistics.median(cpus) * 1000:.1f} ms CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    opts = parser.parse_args()
    print(f"project start-up on {opts.files:,} files (+{opts.files // 5:,} ignored), "
          f"{opts.runs} runs each:")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_repo(root, opts.files)
        report("all of it", root, list(PARTS), opts.runs)
        for name in PARTS:
            report(name, root, [name], opts.runs)


if __name__ == "__main__":
    main()
