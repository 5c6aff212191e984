"""Run steerable (and, with --peers, the peer runtimes) through the shared scenarios, interleaved.

    python bench/peer/run.py                       # steerable, 3 rounds, every scenario
    python bench/peer/run.py --rounds 5 --peers    # + the peers whose venvs exist
    python bench/peer/run.py --scenarios overhead,cancel --feature otel
    python bench/peer/run.py --baseline-src /path/to/old/checkout/src   # before/after
    python bench/peer/run.py --features subscriber,sse,otel   # + overhead with features on
    python bench/peer/run.py --table FILE.jsonl    # the table of an earlier run

Each (round, scenario, runtime) is one fresh interpreter; within a round the runtimes take turns
in a rotated order, so a load spike on the shared machine hits them alike. Every JSON line goes
to --out (default: a file under $TMPDIR), and a table of median [min-max] over the rounds is
printed with the load average at the start and end of the run.

Peer venvs (``--peervenv``, default $PEERVENV or ~/.cache/peervenv): ``openai_agents``,
``pydantic_ai``, ``langgraph``, ``langchain`` (see bench/peer/README.md for the pinned versions).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEER_SCENARIOS = ["overhead", "cancel", "concurrent", "import_time", "steer_latency",
                  "steer_share", "steer_races", "steer_races_stopped"]
OWN_SCENARIOS = ["history", "long_turn", "concurrent_10k", "concurrent_10k_gc_tuned"]

# the figure(s) worth a column, per scenario: (label, JSON path)
FIGURES: dict[str, list[tuple[str, Any]]] = {
    "overhead": [("µs/iter @200", ("overhead_per_iteration_us",)),
                 ("µs/iter @25", ("overhead_per_iteration_us_at_25_iterations",)),
                 ("µs/iter @10", ("overhead_per_iteration_us_at_10_iterations",)),
                 ("CPU µs/iter @200", ("cpu_per_iteration_us",)),
                 ("CPU µs/iter @10", ("cpu_per_iteration_us_at_10_iterations",))],
    "cancel": [("abort ms (result)", ("cancel_latency_ms",)),
               ("tool cancelled ms", ("tool_saw_cancel_ms",)),
               ("TURN_END ms", ("turn_end_ms",)),
               ("no idle: abort ms (result)", ("warm_cancel_latency_ms",)),
               ("no idle: tool cancelled ms", ("warm_tool_saw_cancel_ms",)),
               ("no idle: TURN_END ms", ("warm_turn_end_ms",)),
               ("asyncio wake-up µs after 0.3 s idle", ("asyncio_wakeup_us_after_idle",)),
               ("asyncio wake-up µs, no idle", ("asyncio_wakeup_us_warm",))],
    "concurrent": [("1,000 turns wall s", ("wall_s",)),
                   # like with like: every runtime's model sleeps model_sleep_s (0.5 s) first
                   ("wall s beyond the model's sleep", lambda row: row["wall_s"] - row["model_sleep_s"]
                    if "wall_s" in row and "model_sleep_s" in row else None),
                   ("CPU s", ("cpu_s",)),
                   ("peak RSS MB", ("peak_rss_delta_mb",))],
    # one row: steerable's core import beside each peer's main module
    "import_time_ms": [("import ms (steerable: with the core)", (
        ("from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool", "import_time_ms"),
        ("import pydantic_ai", "import_time_ms"), ("import agents", "import_time_ms"),
        ("import langgraph.prebuilt", "import_time_ms"),
        ("import langchain.agents", "import_time_ms")))],
    # bench/peer/steering.py
    "steer_latency": [("tool running: steer to the request carrying it, ms",
                       ("tool_steer_to_request_ms",)),
                      ("tool running: from the tool's end, ms", ("tool_after_step_ms",)),
                      ("model answering: steer to the request carrying it, ms",
                       ("model_steer_to_request_ms",)),
                      ("model answering: from the answer's end, ms", ("model_after_step_ms",)),
                      ("the steer call itself (until acknowledged), µs",
                       ("tool_steer_call_us",)),
                      ("JSONL store: the steer call, µs", ("jsonl_tool_steer_call_us",)),
                      ("JSONL store: from the tool's end, ms", ("jsonl_tool_after_step_ms",)),
                      ("steers missed", lambda row: row.get("tool_missed", 0)
                       + row.get("model_missed", 0) if "tool_missed" in row else None)],
    "steer_share": [("steers", ("steers",)),
                    ("% in the very next request", lambda row: 100 * row["honoured_share"]
                     if row.get("honoured_share") is not None else None)],
    "steer_races": [("messages", ("messages",)), ("lost", ("lost",)),
                    ("duplicated", ("duplicated",)), ("out of order", ("out_of_order_requests",)),
                    ("refused, then sent as a new run", ("refused_then_rerun",))],
    "steer_races_stopped": [("stops", ("stops",)), ("lost", ("lost",)),
                            ("duplicated", ("duplicated",)),
                            ("handed back, then sent again", ("handed_back_then_resent",)),
                            ("lost, documented calls only", ("documented_calls_only", "lost"))],
    "history": [("CPU µs/iter, 0 prior turns", ("cpu_us_per_iter_no_history",)),
                ("CPU µs/iter, 10k prior turns", ("cpu_us_per_iter_10k_turns",)),
                ("CPU ratio", ("cpu_ratio",)), ("wall ratio", ("wall_ratio",))],
    "long_turn": [("µs/iter @1k", ("us_per_iter_1000",)), ("µs/iter @10k", ("us_per_iter_10000",)),
                  ("ratio", ("ratio",)), ("CPU µs/iter @1k", ("cpu_us_per_iter_1000",)),
                  ("CPU µs/iter @10k", ("cpu_us_per_iter_10000",)), ("CPU ratio", ("cpu_ratio",))],
    "concurrent_10k": [("10k turns wall s", ("wall_s",)), ("CPU s", ("cpu_s",)),
                       ("gc full-collection CPU s", ("gc_full_cpu_s",))],
    "concurrent_10k_gc_tuned": [("10k turns wall s", ("wall_s",)), ("CPU s", ("cpu_s",)),
                                ("gc full-collection CPU s", ("gc_full_cpu_s",))],
}


def _runtimes(args: argparse.Namespace) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (command prefix, extra environment)."""
    env = {"STEERABLE_BENCH_FEATURE": args.feature}
    out = {"steerable": ([sys.executable, str(HERE / "steerable_bench.py")], env)}
    if args.baseline_src:
        out["steerable-before"] = ([sys.executable, str(HERE / "steerable_bench.py")],
                                   {**env, "PYTHONPATH": args.baseline_src})
    for feature in filter(None, args.features.split(",")):
        out[f"steerable+{feature}"] = ([sys.executable, str(HERE / "steerable_bench.py")],
                                       {"STEERABLE_BENCH_FEATURE": feature})
        if args.baseline_src:  # each feature on the older tree too, with the same bench code
            out[f"steerable-before+{feature}"] = (
                [sys.executable, str(HERE / "steerable_bench.py")],
                {"STEERABLE_BENCH_FEATURE": feature, "PYTHONPATH": args.baseline_src})
    if args.peers:
        venvs = Path(args.peervenv).expanduser()
        for name, venv, script, extra in (
            ("openai-agents", "openai_agents", "bench_openai_agents.py", {}),
            ("pydantic-ai", "pydantic_ai", "bench_pydantic_ai.py", {}),
            ("langgraph", "langgraph", "bench_langgraph.py", {}),
            ("langchain", "langchain", "bench_langgraph.py", {"PEERBENCH_LG_AGENT": "create_agent"}),
        ):
            py = venvs / venv / "bin" / "python"
            if py.exists():
                out[name] = ([str(py), str(HERE / "peers" / script)], extra)
            else:
                print(f"[skip] {name}: no venv at {py.parent.parent}", file=sys.stderr)
    return out


def _run_one(cmd: list[str], env: dict[str, str], scenario: str) -> list[dict[str, Any]]:
    p = subprocess.run([*cmd, "--scenario", scenario], capture_output=True, text=True,
                       env={**os.environ, **env}, timeout=1800)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not rows:
        tail = p.stderr.strip().splitlines()[-1:] or ["no output"]
        print(f"[fail] {cmd[-1]} {scenario}: {tail[0]}", file=sys.stderr)
    return rows


def _dig(row: dict[str, Any], path: Any) -> Any:
    if callable(path):  # a figure computed from the row
        return path(row)
    if path and isinstance(path[0], tuple):  # alternatives: the first one the row has
        return next((v for p in path if (v := _dig(row, p)) is not None), None)
    value: Any = row
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        return statistics.median(value)
    return value if isinstance(value, int | float) else None


def _num(x: float) -> str:
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _fmt(values: list[float]) -> str:
    if not values:
        return "—"
    med = statistics.median(values)
    if len(values) == 1:
        return _num(med)
    return f"{_num(med)} [{_num(min(values))}-{_num(max(values))}]"


def table(rows: list[dict[str, Any]], runtimes: list[str]) -> str:
    lines = ["| scenario | figure | " + " | ".join(runtimes) + " |",
             "|---|---|" + "---|" * len(runtimes)]
    for scenario, figures in FIGURES.items():
        for label, path in figures:
            cells = []
            for rt in runtimes:
                vals = [v for r in rows if r.get("peer") == rt and r.get("scenario") == scenario
                        and (v := _dig(r, path)) is not None]
                cells.append(_fmt(vals))
            if any(c != "—" for c in cells):
                lines.append(f"| {scenario} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--peers", action="store_true", help="also run the peers whose venvs exist")
    ap.add_argument("--peervenv", default=os.environ.get("PEERVENV", "~/.cache/peervenv"))
    ap.add_argument("--scenarios", help="comma-separated (default: all)")
    ap.add_argument("--feature", default="bare",
                    help="for overhead: bare, subturns, otel, no-checkpoints")
    ap.add_argument("--features", default="",
                    help="comma-separated: also run the overhead scenario with each feature on "
                         "(as runtime 'steerable+FEATURE'): subturns, otel, no-checkpoints, "
                         "subscriber, sse (sse:N for N clients, default 10)")
    ap.add_argument("--baseline-src", help="a steerable src/ folder to run beside, as 'before'")
    ap.add_argument("--out", help="JSON lines file (default: under $TMPDIR)")
    ap.add_argument("--table", metavar="JSONL", help="only print the table of an earlier run")
    args = ap.parse_args()
    if args.table:
        rows = [json.loads(line) for line in Path(args.table).read_text().splitlines() if line]
        order = list(dict.fromkeys(r["peer"] for r in rows))
        print(table(rows, order))
        return
    scenarios = args.scenarios.split(",") if args.scenarios else PEER_SCENARIOS + OWN_SCENARIOS
    runtimes = _runtimes(args)
    out = Path(args.out or tempfile.mkstemp(prefix="peerbench-", suffix=".jsonl")[1])
    load0 = os.getloadavg()
    rows: list[dict[str, Any]] = []
    names = list(runtimes)
    with out.open("a") as fh:
        for rnd in range(args.rounds):
            for scenario in scenarios:
                order = names[rnd % len(names):] + names[:rnd % len(names)]
                for name in order:
                    if scenario in OWN_SCENARIOS and not name.startswith("steerable"):
                        continue
                    if "+" in name and scenario != "overhead":
                        continue  # features: the overhead scenario only
                    cmd, env = runtimes[name]
                    for row in _run_one(cmd, env, scenario):
                        row["peer"] = name if name.startswith("steerable") else row["peer"]
                        row["round"] = rnd
                        rows.append(row)
                        fh.write(json.dumps(row) + "\n")
                        fh.flush()  # a run cut short keeps what it measured
            print(f"round {rnd + 1}/{args.rounds} done {time.strftime('%H:%M:%S')} "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    load1 = os.getloadavg()
    seen = [rt for rt in names if any(r.get("peer") == rt for r in rows)]
    seen += sorted({r["peer"] for r in rows} - set(seen))
    print(f"\n{args.rounds} rounds, feature={args.feature}; load average 1/5/15 min: start "
          f"{load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f}, end "
          f"{load1[0]:.2f}/{load1[1]:.2f}/{load1[2]:.2f}; raw lines in {out}\n")
    print(table(rows, seen))


if __name__ == "__main__":
    main()
