"""How well the model reads what a request asks for (the tool policy's classification).

    python bench/bench_classify.py [--model qwen2.5-coder-0.5b-instruct] [--limit N]

Sends every prompt of the task suite (both halves) plus variants in other languages and
phrasings through the policy's classification call (the same request the policy makes) and
prints, per group, how many were read as expected, every miss, and the wall time of one
classification (median after the first, which evaluates the cached prefix once). A request the
classification reads as a change is read a second time (``_confirm``), as the policy does: the
gate opens only when both agree. Printed: the questions that would open the gate with the first
reading alone and with both, the change requests that still open it, and the second reading's
added wall time. A change read as a look is safe (nothing is written, the turn says it changed
nothing); a look read as a change is the unsafe miss. ``--limit N`` takes the first N prompts
of each group.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tasks"))

from tasks_new import NEW_TASKS

from steerable._messages import Message
from steerable.cli._app import BASE_INSTRUCTIONS
from steerable.coding import Workspace, coding_tools
from steerable.coding._confirm import confirm_request, confirms
from steerable.coding.policy import classify_request, parse_kind
from steerable.providers._base import LLMRequest, TextDelta, ToolSpec
from steerable.providers.local import LocalModelProvider
from tasks import TASKS

_BY_KIND = {"read": "workspace", "find": "workspace", "count": "workspace", "compare": "workspace",
            "run": "run", "create": "change", "fix": "change", "rename": "change",
            "delete": "change", "answer": "general"}

EXTRA = [
    ("Qu'est-ce que fait la fonction dans utils.py ?", "workspace", "other language"),
    ("Wie viele Zeilen hat main.py?", "workspace", "other language"),
    ("¿Puedes borrar el archivo old.log?", "change", "other language"),
    ("Füge eine Zeile 'eggs' am Ende von shopping.txt hinzu.", "change", "other language"),
    ("Lance report.py et dis-moi ce qu'il affiche.", "run", "other language"),
    ("crete a file hello.py taht prints hi", "change", "typo"),
    ("whats teh value of MAX_RETRIES", "workspace", "typo"),
    ("rename get_usr -> get_user everywhere", "change", "terse"),
    ("todos?", "workspace", "terse"),
    ("run tests", "run", "terse"),
    ("Could you please, when you have a moment, have a look at calc.py and let me know whether "
     "the add function looks right to you? No need to change anything, thanks!", "workspace",
     "long polite"),
    ("Hi! Sorry to bother you. Would you mind updating the version in package.json to 2.0.0? "
     "Many thanks in advance for your help.", "change", "long polite"),
    ("What is 2 to the power of 10?", "general", "general"),
    ("Send the README to alice@example.com", "general", "impossible"),
    # Questions a small model may take for a change (arithmetic, concepts, questions about
    # changing), and terse, misspelt, polite and other-language change requests.
    ("What is 9 times 8?", "general", "general q"),
    ("Was ist 15 geteilt durch 3?", "general", "general q"),
    ("Combien font 7 + 6 ?", "general", "general q"),
    ("¿Qué es una función recursiva?", "general", "general q"),
    ("explain what a git commit is", "general", "general q"),
    ("How do I delete a branch in git?", "general", "general q"),
    ("whats the diffrence between a list and a tuple in python", "general", "general q"),
    ("whats 3+4", "general", "general q"),
    ("Qu'est-ce qu'une variable d'environnement ?", "general", "general q"),
    ("Hey, quick one: in plain words, what does it mean when a function is 'pure'? "
     "Thanks a lot, really appreciate it!", "general", "general q"),
    ("How would I rename a file on Linux?", "general", "general q"),
    ("Why do people write unit tests?", "general", "general q"),
    ("Come si scrive un ciclo for in Python?", "general", "general q"),
    ("capital of japan?", "general", "general q"),
    ("Does calc.py have a function that removes items?", "workspace", "workspace q"),
    ("Wo schreibt main.py in die Datei?", "workspace", "workspace q"),
    ("Is there a TODO about fixing the parser?", "workspace", "workspace q"),
    ("¿Qué valor tiene TIMEOUT en config.py?", "workspace", "workspace q"),
    ("notes.txt ?", "workspace", "workspace q"),
    ("What would I have to edit in config.py to raise the timeout? Don't edit it, just tell me.",
     "workspace", "workspace q"),
    ("Schreib eine Datei todo.txt mit dem Inhalt 'Milch kaufen'", "change", "change"),
    ("Crée un fichier bonjour.py qui affiche bonjour", "change", "change"),
    ("borra temp.txt", "change", "change"),
    ("add type hints to utils.py pls", "change", "change"),
    ("TIMEOUT=60 in config.py", "change", "change"),
    ("mk notes.md w/ 3 bullet points", "change", "change"),
    ("Would it be possible for you to add a short comment at the top of main.py explaining what "
     "it does? That would be lovely, thank you!", "change", "change"),
    ("rimuovi la riga 'debug' da app.ini", "change", "change"),
    ("Ersetze 'foo' durch 'bar' in allen .txt-Dateien", "change", "change"),
    ("please fxi the indentaton in loop.py", "change", "change"),
]


def cases() -> list[tuple[str, str, str]]:
    out = []
    for task in TASKS + NEW_TASKS:
        want = "general" if task.name == "impossible_request" else _BY_KIND.get(
            task.kind, "workspace")
        half = "tuned" if task in TASKS else "new"
        out.append((task.prompt, want, half))
    return out + EXTRA


async def _reply(provider: LocalModelProvider, request: LLMRequest) -> tuple[str, float]:
    started = time.perf_counter()
    text = []
    async for chunk in provider.stream(request):
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
    return "".join(text), time.perf_counter() - started


async def read(provider: LocalModelProvider, tools: tuple[ToolSpec, ...],
               prompt: str) -> tuple[str, bool | None, float, float | None]:
    """The first reading's kind, the second reading's verdict (None: not asked, the first did
    not read a change) and the wall time of each, as the policy makes them."""
    request = LLMRequest(messages=(Message("system", BASE_INSTRUCTIONS),
                                   Message("user", prompt)), tools=tools)
    text, first = await _reply(provider, classify_request(request))
    kind = parse_kind(text)
    if kind != "change":
        return kind, None, first, None
    text, second = await _reply(provider, confirm_request(request))
    return kind, confirms(text), first, second


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else float("nan")


class _Tally:
    def __init__(self) -> None:
        self.right: Counter[str] = Counter()
        self.total: Counter[str] = Counter()
        self.gate = Counter[str]()  # (question|change) x (first|both) opening the gate

    def add(self, prompt: str, want: str, group: str, kind: str, confirmed: bool | None) -> None:
        self.total[group] += 1
        self.right[group] += kind == want
        side = "change" if want == "change" else "question"
        self.gate[f"{side} first"] += kind == "change"
        self.gate[f"{side} both"] += bool(confirmed)
        self.gate[side] += 1
        if kind != want or (want == "change") != bool(confirmed):
            print(f"  miss [{group}] {prompt[:60]!r}: {kind}, second reading "
                  f"{'-' if confirmed is None else confirmed} (expected {want})", flush=True)

    def report(self) -> None:
        for group in self.total:
            print(f"{group:15} {self.right[group]}/{self.total[group]}")
        g = self.gate
        print(f"first reading {sum(self.right.values())}/{sum(self.total.values())} right; "
              f"questions that open the gate: first reading alone {g['question first']}/"
              f"{g['question']}, both readings {g['question both']}/{g['question']}; "
              f"changes that open it: first alone {g['change first']}/{g['change']}, both "
              f"{g['change both']}/{g['change']}")


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model")
    p.add_argument("--limit", type=int, help="the first N prompts of each group")
    args = p.parse_args(argv)
    provider = LocalModelProvider(model=args.model) if args.model else LocalModelProvider()
    tools = tuple(ToolSpec(t.name, t.description, t.parameters, t.read_only)
                  for t in coding_tools(Workspace(".")))
    tally = _Tally()
    firsts: list[float] = []
    seconds: list[float] = []
    try:
        for prompt, want, group in cases():
            if args.limit is not None and tally.total[group] >= args.limit:
                continue
            kind, confirmed, first, second = await read(provider, tools, prompt)
            firsts.append(first)
            seconds += [] if second is None else [second]
            tally.add(prompt, want, group, kind, confirmed)
    finally:
        await provider.aclose()
    tally.report()
    # The first of each kind of call evaluates its cached prefix once: left out of the median.
    print(f"per first reading: first {firsts[0]:.2f} s, then median {_median(firsts[1:]):.2f} s; "
          f"per second reading ({len(seconds)} asked): first {seconds[0] if seconds else 0:.2f} "
          f"s, then median {_median(seconds[1:]):.2f} s, worst {max(seconds[1:], default=0):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
