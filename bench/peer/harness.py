"""Shared harness for the peer benchmarks (bench_<peer>.py).

Each bench script defines async scenario functions and calls ``main()``.
By default every scenario runs in its own fresh subprocess (same interpreter,
same script, ``--scenario NAME``) so that peak-RSS numbers and lazily imported
modules of one scenario do not leak into another.

Output: one JSON object per line on stdout, one line per scenario.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import metadata

# ---- knobs (environment variables, so nothing machine-specific is hard-coded)
ITERATIONS = int(os.environ.get("PEERBENCH_ITERATIONS", "200"))
REPEATS = int(os.environ.get("PEERBENCH_REPEATS", "5"))
CONCURRENT_RUNS = int(os.environ.get("PEERBENCH_CONCURRENT_RUNS", "1000"))
TOOL_SLEEP_S = 0.2
N_PARALLEL_TOOLS = 4
CANCEL_AFTER_S = 0.3
HANG_S = 10.0
MODEL_SLEEP_S = 0.5

now = time.perf_counter


def emit(peer: str, scenario: str, **fields) -> None:
    print(json.dumps({"peer": peer, "scenario": scenario, **fields}), flush=True)


def median(xs):
    return statistics.median(xs)


def r(x, nd=3):
    return None if x is None else round(x, nd)


# ---------------------------------------------------------------- memory
def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mb() -> float | None:
    kb = _status_kb("VmRSS")
    return None if kb is None else kb / 1024


def peak_rss_mb() -> float:
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb / 1024
    import resource  # fallback (ru_maxrss is KiB on Linux)

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0: write 5 to clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- import time
def import_time(stmts: dict[str, str], n: int = REPEATS) -> dict:
    """Wall time of ``python -c STMT`` minus ``python -c pass`` (medians of n)."""
    py = sys.executable
    env = dict(os.environ)
    # Like an installed package (pip byte-compiles on install, as the peers' venvs are): the
    # warm-up run writes the .pyc files an editable checkout lacks. With
    # PYTHONDONTWRITEBYTECODE set (it is on some machines) every run would compile the
    # sources again, ~40 ms for steerable.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # run from a neutral directory so nothing local shadows the package
    cwd = os.path.dirname(os.path.abspath(py))

    def t(stmt: str) -> float:
        t0 = now()
        subprocess.run([py, "-c", stmt], check=True, cwd=cwd, env=env)
        return now() - t0

    out = {}
    # warm-up: byte-compile and warm the page cache
    t("pass")
    for s in stmts.values():
        t(s)
    base = []
    per = {k: [] for k in stmts}
    for _ in range(n):
        base.append(t("pass"))
        for k, s in stmts.items():
            per[k].append(t(s))
    bmed = median(base)
    out["python_pass_ms"] = r(bmed * 1000, 1)
    for k, vals in per.items():
        out[k] = {
            "stmt": stmts[k],
            "import_time_ms": r((median(vals) - bmed) * 1000, 1),
            "raw_median_ms": r(median(vals) * 1000, 1),
        }
    return out


# ---------------------------------------------------------------- calibration
def calibration() -> dict:
    """Framework-free yardsticks, to tell a slow/loaded machine from a slow framework."""

    def loop() -> float:
        t0 = now()
        s = 0
        for i in range(2_000_000):
            s += i
        return now() - t0

    async def tasks() -> float:
        async def f():
            await asyncio.sleep(0)
            return 1

        t0 = now()
        for _ in range(20_000):
            await asyncio.create_task(f())
        return now() - t0

    loops = [loop() for _ in range(3)]
    tks = [asyncio.run(tasks()) for _ in range(3)]
    return {
        "py_loop_2M_ms": r(min(loops) * 1000, 1),
        "asyncio_task_roundtrip_us": r(min(tks) / 20_000 * 1e6, 2),
    }


# ---------------------------------------------------------------- versions
def versions(pkgs: list[str]) -> dict:
    v = {"python": platform.python_version()}
    for p in pkgs:
        try:
            v[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            v[p] = None
    return v


# ---------------------------------------------------------------- cancel helper
class ToolProbe:
    """Records when a long-running tool started / saw CancelledError."""

    def __init__(self) -> None:
        self.started_at: float | None = None
        self.cancelled_at: float | None = None
        self.finished_normally = False

    async def hang(self) -> str:
        self.started_at = now()
        try:
            await asyncio.sleep(HANG_S)
        except asyncio.CancelledError:
            self.cancelled_at = now()
            raise
        self.finished_normally = True
        return "done"


# ---------------------------------------------------------------- runner
Scenario = Callable[[], Awaitable[dict]]


def main(peer: str, scenarios: dict[str, Scenario], import_stmts: dict[str, str], pkgs: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", help="run one scenario in-process")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()

    names = ["versions", "calibration", *scenarios.keys(), "import_time"]
    if args.list:
        print("\n".join(names))
        return
    if args.scenario is None:
        # orchestrate: each scenario in a fresh interpreter
        rc = 0
        for name in names:
            p = subprocess.run([sys.executable, os.path.abspath(sys.argv[0]), "--scenario", name])
            if p.returncode != 0:
                emit(peer, name, error=f"subprocess exited {p.returncode}")
                rc = 1
        sys.exit(rc)

    name = args.scenario
    if name == "versions":
        emit(peer, "versions", **versions(pkgs))
        return
    if name == "calibration":
        emit(peer, "calibration", **calibration(), loadavg_1m=round(os.getloadavg()[0], 2))
        return
    if name == "import_time":
        emit(peer, "import_time_ms", **import_time(import_stmts))
        return
    fn = scenarios[name]
    gc.collect()
    load0 = os.getloadavg()[0]
    try:
        result = asyncio.run(fn())
        result["loadavg_1m_start_end"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    except Exception as e:  # report, don't hide
        import traceback

        traceback.print_exc()
        emit(peer, name, error=f"{type(e).__name__}: {e}")
        sys.exit(1)
    emit(peer, name, **result)


async def run_overhead(one_run: Callable[[int], Awaitable[object]]) -> dict:
    """one_run(n) must perform one agent run with n tool iterations + final text."""
    await one_run(3)  # warm-up (lazy imports, caches)
    res = {}
    for n in (ITERATIONS, 25, 10):
        times, cpus = [], []
        for _ in range(REPEATS):
            gc.collect()
            c0 = time.process_time()
            t0 = now()
            await one_run(n)
            times.append(now() - t0)
            cpus.append(time.process_time() - c0)
        per_iter_us = [t / n * 1e6 for t in times]
        cpu_iter_us = [t / n * 1e6 for t in cpus]
        if n == ITERATIONS:
            res["overhead_per_iteration_us"] = r(median(per_iter_us), 1)
            res["cpu_per_iteration_us"] = r(median(cpu_iter_us), 1)
            res["iterations"] = n
            res["repeats"] = REPEATS
            res["samples_us"] = [r(x, 1) for x in per_iter_us]
        else:
            res[f"overhead_per_iteration_us_at_{n}_iterations"] = r(median(per_iter_us), 1)
            res[f"cpu_per_iteration_us_at_{n}_iterations"] = r(median(cpu_iter_us), 1)
    return res


SCALING_NS = [int(x) for x in os.environ.get("PEERBENCH_SCALING_NS", "10,50,100,200,400").split(",")]


async def run_scaling(one_run: Callable[[int], Awaitable[object]]) -> dict:
    """Per-iteration wall/CPU at several history lengths (best of 2 runs each): flat = O(1) per turn."""
    await one_run(3)
    wall, cpu = {}, {}
    for n in SCALING_NS:
        best_w = best_c = None
        for _ in range(2):
            gc.collect()
            c0 = time.process_time()
            t0 = now()
            await one_run(n)
            w, c = now() - t0, time.process_time() - c0
            best_w = w if best_w is None else min(best_w, w)
            best_c = c if best_c is None else min(best_c, c)
        wall[str(n)] = r(best_w / n * 1e6, 0)
        cpu[str(n)] = r(best_c / n * 1e6, 0)
    return {"us_per_iteration_by_n": wall, "cpu_us_per_iteration_by_n": cpu}


async def run_parallel(one_run: Callable[[], Awaitable[object]]) -> dict:
    await one_run()  # warm-up
    times = []
    for _ in range(3):
        t0 = now()
        await one_run()
        times.append(now() - t0)
    return {
        "parallel_tools_wall_s": r(median(times), 3),
        "samples_s": [r(t, 3) for t in times],
        "n_tools": N_PARALLEL_TOOLS,
        "tool_sleep_s": TOOL_SLEEP_S,
    }


async def run_cancel(one_cancel: Callable[[], Awaitable[dict]], n: int = REPEATS) -> dict:
    """one_cancel() returns {"latency_s": ..., "tool_cancel_s": ..., ...} for one trial."""
    trials = [await one_cancel() for _ in range(n)]
    lat = [t["latency_s"] * 1000 for t in trials]
    out = {"cancel_latency_ms": r(median(lat), 2), "samples_ms": [r(x, 2) for x in lat]}
    tc = [t.get("tool_cancel_s") for t in trials]
    if all(x is not None for x in tc):
        out["tool_saw_cancel_ms"] = r(median(tc) * 1000, 2)
    else:
        out["tool_saw_cancel_ms"] = None
        out["tool_not_cancelled_trials"] = sum(1 for x in tc if x is None)
    extra = {k for t in trials for k in t} - {"latency_s", "tool_cancel_s"}
    for k in sorted(extra):
        vals = [t.get(k) for t in trials]
        out[k] = vals[0] if len(set(map(repr, vals))) == 1 else vals
    return out


async def cancel_task_once(probe: ToolProbe, run: Awaitable[object]) -> dict:
    """One trial of the plain asyncio way to stop a run: start ``run`` as a task, cancel the
    task once its tool has been running ``CANCEL_AFTER_S``, and time until the task ends."""
    task = asyncio.ensure_future(run)
    await asyncio.sleep(CANCEL_AFTER_S)
    assert probe.started_at is not None, "tool did not start within 0.3 s"
    t0 = now()
    task.cancel()
    outcome = "returned"
    try:
        await task
    except asyncio.CancelledError:
        outcome = "CancelledError"
    t1 = now()
    return {"latency_s": t1 - t0,
            "tool_cancel_s": None if probe.cancelled_at is None else probe.cancelled_at - t0,
            "outcome": outcome}


async def run_concurrent(one_run: Callable[[], Awaitable[object]]) -> dict:
    await one_run()  # warm-up
    gc.collect()
    rss_before = rss_mb()
    reset_ok = reset_peak_rss()
    peak_before = peak_rss_mb()
    c0 = time.process_time()
    t0 = now()
    results = await asyncio.gather(*(one_run() for _ in range(CONCURRENT_RUNS)), return_exceptions=True)
    wall = now() - t0
    cpu = time.process_time() - c0
    peak_after = peak_rss_mb()
    errors = [repr(x) for x in results if isinstance(x, BaseException)]
    return {
        "concurrent_runs": CONCURRENT_RUNS,
        "wall_s": r(wall, 3),
        "cpu_s": r(cpu, 3),
        "peak_rss_delta_mb": r(peak_after - peak_before, 1),
        "rss_before_mb": r(rss_before, 1),
        "peak_rss_mb": r(peak_after, 1),
        "peak_reset": reset_ok,
        "model_sleep_s": MODEL_SLEEP_S,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }
