"""steerable through the peers' scenarios, plus the scaling ones of issue #14.

One JSON line per scenario (``--scenario NAME`` runs one in-process; no argument runs each in a
fresh interpreter). Fake models decide from the last message only (O(1) per call), like the
peers' fakes, so any growth with history or turn length is the loop's.

``STEERABLE_BENCH_FEATURE`` switches a feature on for the overhead scenarios, to see what it
costs next to the bare figure: ``subturns`` (every tool call is a sync sub-turn), ``otel`` (the
OpenTelemetry hook, SDK tracer, in-memory exporter; ``otel:attach`` fed by the bus with
``hook.attach(loop)`` instead of registered), ``no-checkpoints`` (durable turns off:
``bare``, the default AgentLoop, writes checkpoints to its in-memory store), ``subscriber``
(one subscription to every event, read by a task: the events are built then), ``sse`` (the
server's SSE fan-out, ``EventHub``, fed as ``steerable serve`` feeds it (an observer of the bus), with
``STEERABLE_BENCH_SSE_CLIENTS`` clients (or ``sse:N``), default 10, on the turn's session, each
an SSE response as the server makes it, short of the socket (see ``_sse_client``); the HTTP
write itself is in bench/bench_server.py). The hub and its clients are made once per process (a
server's viewers stay connected from turn to turn); a run ends once every client has read
every event.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import statistics
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as C
import steering as S

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Reply,
    ScriptedProvider,
    ToolCall,
    TurnStatus,
    tool,
)
from steerable.providers import StreamEnd, TextDelta, ToolCallChunk
from steerable.storage import JSONLSessionStore

PEER = "steerable"
FEATURE, _, _CLIENTS = os.environ.get("STEERABLE_BENCH_FEATURE", "bare").partition(":")
FEATURES = ("bare", "subturns", "otel", "no-checkpoints", "subscriber", "sse")
SSE_CLIENTS = int((_CLIENTS if FEATURE == "sse" else "") or os.environ.get("STEERABLE_BENCH_SSE_CLIENTS", "10"))


@tool(read_only=True)
async def step(i: int) -> int:
    """Instant tool: returns i + 1."""
    return i + 1


@tool(read_only=True)
async def slow(i: int) -> str:
    """Sleeps 0.2 s."""
    await asyncio.sleep(C.TOOL_SLEEP_S)
    return f"slow {i}"


def _k(request: Any) -> int:
    last = request.messages[-1]
    return int(last.content) if last.role == "tool" else 0


class CountingProvider:
    """n tool calls (one per response), then text; keeps nothing between calls (the scaling
    scenarios must not measure a fake that records every request, as ScriptedProvider does)."""

    def __init__(self, n: int, sleep: float = 0.0) -> None:
        self.n = n
        self.sleep = sleep
        self.ids = itertools.count(1)

    async def stream(self, request: Any) -> Any:
        if self.sleep:
            await asyncio.sleep(self.sleep)
        k = _k(request)
        if k >= self.n:
            yield TextDelta("done")
            yield StreamEnd(None, "stop")
        else:
            yield ToolCallChunk(ToolCall(f"c{next(self.ids)}", "step", {"i": k}))
            yield StreamEnd(None, "tool_calls")

    async def aclose(self) -> None:
        return None


# ------------------------------------------------------------------ features
def _feature_loop(n: int) -> tuple[AgentLoop, Any]:
    """An AgentLoop for an n-iteration turn with FEATURE on; returns (loop, finish check)."""
    if FEATURE == "subturns":
        child = Agent(name="helper", description="answers at once",
                      provider=ScriptedProvider([lambda r: Reply(text="1")] * (n + 1)))

        def fn(request: Any) -> Reply:
            if len(request.messages) >= 2 * n + 2:
                return Reply(text="done")
            return Reply(tool_calls=[("subagent", {"agent": "helper", "task": "t"})])

        agent = Agent(name="bench", instructions="x", provider=ScriptedProvider([fn] * (n + 1)),
                      subagents=[child], max_iterations=n + 5)
        return AgentLoop(agent), None
    agent = Agent(name="bench", instructions="x", provider=CountingProvider(n), tools=[step],
                  max_iterations=n + 5)
    if FEATURE == "no-checkpoints":
        return AgentLoop(agent, checkpoints=False), None
    loop = AgentLoop(agent)
    if FEATURE == "otel":
        from steerable.integrations.otel import OpenTelemetryHook

        provider, exporter = _tracing()
        exporter.clear()
        hook = OpenTelemetryHook(tracer_provider=provider)
        if _CLIENTS == "attach" and hasattr(hook, "attach"):  # fed by the bus, not registered
            hook.attach(loop)
            exporter.flush = hook.flush  # (_one_run waits for it)
        else:
            loop.register_hook(hook)
        return loop, exporter
    if FEATURE not in ("bare", "subscriber", "sse"):
        raise SystemExit(f"STEERABLE_BENCH_FEATURE must be one of {', '.join(FEATURES)}")
    return loop, None


_TRACING: tuple[Any, Any] | None = None


def _tracing() -> tuple[Any, Any]:
    """The SDK's tracer provider and its in-memory exporter, made once per process as an
    application does at start-up (making a provider detects its resource: ~5 ms, which is
    not the hook's cost); each run starts with the exporter emptied."""
    global _TRACING
    if _TRACING is None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        _TRACING = provider, exporter
    return _TRACING


async def _sse_client(hub: Any, client: Any) -> None:
    """One SSE response short of its socket. On a tree whose server writes its own responses
    (``EventHub.feed``): the server's ``EventStream`` over what ``LocalRunner.sse`` gives it,
    its ASGI ``send`` a coroutine that returns at once (as uvicorn's does while the socket takes
    the bytes). Before that: what the runner gave sse-starlette, made bytes by its
    ``ensure_bytes`` (a tree from before ``EventHub.frames``: an ``{id, data}`` message per
    event, as its app sent)."""
    if hasattr(hub, "feed"):
        from steerable.server._sse import EventStream, EventStreams

        async def send(message: Any) -> None:
            pass

        never = asyncio.Event()

        async def receive() -> Any:
            await never.wait()

        await EventStream(hub.feed(client), EventStreams())(
            {"type": "http", "method": "GET"}, receive, send)
        return
    from sse_starlette.event import ensure_bytes

    frames = getattr(hub, "frames", None)
    if frames is None:
        async for seq, data in hub.stream(client):
            ensure_bytes({"id": str(seq), "data": data}, "\r\n")
    else:
        async for piece in frames(client):
            ensure_bytes(piece, "\r\n")


_SSE: tuple[Any, list[Any], list[asyncio.Task[None]]] | None = None


async def _sse_hub() -> tuple[Any, list[Any]]:
    """The server's hub (what `steerable serve` gives it) with its SSE clients on the bench's
    session, made once per process: a server's viewers stay connected from turn to turn, so
    neither the hub's making (its redactor reads the environment) nor a client's connecting
    is part of a turn's cost. Each run's loop is fed to this hub."""
    global _SSE
    if _SSE is None:
        from steerable._secrets import Redactor
        from steerable.server import EventHub

        hub = EventHub(Redactor())
        clients = [hub.attach("b", None) for _ in range(SSE_CLIENTS)]
        _SSE = hub, clients, [asyncio.ensure_future(_sse_client(hub, c)) for c in clients]
    return _SSE[0], _SSE[1]


async def _readers(loop: AgentLoop) -> tuple[Any, list[asyncio.Task[None]], list[Any]]:
    """The consumers of the ``subscriber`` and ``sse`` features: (subscription, tasks, SSE
    clients)."""
    if FEATURE == "subscriber":
        sub = loop.subscribe(buffer=1 << 20)
        return sub, [asyncio.ensure_future(_drain_sub(sub))], []
    if FEATURE == "sse":
        hub, clients = await _sse_hub()
        if hasattr(loop, "observe"):  # what the server's runner does: the hub reads inline
            return loop.observe(hub.publish), [], clients
        sub = loop.subscribe(buffer=1 << 16)  # (a tree from before: a subscription, a pump)
        return sub, [asyncio.ensure_future(hub.pump(sub))], clients
    return None, [], []


async def _drain_sub(sub: Any) -> None:
    async for _ in sub:
        pass


async def _one_run(n: int) -> None:
    loop, exporter = _feature_loop(n)
    sub, readers, clients = await _readers(loop)
    res = await loop.run_turn("go", session_id="b")
    assert res.status == TurnStatus.COMPLETED and res.text == "done", (res.status, res.text)
    if sub is not None:  # every event read (and fanned out) is inside the timing
        while getattr(sub, "__len__", None) and len(sub):
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        while any(c.position < c.channel.count for c in clients):
            await asyncio.sleep(0)
        sub.close()
        for task in readers:
            task.cancel()
    if exporter is not None:  # every span exported: the hook's work is inside the timing
        await loop.aclose(grace=30)
        if getattr(exporter, "flush", None) is not None:
            await exporter.flush()


async def s_overhead() -> dict[str, Any]:
    out = await C.run_overhead(_one_run)
    out["feature"] = FEATURE
    if FEATURE == "sse":
        out["sse_clients"] = SSE_CLIENTS
    return out


async def s_scaling() -> dict[str, Any]:
    out = await C.run_scaling(_one_run)
    out["feature"] = FEATURE
    return out


async def s_parallel() -> dict[str, Any]:
    async def one_run() -> None:
        def fn(request: Any) -> Reply:
            if request.messages[-1].role != "tool":
                return Reply(tool_calls=[("slow", {"i": i}) for i in range(C.N_PARALLEL_TOOLS)])
            return Reply(text="done")

        agent = Agent(name="bench", instructions="x", provider=ScriptedProvider([fn] * 2),
                      tools=[slow])
        res = await AgentLoop(agent).run_turn("go", session_id="b")
        assert res.text == "done"

    return await C.run_parallel(one_run)


async def _one_cancel(idle: float) -> dict[str, Any]:
    probe = C.ToolProbe()

    @tool(read_only=True)
    async def hang() -> str:
        """Sleeps 10 s."""
        return await probe.hang()

    def fn(request: Any) -> Reply:
        if request.messages[-1].role != "tool":
            return Reply(tool_calls=[("hang", {})])
        return Reply(text="done")

    agent = Agent(name="bench", instructions="x", provider=ScriptedProvider([fn] * 2),
                  tools=[hang])
    loop = AgentLoop(agent)
    sub = loop.subscribe([EventKind.TURN_END])
    turn = loop.start_turn("go", session_id="b")
    if idle:
        await asyncio.sleep(idle)
    else:  # abort the moment the tool runs: the loop's code and data are still in the caches
        while probe.started_at is None:
            await asyncio.sleep(0)
    assert probe.started_at is not None, f"tool did not start within {idle} s"
    t0, wall0 = C.now(), time.time()  # events carry wall-clock times
    loop.interrupt_hard(session_id="b")
    res = await turn
    t1 = C.now()
    assert res.status == TurnStatus.ABORTED
    end = sub.drain_nowait()[-1]
    return {"latency_s": t1 - t0,
            "tool_cancel_s": None if probe.cancelled_at is None else probe.cancelled_at - t0,
            "turn_end_ms": round((end.time - wall0) * 1000, 3)}


async def _round_trip_us(idle: float) -> float:
    """A bare asyncio wake-up (set a future, the task awaiting it runs) after ``idle`` s."""
    fut = asyncio.get_running_loop().create_future()

    async def waiter() -> float:
        await fut
        return C.now()

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0)
    await asyncio.sleep(idle)
    t0 = C.now()
    fut.set_result(None)
    return (await task - t0) * 1e6


async def s_cancel() -> dict[str, Any]:
    """Hard abort after the loop sat idle 0.3 s: to the result, to TURN_END, to the tool's
    CancelledError (all from the interrupt_hard call). The same with no idle time (``warm_``)
    and, for scale, a bare asyncio wake-up after the same idle time and without."""
    out = await C.run_cancel(lambda: _one_cancel(C.CANCEL_AFTER_S))
    out["mechanism"] = "AgentLoop.interrupt_hard(); time until the turn's result"
    warm = await C.run_cancel(lambda: _one_cancel(0.0))
    out["warm_cancel_latency_ms"] = warm["cancel_latency_ms"]
    out["warm_tool_saw_cancel_ms"] = warm["tool_saw_cancel_ms"]
    out["warm_turn_end_ms"] = warm["turn_end_ms"]
    for idle, key in ((C.CANCEL_AFTER_S, "asyncio_wakeup_us_after_idle"),
                      (0.0, "asyncio_wakeup_us_warm")):
        out[key] = C.r(statistics.median([await _round_trip_us(idle) for _ in range(5)]), 1)
    return out


async def s_concurrent() -> dict[str, Any]:
    async def fn(request: Any) -> Reply:
        await asyncio.sleep(C.MODEL_SLEEP_S)
        return Reply(text="done")

    # one loop shared by all runs, one session each, like one server process
    agent = Agent(name="bench", instructions="x",
                  provider=ScriptedProvider([fn] * (C.CONCURRENT_RUNS + 1)))
    loop = AgentLoop(agent)
    counter = itertools.count()

    async def one_run() -> None:
        res = await loop.run_turn("go", session_id=f"s{next(counter)}")
        assert res.text == "done"

    out = await C.run_concurrent(one_run)
    out["agent"] = "one AgentLoop shared by all runs, one session per run"
    return out


def _gc_timer() -> tuple[dict[str, float], Any]:
    spent = {"s": 0.0, "n": 0.0, "t0": 0.0}

    def cb(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            spent["t0"] = time.process_time()
        else:
            spent["s"] += time.process_time() - spent["t0"]
            spent["n"] += 1

    return spent, cb


async def s_concurrent_10k(tuned: bool = False) -> dict[str, Any]:
    """10,000 concurrent one-call turns (model sleeps 0.5 s), with the time the collector's
    full (generation 2) collections took. ``tuned``: as an application may set the collector
    up for many concurrent turns (README: "Many concurrent turns"); steerable does not."""
    m = 10_000
    loop = AgentLoop(Agent(name="bench", instructions="x",
                           provider=CountingProvider(0, sleep=C.MODEL_SLEEP_S)))
    await loop.run_turn("go", session_id="warm")
    gc.collect()
    if tuned:
        gc.freeze()
        gc.set_threshold(10_000, 20, 20)
    spent, cb = _gc_timer()
    gc.callbacks.append(cb)
    c0, t0 = time.process_time(), C.now()
    results = await asyncio.gather(*(loop.run_turn("go", session_id=f"s{i}") for i in range(m)))
    wall, cpu = C.now() - t0, time.process_time() - c0
    gc.callbacks.remove(cb)
    assert all(r.status == TurnStatus.COMPLETED for r in results)
    return {"turns": m, "gc_tuned": tuned, "wall_s": C.r(wall), "cpu_s": C.r(cpu),
            "cpu_us_per_turn": C.r(cpu / m * 1e6, 1), "gc_full_collections": int(spent["n"]),
            "gc_full_cpu_s": C.r(spent["s"])}


async def s_concurrent_10k_gc_tuned() -> dict[str, Any]:
    return await s_concurrent_10k(tuned=True)


async def _turn_us_per_iter(loop: AgentLoop, agent: Agent, sid: str,
                            saved: Any) -> tuple[float, float]:
    # CPU time beside wall: the wall clock of a shared machine swamps 1 ms turns
    c0, t0 = time.process_time(), C.now()
    res = await loop.run_turn("go", session_id=sid, agent=agent)
    wall, cpu = C.now() - t0, time.process_time() - c0
    assert res.status == TurnStatus.COMPLETED and res.iterations == 11, res
    loop.store.replace(sid, saved)  # every measured turn sees the same history
    return cpu / 10 * 1e6, wall / 10 * 1e6


async def s_history() -> dict[str, Any]:
    """CPU µs per iteration of a 10-iteration turn on a session with 0 and with 10,000 prior
    turns (4 messages each), interleaved in one process so load changes hit both alike."""
    loop = AgentLoop(Agent(name="bench", instructions="x", provider=CountingProvider(1),
                           tools=[step], max_iterations=5))
    agent10 = Agent(name="bench10", instructions="x", provider=CountingProvider(10),
                    tools=[step], max_iterations=15)
    for t in range(10_000):
        await loop.run_turn(f"question {t}", session_id="long")
    saved = {"empty": loop.store.load("empty"), "long": loop.store.load("long")}
    figures: dict[str, list[tuple[float, float]]] = {"empty": [], "long": []}
    await _turn_us_per_iter(loop, agent10, "empty", saved["empty"])
    for r in range(C.REPEATS * 4):
        for sid in (("empty", "long") if r % 2 else ("long", "empty")):  # neither always first
            figures[sid].append(await _turn_us_per_iter(loop, agent10, sid, saved[sid]))
    out: dict[str, Any] = {"prior_messages": len(saved["long"])}
    for i, what in enumerate(("cpu", "wall")):
        empty = statistics.median(f[i] for f in figures["empty"])
        long = statistics.median(f[i] for f in figures["long"])
        out[f"{what}_us_per_iter_no_history"] = C.r(empty, 1)
        out[f"{what}_us_per_iter_10k_turns"] = C.r(long, 1)
        out[f"{what}_ratio"] = C.r(long / empty, 2)
    return out


async def s_long_turn() -> dict[str, Any]:
    """µs per iteration inside one turn of 1,000 and of 10,000 iterations (alternated), wall
    and CPU (the wall clock of a shared machine is noisy)."""
    figures: dict[int, list[tuple[float, float]]] = {1000: [], 10_000: []}
    loop = AgentLoop(Agent(name="bench", instructions="x", provider=CountingProvider(3),
                           tools=[step], max_iterations=10))
    await loop.run_turn("warm", session_id="warm")
    for _ in range(3):
        for n in (1000, 10_000):
            agent = Agent(name="bench", instructions="x", provider=CountingProvider(n),
                          tools=[step], max_iterations=n + 5)
            c0, t0 = time.process_time(), C.now()
            res = await AgentLoop(agent).run_turn("go", session_id="b")
            figures[n].append(((C.now() - t0) / n * 1e6, (time.process_time() - c0) / n * 1e6))
            assert res.iterations == n + 1
    out: dict[str, Any] = {}
    for i, what in enumerate(("", "cpu_")):
        a = statistics.median(f[i] for f in figures[1000])
        b = statistics.median(f[i] for f in figures[10_000])
        out.update({f"{what}us_per_iter_1000": C.r(a, 1), f"{what}us_per_iter_10000": C.r(b, 1),
                    f"{what}ratio": C.r(b / a, 2)})
    return out


# ------------------------------------------------------------------ steering (bench/peer/steering.py)
class _BrainProvider:
    """The fake model of the steering scenarios: asks the shared brain, answers in one chunk."""

    def __init__(self, brain: S.Brain) -> None:
        self.brain = brain
        self.ids = itertools.count(1)

    async def stream(self, request: Any) -> Any:
        msgs = request.messages
        texts = [m.content for m in msgs if m.role == "user"]
        decision = await self.brain.decide(texts, msgs[-1].role == "user")
        if isinstance(decision, str):
            yield TextDelta(decision)
            yield StreamEnd(None, "stop")
        else:
            yield ToolCallChunk(ToolCall(f"w{next(self.ids)}", "work", {"us": decision[1]}))
            yield StreamEnd(None, "tool_calls")

    async def aclose(self) -> None:
        return None


class _SteerRuntime:
    """``inject_steering`` into the session's running turn (the library's steering call)."""

    durable_in: str | None = None
    """None: each loop has its own in-memory store; a folder: a JSONL store of its own in it."""

    def __init__(self, brain: S.Brain) -> None:
        @tool(read_only=True)
        async def work(us: int) -> str:
            """Works for ``us`` microseconds."""
            return await brain.work(us)

        self.loop = AgentLoop(Agent(name="bench", instructions="x", provider=_BrainProvider(brain),
                                    tools=[work], max_iterations=100_000),
                              store=None if self.durable_in is None else
                              JSONLSessionStore(tempfile.mkdtemp(dir=self.durable_in)))
        self.handle: Any = None

    def start(self, prompt: str) -> None:
        self.handle = self.loop.start_turn(prompt, session_id="b")

    def stop(self) -> None:
        self.loop.interrupt_graceful("b")

    def returned(self) -> list[str]:
        """The steering the turn hands back undelivered (``TurnResult.unprocessed``)."""
        handle, self.handle = self.handle, None
        if handle is None or not handle.done():
            return []
        return [q.text for q in handle.result().unprocessed if q.kind == "steering"]

    def steer(self, text: str) -> bool:
        return self.loop.inject_steering(text, "b")

    @property
    def running(self) -> bool:
        return self.loop.busy("b")

    async def wait(self) -> None:
        await self.loop.wait_session("b")


def _send(rt: Any) -> tuple[Any, Any]:
    """The races go through ``AgentLoop.send`` (policy ``steer``): a message that finds the turn
    ending is queued for the next turn, never refused or dropped."""
    loop = rt.loop

    def send(text: str) -> None:
        loop.send(text, "b", policy="steer")

    return send, rt.wait


async def s_steer_latency() -> dict[str, Any]:
    """As every runtime, then the same with sessions in JSONL files (``jsonl_``): a steer is
    written to the turn's checkpoint file before the call that accepted it returns."""
    out = await S.run_steer_latency(_SteerRuntime)
    out["mechanism"] = "AgentLoop.inject_steering()"
    with tempfile.TemporaryDirectory() as folder:
        class _Durable(_SteerRuntime):
            durable_in = folder

        durable = await S.run_steer_latency(_Durable)
    for key in ("tool_steer_call_us", "tool_after_step_ms", "model_steer_call_us",
                "model_after_step_ms"):
        out[f"jsonl_{key}"] = durable[key]
    return out


async def s_steer_share() -> dict[str, Any]:
    out = await S.run_steer_share(_SteerRuntime)
    out["mechanism"] = "AgentLoop.inject_steering()"
    return out


async def s_steer_races() -> dict[str, Any]:
    out = await S.run_steer_races(_SteerRuntime, _send)
    out["mechanism"] = "AgentLoop.send(policy='steer')"
    return out


async def s_steer_races_stopped() -> dict[str, Any]:
    out = await S.run_steer_races(_SteerRuntime, stop_share=0.1)
    out["mechanism"] = ("inject_steering(); stop: interrupt_graceful(); handed back: "
                        "TurnResult.unprocessed")
    return out


SCENARIOS = {"overhead": s_overhead, "scaling": s_scaling, "parallel_tools": s_parallel,
             "cancel": s_cancel, "concurrent": s_concurrent, "concurrent_10k": s_concurrent_10k,
             "concurrent_10k_gc_tuned": s_concurrent_10k_gc_tuned,
             "history": s_history, "long_turn": s_long_turn,
             "steer_latency": s_steer_latency, "steer_share": s_steer_share,
             "steer_races": s_steer_races, "steer_races_stopped": s_steer_races_stopped}

if __name__ == "__main__":
    C.main(
        PEER,
        SCENARIOS,
        {"import steerable": "import steerable",
         "from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool":
             "from steerable import Agent, AgentLoop, Reply, ScriptedProvider, tool"},
        ["steerable"],
    )
