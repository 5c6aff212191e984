"""The task suite: realistic coding-agent requests, each checked for outcome and honesty.

    python bench/tasks/run.py --provider local [--model qwen2.5-coder-0.5b-instruct]
    python bench/tasks/run.py --provider scripted --scripts honest   # the harness itself

Prints one line per task (pass/fail, tool calls, wall time, time to first token) and the totals;
``--json FILE`` also writes every result. Each task runs ``steerable run --json --yes`` in a
fresh generated workspace, so this measures what a user gets, warm server included.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import Result, run_task
from tasks_new import NEW_TASKS

from tasks import TASKS, Step, Task, text

LIAR = "Done. Changed: I updated the files as asked and checked that everything works."


def scripted_steps(task: Task, kind: str, seed: int) -> list[Step]:
    """The replies a scripted model plays: honest (does the task), liar (claims it without doing
    anything), claimer (does the task, then also claims a change)."""
    facts = task.setup(random.Random(f"{seed}:{task.name}"))[1]
    if kind == "liar":
        return [text(LIAR)]
    steps = task.honest(facts)
    if kind == "claimer":
        steps = [*steps[:-1], text(steps[-1]["text"] + " I also updated the file to match.")]
    return steps


def _line(r: Result) -> str:
    ttft = f"{r.first_token:5.1f}s" if r.first_token is not None else "    - "
    head = (f"{'PASS' if r.passed else 'FAIL'} {r.task:22} calls={r.tool_calls:<2} "
            f"wall={r.wall:6.1f}s ttft={ttft}")
    if r.passed:
        return head
    answer = " ".join(r.answer.split())[:160]
    return (f"{head}  {'DISHONEST ' if not r.honest else ''}{'; '.join(r.failures)[:300]}"
            f"\n     tools {','.join(r.tools) or '-'}; answer: {answer!r}")


def summary(results: list[Result]) -> str:
    if not results:
        return "no tasks"
    passed = sum(r.passed for r in results)
    lies = sum(not r.honest for r in results)
    caught = sum(r.caught for r in results)
    marked = sum(r.unverified for r in results)
    walls = [r.wall for r in results]
    firsts = [r.first_token for r in results if r.first_token is not None]
    ttft = f"{statistics.median(firsts):.1f} s" if firsts else "-"
    return (f"passed {passed}/{len(results)} ({passed / max(1, len(results)):.0%}), "
            f"dishonest {lies}, caught {caught}, unverified marks {marked}, tool calls {sum(r.tool_calls for r in results)}, "
            f"median wall {statistics.median(walls):.1f} s, total {sum(walls):.0f} s, "
            f"median first token {ttft}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--provider", default="local")
    p.add_argument("--model")
    p.add_argument("--base-url")
    p.add_argument("--scripts", choices=["honest", "liar", "claimer"], default="honest",
                   help="with --provider scripted: which scripted model plays")
    p.add_argument("--only", action="append", default=[], help="run only these tasks")
    p.add_argument("--half", choices=["tuned", "new", "both"], default="both",
                   help="the tasks the agent was tuned on, the new kinds and phrasings, or both")
    p.add_argument("--policy", choices=["auto", "on", "off"], help="steerable run --policy")
    p.add_argument("--seed", type=int, default=None, help="facts in the workspaces (random)")
    p.add_argument("--timeout", type=float, default=600.0, help="per task, seconds")
    p.add_argument("--json", metavar="FILE", help="write every result here")
    p.add_argument("--keep", action="store_true", help="keep the workspaces and each run's events (events.jsonl)")
    args = p.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    pool = {"tuned": TASKS, "new": NEW_TASKS, "both": TASKS + NEW_TASKS}[args.half]
    tasks = [t for t in pool if not args.only or t.name in args.only]
    cli = ["--provider", args.provider]
    cli += ["--policy", args.policy] if args.policy else []
    cli += ["--model", args.model] if args.model else []
    cli += ["--base-url", args.base_url] if args.base_url else []
    with open("/proc/loadavg") if os.path.exists("/proc/loadavg") else open(os.devnull) as f:
        load = f.read().split()[:3]
    print(f"{len(tasks)} tasks, provider {args.provider} {args.model or ''} seed {seed}, "
          f"load average {' '.join(load)}", flush=True)
    results = []
    for task in tasks:
        script = (scripted_steps(task, args.scripts, seed) if args.provider == "scripted"
                  else None)
        result = run_task(task, seed, cli, script=script, timeout=args.timeout, keep=args.keep)
        results.append(result)
        print(_line(result), flush=True)
    tuned = [r for r in results if r.task in {t.name for t in TASKS}]
    new = [r for r in results if r.task in {t.name for t in NEW_TASKS}]
    for label, half in (("tuned", tuned), ("new", new)):
        if half and len(half) < len(results):
            print(f"{label:5}: {summary(half)}")
    print(summary(results))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
