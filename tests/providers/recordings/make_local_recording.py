"""How ``local_tool_turn.jsonl`` was made: a real run of the embedded model, recorded.

The embedded default model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, verified by sha256 at its
default path) is served by llama.cpp's own ``llama-server`` on a loopback port, and
``LocalModelProvider(base_url=...)`` talks to it, so the recording goes through the local
provider's profile and tool-call parsing. Run it again (minutes on 2 cores) with::

    python tests/providers/recordings/make_local_recording.py /path/to/llama-server

The tests only replay the file: no model is needed to check it.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from steerable import Agent, AgentLoop, tool
from steerable.providers._model_file import default_model_path, verify
from steerable.providers.local import LocalModelProvider
from steerable.replay import Recorder

OUT = Path(__file__).with_name("local_tool_turn.jsonl")


@tool(read_only=True)
async def read_file(path: str) -> str:
    """Read a text file and return its contents."""
    return "The secret word is: pineapple."


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


async def record(server: str) -> None:
    model = default_model_path()
    verify(model)
    port = _port()
    proc = subprocess.Popen([server, "-m", str(model), "--host", "127.0.0.1", "--port",
                             str(port), "-c", "8192", "-t", "2", "--jinja"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not _healthy(port):  # /health answers 503 while the model loads
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("llama-server did not start")
            await asyncio.sleep(0.5)
        provider = LocalModelProvider(base_url=f"http://127.0.0.1:{port}/v1",
                                      model="qwen2.5-coder-0.5b-instruct")
        agent = Agent(name="local", instructions="You are a helpful assistant.",
                      provider=provider, tools=[read_file], max_iterations=4)
        loop = AgentLoop(agent)
        async with Recorder(loop, OUT):
            result = await loop.run_turn("Read the file notes.txt and tell me the secret word.",
                                         session_id="s1")
        await loop.aclose()
        await provider.aclose()
        print(result.status, repr(result.text), result.error)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    asyncio.run(record(sys.argv[1]))
