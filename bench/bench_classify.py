"""How well the model reads what a request asks for (the tool policy's classification).

    python bench/bench_classify.py [--model qwen2.5-coder-0.5b-instruct] [--limit N]

Sends every prompt of the task suite (both halves) plus variants in other languages and
phrasings through the policy's classification call (the same request the policy makes) and
prints, per group, how many were read as expected, every miss, and the wall time of one
classification (median and worst after the first, which evaluates the cached prefix once).
A change read as a look is safe (nothing is written, the turn says it changed nothing); a look
read as a change is the unsafe miss. ``--limit N`` takes the first N prompts of each group.
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
]


def cases() -> list[tuple[str, str, str]]:
    out = []
    for task in TASKS + NEW_TASKS:
        want = "general" if task.name == "impossible_request" else _BY_KIND.get(
            task.kind, "workspace")
        half = "tuned" if task in TASKS else "new"
        out.append((task.prompt, want, half))
    return out + EXTRA


async def classify(provider: LocalModelProvider, tools: tuple[ToolSpec, ...],
                   prompt: str) -> str:
    request = LLMRequest(messages=(Message("system", BASE_INSTRUCTIONS),
                                   Message("user", prompt)), tools=tools)
    text = []
    async for chunk in provider.stream(classify_request(request)):
        if isinstance(chunk, TextDelta):
            text.append(chunk.text)
    return parse_kind("".join(text))


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model")
    p.add_argument("--limit", type=int, help="the first N prompts of each group")
    args = p.parse_args(argv)
    provider = LocalModelProvider(model=args.model) if args.model else LocalModelProvider()
    tools = tuple(ToolSpec(t.name, t.description, t.parameters, t.read_only)
                  for t in coding_tools(Workspace(".")))
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    unsafe = 0
    walls = []
    try:
        for prompt, want, group in cases():
            if args.limit is not None and total[group] >= args.limit:
                continue
            started = time.perf_counter()
            got = await classify(provider, tools, prompt)
            walls.append(time.perf_counter() - started)
            total[group] += 1
            right[group] += got == want
            unsafe += got == "change" and want != "change"
            if got != want:
                print(f"  miss [{group}] {prompt[:60]!r}: {got} (expected {want})", flush=True)
    finally:
        await provider.aclose()
    for group in total:
        print(f"{group:15} {right[group]}/{total[group]}")
    first, warm = walls[0], sorted(walls[1:]) or walls
    print(f"all {sum(right.values())}/{sum(total.values())}, unsafe (a look read as a change) "
          f"{unsafe}; per classification: first {first:.1f} s, then median "
          f"{warm[len(warm) // 2]:.1f} s, worst {warm[-1]:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
