"""Walking paths beneath the workspace agrees with the kernel's own resolution, when no race.

Random trees of folders, files and links (relative, absolute, inside, outside, dangling, loops,
out and back in) and random paths through them: what the kernel opens inside the workspace, the
walk (``Workspace.kind``, component by component) finds at the same place, and what the kernel
finds outside the walk refuses; the walk never arrives outside the roots, and where it arrives
is where ``Workspace.resolve`` (the judgement permission rules see) says the path leads.

The semantics chosen: a path is inside when it *lands* inside, as ``realpath`` says, even if it
passes outside on the way (``../ws/a``; a link out to a link back in). That is what bash sees in
the sandbox, which shows the workspace at its own path, so a file tool refusing it would only
disagree with bash and with the permission rules, not protect anything: no open happens outside.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from steerable.coding import Workspace
from steerable.errors import ToolError

NAMES = ["a", "b", "c"]
TARGETS = ["a", "b", "../a", "..", ".", "c/a", "missing", "../../outside", "{root}/b",
           "{outside}", "{root}/../outside", "a/../b", "self",
           # Out and back in: through the root's parent, through a link outside to the root.
           "../ws/a", "../../ws/b", "{root}/../ws/a", "{outside}/back/b", "../outside/back/a",
           "{outside}/../ws"]
ENTRY = st.tuples(st.sampled_from(["", "a/", "b/", "a/a/"]), st.sampled_from(NAMES),
                  st.sampled_from(["dir", "file"] + [f"link:{t}" for t in TARGETS]))
PATHS = st.lists(st.sampled_from([*NAMES, "..", ".", "x", "ws", "outside", "back"]), min_size=1,
                 max_size=5)


def _build(base: Path, entries: list[tuple[str, str, str]]) -> tuple[Path, Path]:
    root, outside = base / "ws", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "a").write_text("OUT")
    os.symlink(root, outside / "back")  # a way back in from outside
    for folder, name, kind in entries:
        parent = root / folder
        if not parent.is_dir() or os.path.lexists(parent / name):
            continue
        if kind == "dir":
            (parent / name).mkdir()
        elif kind == "file":
            (parent / name).write_text("IN")
        else:
            target = kind.removeprefix("link:").format(root=root, outside=outside)
            os.symlink(name if target == "self" else target, parent / name)
    return root, outside


@settings(max_examples=int(os.environ.get("STEERABLE_BENEATH_EXAMPLES", "300")), deadline=None)
@given(entries=st.lists(ENTRY, max_size=12), paths=st.lists(PATHS, min_size=1, max_size=6))
def test_the_walk_agrees_with_realpath(entries: list[tuple[str, str, str]],
                                       paths: list[list[str]]) -> None:
    base = Path(tempfile.mkdtemp())
    try:
        root, outside = _build(base, entries)
        ws = Workspace(root)
        for parts in paths:
            path = "/".join(parts)
            # The kernel's view: the path opens (every component exists), and where it lands.
            real = Path(os.path.realpath(root / path))
            real_inside = os.path.exists(root / path) and real.is_relative_to(root)
            try:
                walked, _ = ws.kind(path)
            except (ToolError, OSError):
                assert not real_inside, (path, real)
                continue
            assert walked.is_relative_to(root), (path, walked)
            assert ws.resolve(path) == walked, (path, walked)
            if real_inside:
                assert walked == real, (path, walked, real)
    finally:
        shutil.rmtree(base)
