"""What the repository tracks: source, tests, docs and benchmarks, never a virtualenv (even a
link to one), a cache, build output, model weights or a stray file a test wrote."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOP = {".ci", ".gitignore", "README.md", "bench", "constraints.txt", "docs", "examples", "mkdocs.yml",
       "pyproject.toml", "src", "tests"}
"""Every top-level entry the project tracks; a new one is added here on purpose."""
MAX_BYTES = 1_000_000


def _tracked() -> list[tuple[str, str]]:
    """``(mode, path)`` of every tracked file."""
    try:
        out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an unpacked archive): nothing to check")
    rows = []
    for entry in filter(None, out.split("\0")):
        meta, path = entry.split("\t", 1)
        rows.append((meta.split()[0], path))
    return rows


def test_only_the_projects_own_top_level_entries_are_tracked() -> None:
    stray = sorted({path.split("/", 1)[0] for _, path in _tracked()} - TOP)
    assert not stray, f"tracked at the top level but not part of the project: {stray}"


def test_no_link_and_no_large_file_is_tracked() -> None:
    links = [path for mode, path in _tracked() if mode == "120000"]
    assert not links, f"symbolic links are tracked (a linked .venv?): {links}"
    big = [path for _, path in _tracked()
           if (ROOT / path).is_file() and (ROOT / path).stat().st_size > MAX_BYTES]
    assert not big, f"files over {MAX_BYTES:,} bytes are tracked (weights, build output?): {big}"


def test_nothing_gitignore_excludes_is_tracked() -> None:
    _tracked()  # (skips outside a checkout)
    out = subprocess.run(["git", "ls-files", "-ci", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    assert not out, f"tracked although .gitignore excludes them: {out}"
