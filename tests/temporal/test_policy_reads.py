"""The coding agent's tool policy in a Temporal workflow sees the workspace only through reads
the history records (``RecordedReads`` over ``workflow_read``): it judges a change by the files
as locally, and a replay after the files changed decides what the first run decided."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from steerable import Agent, Reply, ScriptedProvider
from steerable.coding import Sandbox, Workspace, coding_tools
from steerable.coding.policy import NOTHING_CHANGED_MARK, RecordedReads, ToolPolicy, read_functions
from steerable.temporal import WorkerHook, workflow_read
from tests.temporal._harness import events_until, running, turn_end


async def test_a_replay_after_the_files_changed_judges_the_change_as_the_run_did(
        tmp_path: Path, temporal_target: str, events_url: str, task_queue: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("old\n")
    provider = ScriptedProvider([
        Reply(text=json.dumps({"kind": "change"})),  # the policy's classification call
        Reply(text=json.dumps({"needs": "writing"})),  # and its second reading, which agrees
        # A command: no change by its success alone, only by what it did to the files.
        Reply(tool_calls=[("bash", {"command": "echo newer > a.txt"})]),
        Reply(text="done")])
    workspace = Workspace(ws)
    agent = Agent(name="coder", instructions="x", provider=provider,
                  tools=coding_tools(workspace, sandbox=Sandbox(enabled=False)))
    policies: list[ToolPolicy] = []

    def policy() -> ToolPolicy:  # one per workflow run, and one for the replay
        policies.append(ToolPolicy(workspace, reads=RecordedReads(workflow_read)))
        return policies[-1]

    looked: list[str] = []
    reads = {name: _counted(name, fn, looked) for name, fn in read_functions(ws).items()}
    sid = f"{task_queue}-change"
    async with running(agent, temporal_target, task_queue, events_url, reads=reads,
                       hooks=[WorkerHook(policy, in_workflow=True)]) as client:
        outcome = await client.result(sid, (await client.send("rewrite the notes", sid))
                                      .message_id)
        assert (outcome.status, outcome.text) == ("completed", "done"), outcome
        assert NOTHING_CHANGED_MARK not in outcome.text
        results = [str(m.content) for m in await client.session_messages(sid)
                   if m.role == "tool"]
        assert "[files this command changed in the workspace: a.txt (4 -> 6 bytes)]" \
            in results[0]
        turn_id = (await events_until(client, sid, turn_end))[-1]["turn_id"]
        # The files change back; the harness then replays the history on leaving.
        (ws / "a.txt").write_text("old\n")
        seen = len(looked)
    # (The first policy was made by WorkerHook to check its hook points: it judged nothing.)
    verdicts = [p.verdict(turn_id) for p in policies]
    judged = [v for v in verdicts if v is not None]
    assert judged and judged[0].changed
    # The replay's policy is the last: a look made again would find nothing changed, the
    # replay read the recorded looks.
    assert len(judged) >= 2 and verdicts[-1] == judged[0]
    assert len(looked) == seen and "workspace.start" in looked


def _counted(name: str, fn: Any, looked: list[str]) -> Any:
    def read(*args: Any) -> Any:
        looked.append(name)
        return fn(*args)
    return read
