"""Shell permission rules fail closed: what the reader does not fully understand is asked.

The oracle of the fuzz test is bash itself: every generated line that the rules would let run
without asking is run by bash, with a PATH of logging stand-ins, and must never start the
command the rules did not cover.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from steerable import Permission, Permissions
from steerable.coding._shell import command_subjects, read_command_line
from steerable.tools import UncoveredSubject

ALLOW_GIT = Permissions([("allow", "bash(git *)")])
ALLOW_ALL_DENY_PWNED = Permissions([("allow", "bash"), ("deny", "bash(*pwned*)")])


def decide(perms: Permissions, line: str) -> Permission:
    return perms.decide("bash", command_subjects(line), read_only=False)[0]


# Each of these once let (or could let) text after it escape an allow rule: all are asked now.
ESCAPES = [
    "git status # it's fine\npwned",
    "git status # a comment with a \"quote\npwned",
    "git log $'\\''; pwned '",
    "git log $\"x\"; pwned",
    "git status \\\n#'\npwned '",
    "git log <<EOF\nhi\nEOF\npwned",
    "git log <<'EOF'\n$(pwned)\nEOF",
    "git log > ~/.bashrc",
    "git log &> out.txt",
    "git log 2> err.txt",
    "git log >| out",
    "git log <> f",
    "git log $((1 + $(pwned)))",
    "git log ${x:-$(pwned)}",
    "git diff <(pwned)",
    "git log; eval \"$X\"",
    "git log; bash -c \"$X\"",
    "git log; for f in *; do pwned; done",
    "git log; { pwned; }",
    "git log; if true; then pwned; fi",
    "git log; case x in x) pwned;; esac",
    "git log; f() { pwned; }; f",
    "git log; [[ -n x ]] && pwned",
    "git log 'unclosed",
    "git log \"unclosed",
    "git log $(unclosed",
    "git log `unclosed",
    "git log; $CMD",
    "git log; $(echo pwned)",
    "git log \\",
    # bash reads these after its own first steps: continuations, aliases, expansions
    "git log 'a\\\n'; pwned '",
    "git log # a \\\npwned",
    "shopt -s expand_aliases\nalias git='p\\wned'\ngit log",
    "git log; p{w,}ned",
    "git log; pw*",
    "git log; env pwne?",
]


@pytest.mark.parametrize("line", ESCAPES)
def test_constructs_not_understood_are_never_allowed(line: str) -> None:
    reading = read_command_line(line)
    assert decide(ALLOW_GIT, line) is Permission.ASK, reading
    assert decide(ALLOW_ALL_DENY_PWNED, line) is not Permission.ALLOW, reading


def test_a_continuation_is_removed_before_the_line_is_read() -> None:
    line = 'git status "$\\\n(touch P)"'  # bash runs `touch P`
    assert "touch P" in command_subjects(line)
    assert decide(Permissions([("allow", "bash(git status*)")]), line) is Permission.ASK
    deny = Permissions([("allow", "bash"), ("deny", "bash(touch *)")])
    assert decide(deny, line) is Permission.DENY
    for split in ("$\\\n(touch P)", "`touch P`", "; tou\\\nch P", "&\\\n& touch P"):
        assert decide(deny, f"git status {split}") is Permission.DENY, split


@pytest.mark.parametrize(("line", "inner"), [
    ("git log; bash -c 'pwned -x'", "pwned -x"),
    ("git log; sh -ec \"pwned\"", "pwned"),
    ("git log; eval 'pwned; true'", "pwned"),
    ("git log | xargs pwned", "pwned"),
    ("env A=1 B=2 pwned --now", "pwned --now"),
    ("timeout 5 pwned", "pwned"),
    ("sudo -u root pwned", "pwned"),
    ("find . -name x -exec pwned {} \\;", "pwned {}"),
    ("p\\wned", "pwned"),
    ("pw''ned", "pwned"),
    ('"pwned" now', "pwned now"),
    ("(cd x && pwned)", "pwned"),
    ("echo $(pwned)", "pwned"),
    ("echo \"`pwned`\"", "pwned"),
])
def test_hidden_commands_are_subjects(line: str, inner: str) -> None:
    subjects = command_subjects(line)
    assert inner in subjects and not any(isinstance(s, UncoveredSubject) for s in subjects)
    assert decide(ALLOW_GIT, line) is Permission.ASK
    assert decide(ALLOW_ALL_DENY_PWNED, line) is Permission.DENY


@pytest.mark.parametrize("line", [
    "git status",
    "git log --oneline | git shortlog",
    "git diff 2>&1",
    "git diff 2>/dev/null && git status",
    "git log < /dev/null",
    "git log <<< hi",
    "git commit -m 'a; b' # the message has a ;",
    "git commit -m \"it's $USER ${HOME}\"",
    "git st\\\natus",
    "GIT_PAGER= git log",  # an assignment prefix is not covered by `git *`...
])
def test_understood_lines(line: str) -> None:
    reading = read_command_line(line)
    assert reading.unsure is None
    expected = Permission.ASK if line.startswith("GIT_PAGER") else Permission.ALLOW
    assert decide(ALLOW_GIT, line) is expected


def test_an_unconditional_allow_still_asks_a_line_deny_rules_cannot_read() -> None:
    perms = Permissions([("allow", "bash"), ("deny", "bash(rm *)")])
    assert decide(perms, "echo $'x'; rm -rf /") is Permission.ASK
    assert decide(Permissions([("allow", "bash")]), "echo $'x'; rm -rf /") is Permission.ALLOW


# -- fuzzing against bash itself --------------------------------------------------------------

FRAGMENTS = [
    " ", "\t", "\n", ";", "&&", "||", "|", "&", "|&", "#", "# it's", "'", '"', "\\", "\\\n",
    "$'\\''", "$'x'", "$(", ")", "`", "(", "{", "}", "<<EOF\n", "EOF\n", "<<'EOF'\n", "<<<",
    ">", ">/dev/null", "2>&1", "&>", "$((1))", "${x:-", "${x}", "$x", "x=pwned", "eval",
    "bash -c", "sh -c", "'pwned'", '"pwned"', "echo", "if true; then", "fi", "for a in b; do",
    "done", "case x in x)", ";;", "esac", "!", "[[", "]]", "<(", "git", "status", "p\\wned",
    "pw''ned", "env", "xargs", "\r", "pwned", "pwned", "pwned", "true", "-c", "$",
    # what bash does to words before running them: aliases, brace expansion, globs (the work
    # folder holds a file named pwned, so `pw*` becomes that name)
    "shopt -s expand_aliases\n", "alias git=pw\\ned\n", "alias", "p{w,}ned", "{pwned,x}",
    "pw*", "pwne?", "[p]wned", "'\\", "$\\\n(", '"$(pwned)"', "$(pwned)", '"`pwned`"',
    "${pwned}", "2>&1|pwned",
]


# Words the reader understands, so that more generated lines are allowed and run by bash.
PLAIN = ["x", "-v", "'a b'", '"a b"', '"$x"', "$x", "2>&1", ">/dev/null", "\\x", '"\\$"',
         "a=b", "--", "$(git log)", "`git log`", '"$(git log)"', "(git log)", "|| git log",
         "; git log", "\n"]
WORDS = st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(PLAIN))

# The payload inside constructs the reader understands: a continuation must not hide it.
PAYLOADS = ['"$(pwned)"', "$(pwned)", "`pwned`", '"`pwned`"', "; pwned", "|pwned", "&&pwned",
            "(pwned)", "p\\wned", "pw''ned", "# x\npwned", "x=$(pwned)", "<<<$(pwned)",
            "2>&1 | pwned", "&pwned"]
CONTINUATION_WORDS = st.one_of(st.sampled_from(PLAIN), st.sampled_from(PAYLOADS),
                               st.sampled_from(FRAGMENTS))

TAILS = ["\npwned", "; pwned", " pwned", "\npwned '", "\npwned \"", "\npwned `", "\npwned )",
         "\npwned #'", "", " \\\npwned", "&pwned", "|pwned"]


@pytest.fixture(scope="module")
def shims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PATH with logging stand-ins for git and pwned (and real shells and wrappers)."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name in ("git", "pwned"):
        script = bin_dir / name
        script.write_text(f'#!/bin/bash\necho {name} >> "$SHIM_LOG"\n')
        script.chmod(0o755)
    for name, target in (("bash", "/bin/bash"), ("sh", "/bin/bash"), ("env", "/usr/bin/env"),
                         ("xargs", "/usr/bin/xargs")):
        (bin_dir / name).symlink_to(target)
    return bin_dir


def ran(shims: Path, work: Path, line: str) -> list[str]:
    (work / "pwned").touch()  # a file for globs to find (not executable: PATH still decides)
    log = work / "log"
    log.unlink(missing_ok=True)
    env = {"PATH": str(shims), "SHIM_LOG": str(log), "HOME": str(work)}
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(["/bin/bash", "-c", line], cwd=work, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5,
                       check=False)
    return log.read_text().split() if log.exists() else []


FUZZ_COUNTS = {"lines": 0, "allowed_run": 0, "continuation_lines": 0, "continuation_run": 0}


def _report() -> None:
    report = os.environ.get("STEERABLE_FUZZ_REPORT")  # the figures for the closing note
    if report:
        Path(report).write_text(f"{FUZZ_COUNTS}\n")


def _check_line(shims: Path, work: Path, line: str, counts: tuple[str, str]) -> None:
    FUZZ_COUNTS[counts[0]] += 1
    if decide(ALLOW_GIT, line) is Permission.ALLOW:
        FUZZ_COUNTS[counts[1]] += 1
        assert set(ran(shims, work, line)) <= {"git"}, (line, command_subjects(line))
    if decide(ALLOW_ALL_DENY_PWNED, line) is Permission.ALLOW:
        FUZZ_COUNTS[counts[1]] += 1
        assert "pwned" not in ran(shims, work, line), (line, command_subjects(line))


@settings(max_examples=int(os.environ.get("STEERABLE_FUZZ_EXAMPLES", "400")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(parts=st.lists(WORDS, min_size=1, max_size=6),
       joiners=st.lists(st.sampled_from(["", " "]), min_size=6, max_size=6),
       tail=st.sampled_from(TAILS))
def test_fuzz_no_allowed_line_runs_what_was_not_allowed(
    shims: Path, tmp_path: Path, parts: list[str], joiners: list[str], tail: str
) -> None:
    # A construct, then the payload after it: the shape of every escape found so far.
    line = "git status " + "".join(j + p for j, p in zip(joiners, parts, strict=False)) + tail
    _check_line(shims, tmp_path, line, ("lines", "allowed_run"))
    _report()


CONTINUATION = "\\\n"


@pytest.mark.parametrize("line", [*ESCAPES, 'git status "$(pwned)"', "git status; pwned",
                                  "git status `pwned`", "git log 2>&1 >/dev/null | pwned"])
def test_a_continuation_anywhere_in_a_known_line_is_read_as_bash_reads_it(
    shims: Path, tmp_path: Path, line: str
) -> None:
    for i in range(len(line) + 1):
        _check_line(shims, tmp_path, line[:i] + CONTINUATION + line[i:],
                    ("continuation_lines", "continuation_run"))
    _report()


@settings(max_examples=int(os.environ.get("STEERABLE_FUZZ_CONTINUATION_EXAMPLES", "60")),
          deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(parts=st.lists(CONTINUATION_WORDS, min_size=1, max_size=4),
       joiners=st.lists(st.sampled_from(["", " "]), min_size=4, max_size=4),
       tail=st.one_of(st.just(""), st.sampled_from(TAILS)),
       extra=st.integers(min_value=0, max_value=200))
def test_fuzz_a_continuation_at_every_position(
    shims: Path, tmp_path: Path, parts: list[str], joiners: list[str], tail: str, extra: int
) -> None:
    # Bash removes backslash-newline before reading words (not inside single quotes or a
    # comment), so a continuation may split any token: try one at every position, and a
    # second one at another position too.
    line = "git status " + "".join(j + p for j, p in zip(joiners, parts, strict=False)) + tail
    for i in range(len(line) + 1):
        once = line[:i] + CONTINUATION + line[i:]
        _check_line(shims, tmp_path, once, ("continuation_lines", "continuation_run"))
        j = extra % (len(once) + 1)
        _check_line(shims, tmp_path, once[:j] + CONTINUATION + once[j:],
                    ("continuation_lines", "continuation_run"))
    _report()
