"""Undo's central promise, property-tested: after any mix of edit, write and bash operations
(``sed -i``, ``rm``, ``mv``, ``chmod``, new files, new folders, symlinks), undo gives back a
byte-identical tree, modes included, and redo gives back the changed one."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable.coding import Snapshots
from tests.coding.undo_helpers import fingerprint

NAMES = ["a.txt", "b.py", "sub/c.txt", "sub/deep/d.bin", "e", "sub/f.sh"]
CONTENT = st.binary(min_size=0, max_size=300) | st.text(max_size=200).map(str.encode)

ops = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), CONTENT),
    st.tuples(st.just("edit"), st.sampled_from(NAMES), st.text(alphabet="xyz\n", max_size=20)),
    st.tuples(st.just("sed"), st.sampled_from(NAMES), st.sampled_from(["a", "e", "1", "x"])),
    st.tuples(st.just("rm"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("mv"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("chmod"), st.sampled_from(NAMES), st.sampled_from(["600", "755", "444"])),
    st.tuples(st.just("chmod"), st.sampled_from(["sub", "sub/deep"]),
              st.sampled_from(["700", "750", "755"])),
    st.tuples(st.just("mkdir"), st.sampled_from(["new", "sub/new", "n/m/o"]), st.none()),
    st.tuples(st.just("symlink"), st.sampled_from(["l1", "sub/l2"]), st.sampled_from(NAMES)),
    st.tuples(st.just("rmdir"), st.sampled_from(["sub", "sub/deep", "new"]), st.none()),
)


def _apply(root: Path, op: tuple[str, str, object]) -> None:
    kind, name, arg = op
    path = root / name
    if kind == "write":  # what the write tool does: parents made, file replaced
        if path.is_dir() and not path.is_symlink():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        assert isinstance(arg, bytes)
        path.write_bytes(arg)
    elif kind == "edit":  # what the edit tool does: an existing file's text changed in place
        if path.is_file() and not path.is_symlink():
            path.write_bytes(path.read_bytes()[:40] + str(arg).encode())
    else:
        command = {
            "sed": f"sed -i s/{arg}/Q/g {shlex.quote(name)}",
            "rm": f"rm -f {shlex.quote(name)}",
            "mv": f"mv -f {shlex.quote(name)} {shlex.quote(str(arg))}",
            "chmod": f"chmod {arg} {shlex.quote(name)}",
            "mkdir": f"mkdir -p {shlex.quote(name)}",
            "symlink": f"mkdir -p $(dirname {shlex.quote(name)}) && "
                       f"ln -sfn {shlex.quote(str(arg))} {shlex.quote(name)}",
            "rmdir": f"rm -rf {shlex.quote(name)}",
        }[kind]
        subprocess.run(command, shell=True, cwd=root, capture_output=True, check=False)


def _seed(root: Path) -> None:
    for i, name in enumerate(NAMES[:4]):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(f"line {i}\nabc\n".encode() + bytes(range(i * 7)))
    os.chmod(root / "b.py", 0o755)
    os.symlink("a.txt", root / "link")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(turns=st.lists(st.lists(ops, min_size=1, max_size=5), min_size=1, max_size=3))
def test_undo_then_redo_gives_each_tree_back_byte_for_byte(turns: list[list[tuple[str, str, object]]]
                                                            ) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="steerable-undo-"))
    try:
        root, data = tmp / "ws", tmp / "data"
        root.mkdir()
        _seed(root)
        snaps = Snapshots(root, data)
        states = [fingerprint(root)]
        for t, turn in enumerate(turns):
            for c, op in enumerate(turn):
                snaps.snapshot("s", f"turn{t}", f"call{t}.{c}", op[0], "before")
                _apply(root, op)
                snaps.snapshot("s", f"turn{t}", f"call{t}.{c}", op[0], "after")
            states.append(fingerprint(root))
        changed = [i for i in range(len(turns)) if states[i] != states[i + 1]]
        # Undo one turn at a time: each gives back the tree as it was before that turn.
        for i in reversed(changed):
            snaps.undo("s")
            assert fingerprint(root) == states[i]
        assert fingerprint(root) == states[0]
        # Redo brings each turn back, in order.
        for i in changed:
            snaps.redo("s")
            assert fingerprint(root) == states[i + 1]
        # And undoing all of them at once equals undoing them one by one.
        if changed:
            snaps.undo("s", len(changed))
            assert fingerprint(root) == states[0]
    finally:
        shutil.rmtree(tmp)
