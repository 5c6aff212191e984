"""CPU time of importing the core, beside the standard library modules it cannot do without.

    python bench/bench_import.py                         # this tree
    python bench/bench_import.py /other/tree/src         # and another tree beside it

Each figure is the CPU time (user + system) of a fresh ``python -c STATEMENT`` minus that of
``python -c pass``, median [min-max] of ``N`` runs (default 11), the runs of every statement
interleaved. CPU time, not wall time: on a shared machine the wall clock mostly measures the
other processes. Byte code is cached (a warm-up run writes it), as for an installed package.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
CORE = "from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool"
# What asyncio and the core's records pull in anyway: the floor below which no import goes.
FLOOR = ("import asyncio, contextvars, dataclasses, enum, functools, inspect, itertools, json, "
         "threading, typing")


def cpu_ms(statement: str, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", statement], check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = {"standard library floor": (FLOOR, env),
            f"the core ({SRC})": (CORE, {**env, "PYTHONPATH": str(SRC)})}
    for other in sys.argv[1:]:
        runs[f"the core ({other})"] = (CORE, {**env, "PYTHONPATH": other})
    for statement, run_env in runs.values():  # warm-up: byte code written, files cached
        cpu_ms(statement, run_env)
    n = int(os.environ.get("N", "11"))
    base: list[float] = []
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(n):
        base.append(cpu_ms("pass", env))
        for name, (statement, run_env) in runs.items():
            figures[name].append(cpu_ms(statement, run_env))
    floor = statistics.median(base)
    print(f"python -c pass: {floor:.1f} ms CPU; {n} runs each; load {os.getloadavg()[0]:.2f}")
    for name, values in figures.items():
        spent = sorted(v - floor for v in values)
        print(f"{name}: {statistics.median(spent):.1f} [{spent[0]:.1f}-{spent[-1]:.1f}] ms CPU")


if __name__ == "__main__":
    main()
