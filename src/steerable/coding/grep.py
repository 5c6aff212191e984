"""``grep``: search file contents with a regular expression.

Uses ripgrep when it is installed (fast on big trees) and bubblewrap can confine it to the
workspace (ripgrep opens files by path name, so a folder swapped for a link during its walk would
lead it outside; inside the sandbox there is no outside), and a pure-Python walk beneath the
workspace otherwise (``_walk``). Both respect .gitignore, skip .git and binary files, and print ``path:line: text``. The two engines
speak slightly different regex dialects (Rust's and Python's); the common subset is what models
write anyway.

The rows end with a count of the matches: in all, by kind of file and by file (as ``ls``
counts its entries). Small models miscount a list: asked how often "falcon" appears in the .txt
files, the 1.5B had the eight matching lines in front of it (seven in .txt files, one in a .md)
and answered with the steps of a count instead; a tool that states the number leaves it only
to be copied. With several kinds of file, each figure says what it covers on a line of its own
(``match_counts``), so the part a question is about is never read off the whole.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from steerable._messages import ToolResult
from steerable.coding._missing import missing
from steerable.coding._sandbox import confine_reader
from steerable.coding._walk import FOUND_NOTHING, glob_to_regex, read_walked, walk_files
from steerable.coding._workspace import Workspace
from steerable.errors import ToolError
from steerable.tools import FunctionTool, ToolContext, tool

__all__ = ["make_grep_tool"]

MAX_RESULTS = 200
MAX_LINE = 300
MAX_FILE_BYTES = 5 * 1024 * 1024
RG_TIMEOUT = 60.0
MAX_FILES_COUNTED = 20
"""The most files the count line names one by one."""


def _clip(line: str) -> str:
    line = line.rstrip("\r\n")
    return line if len(line) <= MAX_LINE else line[:MAX_LINE] + " [...]"


def _python_grep(ws: Workspace, path: str, regex: re.Pattern[str], glob: str | None,
                 limit: int, ctx: ToolContext) -> tuple[list[str], bool]:
    name_filter = None
    if glob:
        body = glob_to_regex(glob)
        name_filter = re.compile(("^" if "/" in glob else "^(?:.*/)?") + body + "$")
    hits: list[str] = []
    for file in walk_files(ws, path, refused=ctx.refuses):
        if ctx.cancelled.is_set():
            break
        if name_filter is not None and not name_filter.match(file.rel):
            continue
        data = read_walked(ws, file, MAX_FILE_BYTES)
        if data is None or b"\x00" in data[:8192]:
            continue
        shown = ws.display(file.path)
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if regex.search(line):
                if len(hits) == limit:
                    return hits, True
                hits.append(f"{shown}:{number}: {_clip(line)}")
    return hits, False


def _refused(ctx: ToolContext, path: str) -> bool:
    """A file rg found is left out when a rule names it or any folder above it."""
    parts = path.split("/")
    return any(ctx.refuses("/".join(parts[:n])) for n in range(len(parts), 0, -1))


def _rg_grep(rg: str, ws: Workspace, start: Path, pattern: str, glob: str | None,
             ignore_case: bool, limit: int, ctx: ToolContext) -> tuple[list[str], bool]:
    target = ws.display(start)
    args = [rg, "--line-number", "--no-heading", "--with-filename", "--color=never",
            "--hidden", "--no-require-git", "--glob", "!.git", "--no-messages"]
    if ignore_case:
        args.append("--ignore-case")
    if glob:
        # A file type, not --glob: rg's --glob overrides .gitignore, a type does not.
        args += ["--type-add", f"steerable:{glob}", "--type", "steerable"]
    args += ["--regexp", pattern, "--", target]
    hits: list[str] = []
    more = False
    confined = confine_reader(args, ws.roots, ws.root)
    if confined is None:
        return _python_grep(ws, target, re.compile(pattern, re.IGNORECASE if ignore_case else 0),
                            glob, limit, ctx)
    with subprocess.Popen(confined, cwd=ws.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True, errors="replace") as proc:
        assert proc.stdout is not None and proc.stderr is not None
        for raw in proc.stdout:
            if len(hits) == limit:
                more = True
                proc.kill()
                break
            path, _, rest = raw.partition(":")
            number, _, text = rest.partition(":")
            path = path[2:] if path.startswith("./") else path
            if _refused(ctx, path):
                continue
            hits.append(f"{path}:{number}: {_clip(text)}")
        err = proc.stderr.read()
        code = proc.wait(timeout=RG_TIMEOUT)
    if code == 2 and not hits and not more:
        raise ToolError(f"grep failed: {err.strip().splitlines()[0] if err.strip() else 'rg error'}")
    hits.sort(key=lambda h: h.split(":", 1)[0])  # rg runs in parallel: make the order stable
    return hits, more


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 'es' if word.endswith('ch') else 's'}"


def match_counts(hits: list[str], regex: re.Pattern[str]) -> str:
    """The count under ``hits`` (``path:line: text`` rows): the matches in all, by file when
    there are several files, and with several kinds (extensions) the whole first, then a line
    per kind with its files. Measured with the 1.5B (2026-12-08), asked how often a word
    appears "in the .txt files, all together": with the whole last ("in all: 8 matches"), or
    last and naming the kinds it sums ("in the .md and .txt files together"), it answered the
    whole on every seed; stated first as what the kind lines divide ("8 matches in 4 files, of
    which:"), it answered the .txt line's 7."""
    by_file: dict[str, int] = {}
    for hit in hits:
        path, _, rest = hit.partition(":")
        # rg's dialect may differ from Python's: a line it matched holds at least one match.
        # An empty match is no match a reader counts: `.*` matches each line and the empty
        # string after it, and "one.py 12" for a file of 6 lines drew a count of its steps
        # from the 1.5B asked for the lines of each .py file.
        found = max(1, sum(1 for m in regex.finditer(rest.partition(": ")[2]) if m.group(0)))
        by_file[path] = by_file.get(path, 0) + found
    by_kind: dict[str, int] = {}
    for path, n in by_file.items():
        kind = os.path.splitext(path)[1] or "(no extension)"
        by_kind[kind] = by_kind.get(kind, 0) + n
    total = sum(by_file.values())
    whole = (_plural(total, "match") + (f" on {_plural(len(hits), 'line')}"
                                         if total != len(hits) else "")
             + f" in {_plural(len(by_file), 'file')}")
    if len(by_kind) > 1:
        return "\n".join([f"{whole}, of which:", *_kind_lines(by_file, by_kind)])
    if 1 < len(by_file) <= MAX_FILES_COUNTED:
        return "matches by file: " + ", ".join(f"{p} {n}" for p, n in by_file.items()) \
            + f"; in all: {whole}"
    return whole


def _kind_lines(by_file: dict[str, int], by_kind: dict[str, int]) -> list[str]:
    """One line per kind of file, scoped as a question scopes it ("in the .txt files only"),
    its figure first and its files after it (on one line, "by kind: .txt 7, .md 1; by file:
    ...", the figures of the kinds and of the files ran together)."""
    lines = []
    for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        files = [f"{p} {c}" for p, c in by_file.items()
                 if (os.path.splitext(p)[1] or "(no extension)") == kind]
        shown = f" ({', '.join(files)})" if len(by_file) <= MAX_FILES_COUNTED else ""
        lines.append(f"in the {kind} files only: {_plural(n, 'match')}{shown}")
    return lines


def make_grep_tool(ws: Workspace, *, use_ripgrep: bool = True,
                   max_results: int = MAX_RESULTS) -> FunctionTool:
    rg = shutil.which("rg") if use_ripgrep else None

    @tool(name="grep", read_only=True, permission_key="path", permission_family="read",
          permission_subjects=ws.path_subjects)
    def grep(pattern: str, ctx: ToolContext, path: str = ".", glob: str | None = None,
             ignore_case: bool = False) -> str | ToolResult:
        """Search file contents with a regular expression (e.g. TODO, 'class Name'); prints
        path:line: text.

        Args:
            pattern: Regular expression to look for.
            path: File or folder to search, relative to the workspace root.
            glob: Only search files matching this glob, e.g. '*.py'.
            ignore_case: Match without regard to case.
        """
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        try:
            start, is_dir = ws.kind(path)
        except FileNotFoundError:
            raise missing(ws, path, ctx.refuses) from None
        # rg file types match names only, so a glob with a folder in it goes to Python.
        if rg is not None and is_dir and "/" not in (glob or ""):
            hits, more = _rg_grep(rg, ws, start, pattern, glob, ignore_case, max_results, ctx)
        else:
            hits, more = _python_grep(ws, path, regex, glob, max_results, ctx)
        if not hits:
            return ToolResult(f"No matches for {pattern!r} under {ws.display(start)}.",
                              metadata={FOUND_NOTHING: True})
        if more:
            hits.append(f"[stopped at {max_results} matches; narrow the pattern or path]")
        else:
            hits.append(match_counts(hits, regex))
        return "\n".join(hits)

    return grep
