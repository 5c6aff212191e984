"""``steerable run --otel`` traces to the tracer provider the environment set up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel test dependencies are not installed")

# What `opentelemetry-instrument` would do: a global tracer provider, here printing each span.
PROGRAM = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
trace.set_tracer_provider(provider)
from steerable.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_run_with_otel_emits_spans(cli_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [["read", {"path": "a.txt"}]]},
                                  {"text": "It says hello."}]))
    args = ["run", "what is in a.txt?", "--json", "--provider", "scripted", "--script",
            str(script), "--workspace", str(tmp_path)]
    traced = _run(cli_env, *args, "--otel")
    assert traced.returncode == 0, traced.stderr
    assert '"name": "invoke_agent coder"' in traced.stderr
    assert '"name": "execute_tool read"' in traced.stderr
    assert '"gen_ai.provider.name": "scripted"' in traced.stderr
    assert "hello" not in traced.stderr.split('"name": "invoke_agent coder"')[1]  # no content
    untraced = _run(cli_env, *args)
    assert untraced.returncode == 0 and "invoke_agent" not in untraced.stderr
    by_env = _run({**cli_env, "STEERABLE_OTEL": "1"}, *args)
    assert '"name": "invoke_agent coder"' in by_env.stderr
    off = _run({**cli_env, "STEERABLE_OTEL": "0"}, *args)
    assert "invoke_agent" not in off.stderr
