"""CPU time of importing the core, beside the standard library modules it cannot do without.

    python bench/bench_import.py                         # this tree
    python bench/bench_import.py /other/tree/src         # and another tree beside it

Each figure is the CPU time (user + system) of a fresh ``python -c STATEMENT`` minus that of
``python -c pass``, median [min-max] of ``N`` runs (default 11), the runs of every statement
interleaved. CPU time, not wall time: on a shared machine the wall clock mostly measures the
other processes. Byte code is cached (a warm-up run writes it), as for an installed package.

``INSTRUCTIONS=1`` counts instructions instead (valgrind's callgrind, ``N`` runs, default 3):
CPU time still moves by tens of percent with the machine's load (the other processes' use of
the caches and the memory bus), the instruction count by well under 1 %, so a change of a few
ms shows at any load. 5.5 M instructions were ~1 ms of CPU on a quiet run of this machine.
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


def instructions(statement: str, env: dict[str, str]) -> int:
    out = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                          sys.executable, "-c", statement], env=env, check=True,
                         capture_output=True, text=True).stderr
    return int(out.rpartition("Collected : ")[2].split()[0])


def main() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = {"standard library floor": (FLOOR, env),
            f"the core ({SRC})": (CORE, {**env, "PYTHONPATH": str(SRC)})}
    for other in sys.argv[1:]:
        runs[f"the core ({other})"] = (CORE, {**env, "PYTHONPATH": other})
    for statement, run_env in runs.values():  # warm-up: byte code written, files cached
        cpu_ms(statement, run_env)
    if os.environ.get("INSTRUCTIONS"):
        count_instructions(runs, env)
        return
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


def count_instructions(runs: dict[str, tuple[str, dict[str, str]]],
                       env: dict[str, str]) -> None:
    n = int(os.environ.get("N", "3"))
    base = statistics.median(instructions("pass", env) for _ in range(n))
    print(f"python -c pass: {base / 1e6:.1f} M instructions; {n} runs each")
    for name, (statement, run_env) in runs.items():
        counts = sorted((instructions(statement, run_env) - base) / 1e6 for _ in range(n))
        print(f"{name}: {statistics.median(counts):.1f} [{counts[0]:.1f}-{counts[-1]:.1f}] "
              "M instructions")


if __name__ == "__main__":
    main()
