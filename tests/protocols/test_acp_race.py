"""Steering against the turn's end, many times over: every message is taken exactly once.

A steer that arrives while the turn is finishing must be either in that turn (``injected``),
in a turn of its own (``startedNewTurn``), or handed back to the editor (``promptRequired``,
which the editor then sends as a prompt): never lost, never twice. 1,000 cases in process
(the package's client and agent sides over a socket pair), and a share against the
``steerable acp`` subprocess.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")


from steerable import Agent, AgentLoop, EventKind, Reply, ScriptedProvider  # noqa: E402
from tests.protocols._acp_client import Editor, in_process  # noqa: E402
from tests.protocols.test_acp_cli import agent as subprocess_agent  # noqa: E402
from tests.protocols.test_acp_cli import script, steering, text  # noqa: E402

CASES = 1000
SUBPROCESS_CASES = 60


def users(messages: Sequence[Any]) -> list[str]:
    return [m.content for m in messages if m.role == "user"]


def once(history: list[str], prompt: str, steer: str) -> None:
    """Both messages are in the conversation, once each, the prompt first."""
    assert history.count(prompt) == 1 and history.count(steer) == 1, history
    assert history.index(prompt) < history.index(steer), history


async def test_steer_against_the_turns_end_1000_cases_nothing_lost(tmp_path: Path) -> None:
    rng = random.Random(22)

    def answer(request: Any) -> Reply:
        return Reply(text="ok", delay=rng.uniform(0, 0.003))

    agent = Agent(name="race", instructions="Answer.", provider=ScriptedProvider(
        [answer] * (CASES * 3)))
    loop = AgentLoop(agent, checkpoints=False)
    injected = loop.subscribe(kinds=[EventKind.STEERING_INJECTED], buffer=CASES * 2)
    outcomes: Counter[str] = Counter()
    taken: dict[str, str] = {}
    editor = Editor()
    async with in_process(loop, agent, editor) as client:
        for i in range(CASES):
            sid = (await client.new_session(cwd=str(tmp_path))).session_id
            turn = asyncio.ensure_future(client.prompt(session_id=sid, prompt=text(f"p{i}")))
            await asyncio.sleep(rng.uniform(0, 0.004))
            idle = "promptRequired" if i % 2 else None
            out = await client.ext_method("session/steering", steering(sid, f"s{i}", idle))
            outcomes[out["outcome"]] += 1
            if "_meta" in out:
                taken[out["_meta"]["steerable"]["messageId"]] = f"s{i}"
            assert (await turn).stop_reason == "end_turn"
            if out["outcome"] == "promptRequired":  # handed back: the editor sends it
                await client.prompt(session_id=sid, prompt=text(f"s{i}"))
            await loop.wait_session(sid)
            once(users(loop.session_messages(sid)), f"p{i}", f"s{i}")
        # the editor is told how each message it steered with ended: delivered, once
        for _ in range(500):
            if len(editor.notes) >= len(taken):
                break
            await asyncio.sleep(0.01)
    # "injected" means it reached the running turn's next model call, and only that
    into_turn = [e.text for e in injected.drain_nowait()]
    assert len(into_turn) == outcomes["injected"] == len(set(into_turn))
    states = Counter(params["state"] for _, params in editor.notes)
    assert sorted(p["messageId"] for _, p in editor.notes) == sorted(taken)
    assert states == {"delivered": len(taken)}
    print(f"\n{CASES} steers against the turn's end: {dict(outcomes)}, all delivered once")
    # the race was really run: each answer happened
    assert outcomes["injected"] and outcomes["promptRequired"] and outcomes["startedNewTurn"]


async def test_steer_against_the_turns_end_subprocess_share(
        cli_env: dict[str, str], tmp_path: Path, ws: Path) -> None:
    rng = random.Random(7)
    steps = [{"text": "ok", "delay": round(rng.uniform(0, 0.01), 4)}
             for _ in range(SUBPROCESS_CASES * 3)]
    editor = Editor()
    outcomes: Counter[str] = Counter()
    sessions = []
    async with subprocess_agent(cli_env, editor, "--script", script(tmp_path, steps)) as conn:
        for i in range(SUBPROCESS_CASES):
            sid = (await conn.new_session(cwd=str(ws))).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text(f"p{i}")))
            await asyncio.sleep(rng.uniform(0, 0.015))
            out = await conn.ext_method("session/steering",
                                        steering(sid, f"s{i}", "promptRequired"))
            outcomes[out["outcome"]] += 1
            await turn
            if out["outcome"] == "promptRequired":
                await conn.prompt(session_id=sid, prompt=text(f"s{i}"))
            sessions.append(sid)
        for i, sid in enumerate(sessions):
            before = len(editor.updates)
            await conn.load_session(cwd=str(ws), session_id=sid)
            replayed = [u.content.text for _, u in editor.updates[before:]
                        if u.session_update == "user_message_chunk"]
            once(replayed, f"p{i}", f"s{i}")
    print(f"\n{SUBPROCESS_CASES} steers over stdio: {dict(outcomes)}")
    assert outcomes["injected"] and outcomes["promptRequired"]
    live = [u.content.text for u in editor.of("user_message_chunk")
            if (u.field_meta or {}).get("steerable", {}).get("steering")]
    assert len(live) == outcomes["injected"]  # each injected steer reached its turn
