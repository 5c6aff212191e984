"""``Provider.stream`` is typed as what the loop needs from it: an async generator, which it
closes (``aclosing``) to cancel the call. Typed as a bare async iterator, every caller that closes
a stream needed a ``type: ignore``, and so would a user's code written the same way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_CODE = '''
from collections.abc import AsyncGenerator
from contextlib import aclosing

from steerable import Agent, LLMRequest, Provider
from steerable.providers import Chunk, StreamEnd, TextDelta


class Echo:
    """A provider as a user writes one: ``stream`` is an async generator."""

    async def stream(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        yield TextDelta("hi")
        yield StreamEnd()

    async def aclose(self) -> None:
        return None


async def first_text(provider: Provider, request: LLMRequest) -> str:
    async with aclosing(provider.stream(request)) as chunks:  # closing cancels the call
        async for chunk in chunks:
            if isinstance(chunk, TextDelta):
                return chunk.text
    return ""


agent = Agent(provider=Echo())
'''


def test_a_provider_stream_can_be_closed_with_no_type_ignore(tmp_path: Path) -> None:
    (tmp_path / "user_code.py").write_text(USER_CODE, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir",
         str(tmp_path / "cache"), str(tmp_path / "user_code.py")],
        capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
