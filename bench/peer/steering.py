"""The steering scenarios, shared by steerable and every peer that can take a message mid-run.

A runtime plugs in through a ``SteerRuntime`` (start a run, give the running run a message,
wait) whose fake model asks a shared ``Brain`` what to answer and whose one tool, ``work``,
sleeps through the brain. The brain sees the user texts of each model request's context and
records when each request started, so every figure is read off what the model was actually
sent, the same way for every runtime:

- ``steer_latency``: a steer arrives halfway through a 50 ms step, either a tool call
  (``tool``) or the model's own answer (``model``, no tool running); time from the steer to the
  start of the model request that first carries it, and the part of that after the step ended
  (the runtime's own share); and how long the steer call itself takes (until it is
  acknowledged).
- ``steer_share``: a 100-call run whose model and tool take 0-2 ms each, steered at random
  moments (every 0-3 ms): the share of steers found in the very next request that starts after
  the steer call returned, and how many requests late the others were.
- ``steer_races``: short runs (user message, one tool call, final answer) on one conversation
  while messages arrive at random moments, about a fifth of them fired the instant the model
  gives its final answer (the window in which a run ends): every message must reach a model
  request, once. Lost = accepted but in no request; duplicated = twice in one request's
  context; refused = the runtime said no (the caller knows, and the driver starts a run with
  it instead, as a front end would).
- ``steer_races_stopped``: the same, and the user stops the run during one tool call in ten
  (the runtime's own stop that keeps what is done). Messages the stopped run had accepted and
  not delivered count as handed back when the runtime gives them to the caller (the driver
  sends them again), and as lost when nothing does.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import statistics
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import harness as C

STEP_S = 0.05
TRIALS = int(os.environ.get("PEERBENCH_STEER_TRIALS", "20"))
SHARE_CALLS = 100
RACE_MESSAGES = int(os.environ.get("PEERBENCH_RACE_MESSAGES", "400"))
LIMIT_S = 30.0  # a runtime that never gets there is an error line, not a hung benchmark
now = C.now

# What a fake model answers: ("work", microseconds) asks for the tool, a str is the final text.
Decision = tuple[str, int] | str


class Brain:
    """The fake model's decisions and the record of what each request carried."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, list[str]]] = []
        self.calls = 0

    async def decide(self, user_texts: list[str], last_is_user: bool) -> Decision:
        self.calls += 1
        self.requests.append((now(), user_texts))
        return await self.answer(user_texts, last_is_user)

    async def answer(self, user_texts: list[str], last_is_user: bool) -> Decision:
        raise NotImplementedError

    async def work(self, us: int) -> str:
        if us:
            await asyncio.sleep(us / 1e6)
        return "worked"

    def first_carrying(self, text: str, after: float = 0.0) -> tuple[int, float] | None:
        for i, (t, texts) in enumerate(self.requests):
            if t >= after and text in texts:
                return i, t
        return None


class SteerRuntime(Protocol):
    """One conversation of a runtime, driven the way its users steer it."""

    def start(self, prompt: str) -> None:
        """Start a run with ``prompt`` in the background (no run is active)."""

    def steer(self, text: str) -> bool:
        """Give the active run a message; False when the runtime refuses (the caller is told)."""

    @property
    def running(self) -> bool: ...

    async def wait(self) -> None:
        """Until the active run (and anything it took on) has ended."""

    def stop(self) -> None:
        """Stop the active run, keeping what it has done."""

    def returned(self) -> list[str]:
        """After a run ended: the messages it accepted and handed back undelivered."""


Factory = Callable[[Brain], SteerRuntime]


# ---------------------------------------------------------------- latency
class LatencyBrain(Brain):
    def __init__(self, case: str) -> None:
        super().__init__()
        self.case = case
        self.in_flight = asyncio.Event()
        self.step_end = 0.0

    async def answer(self, user_texts: list[str], last_is_user: bool) -> Decision:
        if "steer" in user_texts or self.calls > 1:
            return "done"
        if self.case == "model":
            self.in_flight.set()
            await asyncio.sleep(STEP_S)
            self.step_end = now()
            return ("work", 0)
        return ("work", int(STEP_S * 1e6))

    async def work(self, us: int) -> str:
        if self.case == "tool":
            self.in_flight.set()
        await asyncio.sleep(us / 1e6)
        if self.case == "tool":
            self.step_end = now()
        return "worked"


async def run_steer_latency(factory: Factory) -> dict[str, Any]:
    out: dict[str, Any] = {"step_ms": STEP_S * 1000, "trials": TRIALS}
    for case in ("tool", "model"):
        total, beyond, ack, missed = [], [], [], 0
        for trial in range(TRIALS + 1):  # the first is a warm-up
            brain = LatencyBrain(case)
            rt = factory(brain)
            rt.start("go")
            await asyncio.wait_for(brain.in_flight.wait(), LIMIT_S)
            await asyncio.sleep(STEP_S / 2)
            t0 = now()
            accepted = rt.steer("steer")
            acked = now()
            await asyncio.wait_for(rt.wait(), LIMIT_S)
            found = brain.first_carrying("steer", t0)
            if not trial:
                continue
            if not accepted or found is None:
                missed += 1
                continue
            ack.append((acked - t0) * 1e6)
            total.append((found[1] - t0) * 1000)
            beyond.append((found[1] - brain.step_end) * 1000)
        out[f"{case}_steer_to_request_ms"] = C.r(statistics.median(total), 3) if total else None
        out[f"{case}_after_step_ms"] = C.r(statistics.median(beyond), 3) if beyond else None
        out[f"{case}_after_step_samples_ms"] = [C.r(x, 3) for x in beyond]
        out[f"{case}_steer_call_us"] = C.r(statistics.median(ack), 1) if ack else None
        out[f"{case}_missed"] = missed
    return out


# ---------------------------------------------------------------- share
class ShareBrain(Brain):
    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self.started = asyncio.Event()

    async def answer(self, user_texts: list[str], last_is_user: bool) -> Decision:
        self.started.set()
        if self.calls >= SHARE_CALLS:
            return "done"
        await asyncio.sleep(self.rng.uniform(0, 0.002))
        return ("work", self.rng.randrange(0, 2000))


async def run_steer_share(factory: Factory, rounds: int = 3) -> dict[str, Any]:
    honoured = sent = refused = 0
    late: Counter[int] = Counter()
    for seed in range(rounds):
        brain = ShareBrain(seed)
        rt = factory(brain)
        rt.start("go")
        await asyncio.wait_for(brain.started.wait(), LIMIT_S)
        rng = random.Random(1000 + seed)
        steers: list[tuple[str, float]] = []
        while brain.calls < SHARE_CALLS - 5 and rt.running:
            await asyncio.sleep(rng.uniform(0, 0.003))
            text = f"s{len(steers)}"
            if rt.steer(text):
                steers.append((text, now()))
            else:
                refused += 1
        await asyncio.wait_for(rt.wait(), LIMIT_S)
        for text, t in steers:
            nxt = next((i for i, (rt_, _) in enumerate(brain.requests) if rt_ >= t), None)
            first = brain.first_carrying(text)
            sent += 1
            if nxt is None or first is None:
                late[-1] += 1  # never carried
            elif first[0] == nxt:
                honoured += 1
            else:
                late[first[0] - nxt] += 1
    return {"steers": sent, "honoured_next_request": honoured,
            "honoured_share": C.r(honoured / sent, 4) if sent else None,
            "late_by_requests": {str(k): v for k, v in sorted(late.items())},
            "refused": refused, "model_calls_per_run": SHARE_CALLS}


# ---------------------------------------------------------------- races
class RaceBrain(Brain):
    """User message -> one tool call -> final text; a fifth of the messages are fired from
    the final answer, so they land while the run ends. Keeps counts, not contexts."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.rng = random.Random(seed)
        self.seen: set[str] = set()
        self.duplicated: set[str] = set()
        self.out_of_order = 0
        self.on_final: Callable[[], None] = lambda: None
        self.on_tool: Callable[[], None] = lambda: None
        self.stop_share = 0.0

    async def decide(self, user_texts: list[str], last_is_user: bool) -> Decision:
        self.calls += 1
        counts = Counter(t for t in user_texts if t.startswith("m"))
        self.duplicated.update(t for t, n in counts.items() if n > 1)
        self.seen.update(counts)
        ids = [int(t[1:]) for t in user_texts if t.startswith("m")]
        self.out_of_order += any(a > b for a, b in itertools.pairwise(ids))
        await asyncio.sleep(self.rng.uniform(0, 0.0005))
        if last_is_user:
            if self.rng.random() < self.stop_share:
                asyncio.get_running_loop().call_later(0.0002, self.on_tool)
            return ("work", self.rng.randrange(300, 800))
        if self.rng.random() < 0.5:
            asyncio.get_running_loop().call_soon(self.on_final)
        return "done"


class ReRunDriver:
    """The front end a user of a runtime without a send-to-a-busy-session call writes: steer
    the active run, or start a run with the message when there is none or it refuses."""

    def __init__(self, rt: SteerRuntime) -> None:
        self.rt = rt
        self.inbox: list[str] = []
        self.refused = 0
        self.handed_back = 0
        self.task: asyncio.Task[None] | None = None

    def send(self, text: str) -> None:
        if self.rt.running and self.rt.steer(text):
            return
        if self.rt.running:
            self.refused += 1
        self.inbox.append(text)
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self.inbox:
            if self.rt.running:
                await self.rt.wait()
                continue
            self.rt.start(self.inbox.pop(0))
            while self.inbox and self.rt.steer(self.inbox[0]):
                self.inbox.pop(0)
            await self.rt.wait()
            back = self.rt.returned()
            self.handed_back += len(back)
            self.inbox[:0] = back

    async def wait(self) -> None:
        while (self.task is not None and not self.task.done()) or self.rt.running:
            if self.task is not None and not self.task.done():
                await self.task
            else:
                await self.rt.wait()


async def run_steer_races(factory: Factory, sender: Callable[[SteerRuntime], Any] | None = None,
                          stop_share: float = 0.0) -> dict[str, Any]:
    """``sender(rt)`` returns the runtime's own (send, wait) pair when it has one (steerable's
    ``AgentLoop.send``); otherwise ``ReRunDriver`` is the front end."""
    brain = RaceBrain(7)
    brain.stop_share = stop_share
    rt = factory(brain)
    driver = ReRunDriver(rt)
    stops = 0

    def stop() -> None:
        nonlocal stops
        if rt.running:
            stops += 1
            rt.stop()

    send: Callable[[str], None]
    wait: Callable[[], Awaitable[None]]
    send, wait = sender(rt) if sender else (driver.send, driver.wait)
    counter = iter(range(RACE_MESSAGES))
    fired: list[str] = []

    def fire() -> None:
        n = next(counter, None)
        if n is not None:
            fired.append(f"m{n}")
            send(f"m{n}")

    brain.on_final = fire
    brain.on_tool = stop
    rng = random.Random(11)
    t0 = now()
    while len(fired) < RACE_MESSAGES:
        await asyncio.sleep(rng.uniform(0, 0.002))
        fire()
    await asyncio.wait_for(wait(), LIMIT_S * 4)
    wall = now() - t0
    lost = [m for m in fired if m not in brain.seen]
    return {"messages": len(fired), "lost": len(lost), "lost_examples": lost[:5],
            "duplicated": len(brain.duplicated), "out_of_order_requests": brain.out_of_order,
            "refused_then_rerun": driver.refused, "stops": stops,
            "handed_back_then_resent": driver.handed_back,
            "model_calls": brain.calls, "wall_s": C.r(wall, 3)}
