"""The path tools against a real process swapping links inside the workspace.

A racer (another process, as a build or an editor would be) keeps flipping ``ws/d`` between a
real folder and a link to a folder outside, and ``ws/l`` between a link inside and a link
outside. Thousands of reads, listings, searches and writes run meanwhile: each may be refused,
none may read, list or write anything outside.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from steerable.coding import Sandbox, Workspace, coding_tools
from steerable.tools import FunctionTool
from tests.coding.conftest import call

RACER = textwrap.dedent("""
    import os, shutil, sys
    ws, outside = sys.argv[1], sys.argv[2]
    d, aside, link, tmp = (os.path.join(ws, n) for n in ("d", "d.aside", "l", "l.tmp"))
    inside_target = os.path.join(ws, "real")
    print("ready", flush=True)
    while True:
        try:  # a tool may create `d` while it is away: keep flipping whatever happens
            os.rename(d, aside)                  # d: a real folder ...
            os.symlink(outside, d)               # ... then a link out of the workspace
            os.symlink(outside, tmp)
            os.replace(tmp, link)                # l: a link out ...
            os.unlink(d)
            os.rename(aside, d)
            os.symlink(inside_target, tmp)
            os.replace(tmp, link)                # ... then a link to a folder inside
        except OSError:
            try:  # put things back; a tool may be writing meanwhile, so this may fail too
                for stale in (tmp, d if os.path.islink(d) else ""):
                    if stale and os.path.lexists(stale):
                        os.unlink(stale)
                if os.path.isdir(aside):
                    if os.path.isdir(d) and not os.path.islink(d):
                        shutil.rmtree(d)         # made by a write while the real one was away
                    os.rename(aside, d)
            except OSError:
                pass
""")


@pytest.fixture
def raced(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    for folder, word in ((ws / "d", "INSIDE"), (ws / "real", "INSIDE"), (outside, "OUTSIDE")):
        folder.mkdir(parents=True)
        (folder / "f.txt").write_text(f"{word} text\n")
    os.symlink(ws / "real", ws / "l")
    racer = subprocess.Popen([sys.executable, "-c", RACER, str(ws), str(outside)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert racer.stdout is not None and racer.stdout.readline().strip() == "ready"
        yield ws, outside
        assert racer.poll() is None, f"the racer stopped: {racer.communicate()[1]}"
    finally:
        racer.kill()
        racer.wait()
        assert racer.stdout is not None and racer.stderr is not None
        racer.stdout.close()
        racer.stderr.close()


def _tools(ws: Path) -> dict[str, FunctionTool]:
    return {t.name: t for t in coding_tools(Workspace(ws), use_ripgrep=False,
                                            sandbox=Sandbox(enabled=False))}


READS = int(os.environ.get("STEERABLE_RACE_READS", "1500"))


async def test_reads_never_land_outside_while_links_are_swapped(raced: tuple[Path, Path]) -> None:
    ws, outside = raced
    tools = _tools(ws)
    seen = {"inside": 0, "refused": 0}
    for i in range(READS):
        res = await call(tools["read"], path="d/f.txt" if i % 2 else "l/f.txt")
        assert "OUTSIDE" not in res.content, res.content
        seen["inside" if "INSIDE" in res.content else "refused"] += 1
    assert seen["inside"] > 0 and seen["refused"] > 0, seen  # the race was really on


async def test_listings_and_searches_never_show_outside(raced: tuple[Path, Path]) -> None:
    ws, outside = raced
    (outside / "outside-only.txt").write_text("OUTSIDE")
    tools = _tools(ws)
    for i in range(READS // 5):
        for res in (await call(tools["ls"], path="d" if i % 2 else "l"),
                    await call(tools["grep"], pattern="text|OUTSIDE", path="." if i % 3 else "d"),
                    await call(tools["find"], pattern="*.txt", path="l" if i % 2 else ".")):
            assert "OUTSIDE" not in res.content and "outside-only" not in res.content, res.content


async def test_writes_never_land_outside(raced: tuple[Path, Path]) -> None:
    ws, outside = raced
    tools = _tools(ws)
    for i in range(READS // 3):
        await call(tools["write"], path=f"d/new{i % 7}.txt", content="x")
        await call(tools["write"], path=f"l/sub/new{i % 5}.txt", content="x")
        await call(tools["edit"], path="l/f.txt", old_text="text", new_text="text")
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "OUTSIDE text\n"
