"""BFCL v4 as an outside yardstick: the non-live AST categories for the embedded model.

    pip install --no-deps bfcl-eval   # the data ships inside the wheel
    python bench/bench_bfcl.py [--model qwen2.5-coder-0.5b-instruct] [--limit N]
                               [--policy on|off|both|required] [--category simple ...]
                               [--private]

Each case is one turn of an ``AgentLoop`` with the embedded model (``LocalModelProvider``,
its profile: calls written as text, held to the tools' schemas by a grammar), the case's
functions as tools, and the case's question. The turn stops at the model's first reply (its
calls are recorded, never run). ``--policy on`` registers the coding agent's ``ToolPolicy``
over an empty workspace: BFCL's functions are read-only queries (none changes a file), so the
policy's classification decides whether a call is required (a "workspace"/"run" reading),
forbidden ("general") or free ("change"). ``--policy required`` asks for a call of any of the
case's functions (``ToolChoice("required")``, what the policy sends for a look), which is how
the wire form of a required call is measured: the policy reads most BFCL questions as
"general", so with it on that form is rarely reached. Scored by our own AST checker, written from BFCL's
ground-truth format (the wheel's checker imports every model SDK): the function name, every
required parameter, no unknown one, each value among the accepted ones (strings compared
case- and punctuation-insensitively, numbers by value, "" meaning "may be left
out"); parallel categories match calls to answers in any order; irrelevance passes when the
model calls nothing. Prints accuracy per category and configuration, and the median wall;
each failed case with the calls the model made and the accepted answers.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from steerable import Agent, AgentLoop
from steerable._hooks import (
    HookAction,
    HookDecision,
    HookResult,
    LLMRequestContext,
    LLMResponseContext,
)
from steerable.coding import Workspace
from steerable.coding.policy import ToolPolicy
from steerable.providers._base import ToolChoice
from steerable.providers.local import LocalModelProvider
from steerable.tools import BaseTool, ToolContext

CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
              "parallel_multiple": "parallel_multiple", "irrelevance": "irrelevance"}
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer",
          "string": "string", "boolean": "boolean", "array": "array", "object": "object",
          "number": "number"}


def data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or spec.origin is None:
        raise SystemExit("bfcl-eval is not installed: pip install --no-deps bfcl-eval")
    return Path(spec.origin).parent / "data"


def load(category: str, limit: int | None) -> list[tuple[dict[str, Any], list[Any] | None]]:
    name = f"BFCL_v4_{CATEGORIES[category]}.json"
    cases = [json.loads(line) for line in (data_dir() / name).read_text().splitlines() if line]
    answers: dict[str, list[Any]] = {}
    truth = data_dir() / "possible_answer" / name
    if truth.exists():
        for line in truth.read_text().splitlines():
            row = json.loads(line)
            answers[row["id"]] = row["ground_truth"]
    cases = cases[:limit] if limit is not None else cases
    return [(case, answers.get(case["id"])) for case in cases]


# -- the functions as tools ----------------------------------------------------------------

def wire_name(name: str) -> str:
    """BFCL names may hold dots (``math.factorial``), which tool names may not."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def json_schema(node: Any) -> Any:
    """BFCL's parameter types (``dict``, ``float``, ``tuple``, ``any``) as JSON schema."""
    if isinstance(node, list):
        return [json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema(v) for k, v in node.items() if k not in ("type", "optional")}
    kind = node.get("type")
    if isinstance(kind, str) and kind in _TYPES:
        out["type"] = _TYPES[kind]
    if "properties" in out and isinstance(out["properties"], dict):
        out["properties"] = {k: json_schema(v) for k, v in node["properties"].items()}
    return out


class Recorded(BaseTool):
    """A BFCL function offered to the model; it is never run (the turn stops first)."""

    read_only = True

    def __init__(self, function: Mapping[str, Any]) -> None:
        self.name = wire_name(function["name"])
        self.description = function.get("description", "")
        self._parameters = json_schema(function.get("parameters", {"type": "dict"}))
        self._parameters.setdefault("type", "object")

    @property
    def parameters(self) -> Mapping[str, Any]:
        return dict(self._parameters)

    async def run(self, arguments: Mapping[str, Any], ctx: ToolContext) -> Any:
        return "(recorded)"


class FirstReply:
    """Stops the turn at the model's first reply that calls tools, keeping its calls (and
    the text of a reply that called nothing, to show why a case failed)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.text = ""

    def after_llm(self, ctx: LLMResponseContext) -> HookResult:
        if not ctx.response.tool_calls:
            self.text = ctx.response.text
            return None
        self.calls = [(c.name, dict(c.arguments)) for c in ctx.response.tool_calls]
        return HookDecision(HookAction.ABORT_TURN)


# -- the checker -----------------------------------------------------------------------------

def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return re.sub(r"[ ,./\-_*^]", "", value).lower()
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def value_ok(value: Any, accepted: Sequence[Any]) -> bool:
    return any(_norm(value) == _norm(a) for a in accepted if a != "")


def call_ok(call: tuple[str, Mapping[str, Any]], answer: Mapping[str, Any],
            functions: Sequence[Mapping[str, Any]]) -> bool:
    """One call against one ground-truth entry ``{name: {param: [accepted values]}}``."""
    (name, params), = answer.items()
    if call[0] != wire_name(name):
        return False
    described = next((f for f in functions if f["name"] == name), None)
    known = set((described or {}).get("parameters", {}).get("properties", {}))
    args = call[1]
    if known and set(args) - known:
        return False
    for param, accepted in params.items():
        if param not in args:
            if "" not in accepted:
                return False
        elif not value_ok(args[param], accepted):
            return False
    return all(p in params for p in args)


def calls_ok(calls: Sequence[tuple[str, Mapping[str, Any]]], truth: Sequence[Any] | None,
             functions: Sequence[Mapping[str, Any]], category: str) -> bool:
    """The reply's calls against a case's ground truth (irrelevance: no call at all)."""
    if category == "irrelevance":
        return not calls
    if truth is None or len(calls) != len(truth):
        return False
    free = list(truth)
    for call in calls:  # any order: each call takes the first answer it matches
        match = next((a for a in free if call_ok(call, a, functions)), None)
        if match is None:
            return False
        free.remove(match)
    return True


def failed_case(case_id: str, reply: FirstReply, truth: Sequence[Any] | None) -> str:
    """A failed case's calls (or its answer) beside what was expected, to be read."""
    got = "; ".join(f"{name}({json.dumps(dict(args), ensure_ascii=False)})"
                    for name, args in reply.calls)
    got = got or f"no call, answered {' '.join(reply.text.split())[:300]!r}"
    wanted = json.dumps(truth, ensure_ascii=False) if truth is not None else "no call"
    return f"  FAIL {case_id}: got {got}\n       expected {wanted}"


# -- the run ---------------------------------------------------------------------------------

class Require:
    """A before_llm hook that requires a call of any of the offered functions."""

    def before_llm(self, ctx: LLMRequestContext) -> HookResult:
        return HookDecision(HookAction.MODIFY, tool_choice=ToolChoice(
            "required", max_tokens=1024, reason="bench: a call is required"))


async def run_case(provider: LocalModelProvider, case: Mapping[str, Any],
                   policy: str) -> FirstReply:
    turns = case["question"]
    prompt = next(m["content"] for m in reversed(turns[0]) if m["role"] == "user")
    tools = [Recorded(f) for f in case["function"]]
    stop = FirstReply()
    loop = AgentLoop(Agent(provider=provider, tools=tools, max_iterations=2))
    loop.register_hook(stop, timeout=600)
    with tempfile.TemporaryDirectory(prefix="bfcl-") as empty:
        if policy == "required":
            loop.register_hook(Require())
        elif policy == "on":
            loop.register_hook(ToolPolicy(Workspace(empty)), timeout=600)
        try:
            await loop.run_turn(prompt, session_id=case["id"])
        finally:
            await loop.aclose()
    return stop


async def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model")
    p.add_argument("--limit", type=int, help="the first N cases of each category")
    p.add_argument("--policy", choices=["on", "off", "both", "required"], default="both")
    p.add_argument("--category", action="append", choices=list(CATEGORIES))
    p.add_argument("--private", action="store_true",
                   help="a server of its own, not the shared one another run may be using")
    args = p.parse_args(argv)
    provider = LocalModelProvider(model=args.model, shared=not args.private)
    configs = {"both": ["off", "on"]}.get(args.policy, [args.policy])
    print(f"BFCL v4, model {provider.model}, limit {args.limit or 'none'}", flush=True)
    try:
        for category in args.category or list(CATEGORIES):
            cases = load(category, args.limit)
            for policy in configs:
                passed, walls = 0, []
                for case, truth in cases:
                    started = time.perf_counter()
                    reply = await run_case(provider, case, policy)
                    walls.append(time.perf_counter() - started)
                    ok = calls_ok(reply.calls, truth, case["function"], category)
                    passed += ok
                    if not ok:
                        print(failed_case(case["id"], reply, truth), flush=True)
                print(f"{category:18} policy {policy:8} {passed}/{len(cases)} "
                      f"({passed / max(1, len(cases)):.0%}), median wall "
                      f"{statistics.median(walls):.1f} s", flush=True)
    finally:
        await provider.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
