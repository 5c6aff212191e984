"""The tool policy's looks at the workspace (``_reads``): recorded reads, which pass through
their JSON form (a workflow's history), answer what the direct reads answer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from steerable.coding.policy import DirectReads, RecordedReads, read_functions


def _through_json(root: Path) -> Callable[[str], Callable[..., Awaitable[Any]]]:
    """``workflow_read`` as a history sees it: JSON arguments in, a JSON result out."""
    functions = read_functions(root)

    def read(name: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any) -> Any:
            return json.loads(json.dumps(functions[name](*json.loads(json.dumps(args)))))
        return call

    return read


async def test_recorded_reads_answer_what_direct_reads_answer(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("x = 1\n")
    (tmp_path / "conf.json").write_text("{broken")
    (tmp_path / "empty.txt").write_text("")
    direct, recorded = DirectReads(tmp_path), RecordedReads(_through_json(tmp_path))
    for reads in (direct, recorded):
        start = await reads.start("fix src/app.py and conf.json")
        assert start.names == ("src/app.py", "conf.json")
        assert start.files["src/app.py"] == (6, (tmp_path / "src/app.py").stat().st_mtime_ns)
        assert not start.changed(await reads.snapshot(start.names))
    assert await recorded.start("fix src/app.py") == await direct.start("fix src/app.py")
    names = ["src/app.py", "conf.json", "gone.txt"]
    assert await recorded.snapshot(names) == await direct.snapshot(names)
    assert await recorded.names() == await direct.names() and "app" in await direct.names()
    assert await recorded.paths() == await direct.paths() == {
        "files": ["conf.json", "empty.txt", "src/app.py"], "folders": [".", "src"]}
    for name, parses in [("src/app.py", True), ("conf.json", False), ("gone.txt", True)]:
        assert await recorded.parses(name) is await direct.parses(name) is parses
    for path, rel in [("./src/../src/app.py", "src/app.py"), ("../outside", None)]:
        assert await recorded.relative(path) == await direct.relative(path) == rel
    for path, rel in [("src/app.py", "src/app.py"), ("empty.txt", None), ("src", None)]:
        assert await recorded.non_empty_file(path) == await direct.non_empty_file(path) == rel
