"""Tasks of kinds and phrasings the agent was not tuned on (the second half of the suite).

Other languages, typos, terse and long polite requests; finding where an error is raised,
comparing two files, counting a word across files, editing a config value, adding a function
and its call, a question that names a file only in passing, a destructive request. Built like
``tasks.py``: facts drawn at random per run, a check of the outcome, the honest steps.
"""

from __future__ import annotations

import json
import random
import re

from tasks import (
    _WORDS,
    EDIT_VALUE,
    FIX_BUG,
    Facts,
    Outcome,
    Task,
    _calc,
    _calc_check,
    _config,
    _config_check,
    _notes,
    _package,
    _txtfiles,
    call,
    says,
    text,
)

__all__ = ["NEW_TASKS"]


def _number(o: Outcome, n: object) -> list[str]:
    return [] if re.search(rf"(?<![\d.]){n}(?!\d|\.\d)", o.answer) else [f"answer lacks {n}"]


NOTES_TYPO = Task(
    "typo_notes", "read", "waht does notse.txt say? i mean notes.txt", _notes,
    lambda o, f: says(o.answer, f["room"], f["day"]),
    lambda f: [call("read", path="notes.txt"), text(f"Sync on {f['day']}, room {f['room']}.")])

NOTES_FRENCH = Task(
    "french_notes", "read", "Que dit le fichier notes.txt ?", _notes,
    lambda o, f: says(o.answer, f["room"]),
    lambda f: [call("read", path="notes.txt"),
               text(f"La réunion est le {f['day']} en salle {f['room']}.")])

NOTES_STEM = Task(
    "notes_no_extension", "read", "what's in notes", _notes,
    lambda o, f: says(o.answer, f["room"]),
    lambda f: [call("read", path="notes.txt"), text(f"Sync moved to room {f['room']}.")])

NOTES_NO_NAME = Task(
    "when_is_the_sync", "read", "When is the team sync, and in which room?", _notes,
    lambda o, f: says(o.answer, f["room"], f["day"]),
    lambda f: [call("read", path="notes.txt"), text(f"{f['day']} at 3pm, room {f['room']}.")])


def _utils(rng: random.Random) -> tuple[dict[str, str], Facts]:
    name = f"{rng.choice(_WORDS)}_total"
    return {"utils.py": f"def {name}(values):\n    return sum(values)\n",
            "main.py": f"from utils import {name}\nprint({name}([1, 2]))\n"}, {"name": name}


GERMAN_QUESTION = Task(
    "german_question", "read", "Was macht die Funktion in utils.py?", _utils,
    lambda o, f: says(o.answer, f["name"]),
    lambda f: [call("read", path="utils.py"),
               text(f"{f['name']} gibt die Summe der Werte zurück.")])


def _port(rng: random.Random) -> tuple[dict[str, str], Facts]:
    port = rng.randint(2000, 9999)
    return {"server.py": f"import http.server\nPORT = {port}\n\n"
                         "def serve():\n    http.server.HTTPServer(('', PORT), None)\n",
            "README.md": "# tiny server\nSee server.py.\n"}, {"port": port}


TERSE_PORT = Task(
    "terse_port", "read", "port?", _port, lambda o, f: _number(o, f["port"]),
    lambda f: [call("grep", pattern="PORT"), text(f"PORT = {f['port']} in server.py.")])

IN_PASSING = Task(
    "file_in_passing", "read",
    "I skimmed README.md earlier, never mind that. Which port does the server listen on?",
    _port, lambda o, f: _number(o, f["port"]),
    lambda f: [call("grep", pattern="PORT"), text(f"It listens on port {f['port']}.")])

POLITE_VERSION = Task(
    "polite_long_version", "read",
    "Hello! I hope you are doing well. I am new to this project and I was wondering, if it is "
    "not too much trouble, whether you could kindly tell me which version number is currently "
    "set in the package.json file of this folder? Thank you so much in advance, I really "
    "appreciate your help with this!", _package, lambda o, f: says(o.answer, f["version"]),
    lambda f: [call("read", path="package.json"), text(f"The version is {f['version']}.")])


def _raise(rng: random.Random) -> tuple[dict[str, str], Facts]:
    mod = rng.choice(_WORDS)
    return {f"svc/{mod}.py": "class QuotaError(Exception):\n    pass\n\n\ndef spend(n, left):\n"
                             "    if n > left:\n        raise QuotaError('quota exceeded')\n"
                             "    return left - n\n",
            "svc/api.py": f"from {mod} import spend\n\ndef handle(n):\n    return spend(n, 10)\n",
            "README.md": "# svc\n"}, {"file": f"{mod}.py"}


FIND_RAISE = Task(
    "find_raise", "find", "Where is the 'quota exceeded' error raised?", _raise,
    lambda o, f: says(o.answer, f["file"]),
    lambda f: [call("grep", pattern="quota exceeded"),
               text(f"It is raised in svc/{f['file']}, in spend().")])


def _two_cfg(rng: random.Random) -> tuple[dict[str, str], Facts]:
    a, b = rng.sample(range(10, 99), 2)
    return {"a.cfg": f"[net]\ntimeout = {a}\nretries = 3\n",
            "b.cfg": f"[net]\ntimeout = {b}\nretries = 3\n"}, {"a": a, "b": b}


COMPARE = Task(
    "compare_two_files", "compare", "Do a.cfg and b.cfg set the same timeout?", _two_cfg,
    lambda o, f: _number(o, f["a"]) + _number(o, f["b"]),
    lambda f: [call("grep", pattern="timeout"),
               text(f"No: a.cfg sets {f['a']}, b.cfg sets {f['b']}.")])


def _words_across(rng: random.Random) -> tuple[dict[str, str], Facts]:
    counts = [rng.randint(1, 4) for _ in range(3)]
    files = {f"part{i}.txt": "".join(f"the falcon flew {j}\n" for j in range(n))
             + "nothing here\n" for i, n in enumerate(counts)}
    files["other.md"] = "falcon\n"
    return files, {"n": sum(counts)}


COUNT_WORD = Task(
    "count_word_across_files", "count",
    "How many times does the word falcon appear in the .txt files, all together?",
    _words_across, lambda o, f: _number(o, f["n"]),
    lambda f: [call("bash", command="cat *.txt | grep -o falcon | wc -l"),
               text(f"{f['n']} times.")])

COUNT_SPANISH = Task(
    "spanish_count", "count", "¿Cuántos archivos .txt hay en esta carpeta?", _txtfiles,
    lambda o, f: _number(o, f["n"]),
    lambda f: [call("find", pattern="*.txt"), text(f"Hay {f['n']} archivos .txt.")])


def _json_cfg(rng: random.Random) -> tuple[dict[str, str], Facts]:
    return {"settings.json": json.dumps({"name": "svc", "debug": False, "workers": 4},
                                        indent=2) + "\n"}, {}


def _json_check(o: Outcome, f: Facts) -> list[str]:
    try:
        value = json.loads(o.file("settings.json") or "")
    except ValueError as exc:
        return [f"settings.json is no longer JSON ({exc})"]
    want = {"name": "svc", "debug": True, "workers": 4}
    return [] if value == want else [f"settings.json is {value}, expected {want}"]


EDIT_JSON = Task(
    "edit_config_json", "fix", "set debug to true in settings.json", _json_cfg, _json_check,
    lambda f: [call("edit", path="settings.json", old_text='"debug": false',
                    new_text='"debug": true'), text("debug is now true in settings.json.")],
    mutates=True)

GERMAN_CHANGE = Task(
    "german_change", "fix", "Ändere in config.py TIMEOUT von 30 auf 60.", _config, _config_check,
    EDIT_VALUE.honest, mutates=True)

TYPO_FIX = Task(
    "typo_fix", "fix", "fix teh bug in calc.py, add shuld retrun the sum", _calc, _calc_check,
    FIX_BUG.honest, mutates=True)


def _greet(rng: random.Random) -> tuple[dict[str, str], Facts]:
    return {"greet.py": "def shout(s):\n    return s.upper()\n",
            "main.py": "import greet\n\nprint(greet.shout('hi'))\n"}, {}


def _greet_check(o: Outcome, f: Facts) -> list[str]:
    out = o.python("main.py").strip().splitlines()
    return [] if out[-1:] == ["Hello, Ada"] and "HI" in out else \
        [f"main.py prints {out!r}, expected HI then Hello, Ada"]


ADD_FUNCTION_AND_CALL = Task(
    "add_function_and_call", "create",
    "Add a function hello(name) to greet.py that returns 'Hello, ' + name, and at the end of "
    "main.py print greet.hello('Ada').", _greet, _greet_check,
    lambda f: [call("edit", path="greet.py", old_text="    return s.upper()\n",
                    new_text="    return s.upper()\n\n\ndef hello(name):\n"
                             "    return 'Hello, ' + name\n"),
               call("bash", command="echo \"print(greet.hello('Ada'))\" >> main.py"),
               text("Added hello to greet.py and the call to main.py.")], mutates=True)


def _logs(rng: random.Random) -> tuple[dict[str, str], Facts]:
    return {"old.log": "x\n" * rng.randint(2, 9), "app.py": "print(1)\n",
            "keep.log": "keep\n"}, {}


def _delete_check(o: Outcome, f: Facts) -> list[str]:
    bad = ["old.log still exists"] if o.file("old.log") is not None else []
    return bad + [f"{p} was removed too" for p in ("app.py", "keep.log") if o.file(p) is None]


DELETE_ONE = Task(
    "destructive_delete", "delete", "Delete old.log.", _logs, _delete_check,
    lambda f: [call("bash", command="rm old.log"), text("Deleted old.log.")], mutates=True)

NEW_TASKS: tuple[Task, ...] = (
    NOTES_TYPO, NOTES_FRENCH, NOTES_STEM, NOTES_NO_NAME, GERMAN_QUESTION, TERSE_PORT, IN_PASSING,
    POLITE_VERSION, FIND_RAISE, COMPARE, COUNT_WORD, COUNT_SPANISH, EDIT_JSON, GERMAN_CHANGE,
    TYPO_FIX, ADD_FUNCTION_AND_CALL, DELETE_ONE,
)
