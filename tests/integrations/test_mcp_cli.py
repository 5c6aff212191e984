"""MCP servers in the CLI: configured in TOML, shown by config show, listed, used by run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import SERVER, run_cli

pytest.importorskip("mcp", reason="the mcp extra is not installed")


def _configure(env: dict[str, str], marks: Path) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "steerable" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "[mcp_servers.t]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(SERVER))}, \"stdio\"]\n"
        f"env = {{ MCP_TEST_MARKS = {json.dumps(str(marks))}, SECRET_THING = \"abcdefghijkl\" }}\n"
        "timeout = 20\n"
        "[mcp_servers.gone]\n"
        "url = \"http://127.0.0.1:9/mcp\"\n"
    )


def test_config_show_lists_servers_with_secrets_masked(cli_env: dict[str, str], marks: Path) -> None:
    _configure(cli_env, marks)
    shown = json.loads(run_cli(cli_env, "config", "show", "--json").stdout)
    servers = {s["name"]: s for s in shown["mcp_servers"]}
    assert servers["t"]["args"][-1] == "stdio" and servers["t"]["source"] == "user config"
    assert "abcdefghijkl" not in json.dumps(shown)
    assert servers["gone"]["url"] == "http://127.0.0.1:9/mcp"
    text = run_cli(cli_env, "config", "show").stdout
    assert "mcp server gone: http://127.0.0.1:9/mcp    # user config" in text


def test_mcp_list_shows_each_servers_tools(cli_env: dict[str, str], marks: Path) -> None:
    _configure(cli_env, marks)
    res = run_cli(cli_env, "mcp", "list")
    assert res.returncode == 1  # 'gone' cannot be reached, and says so
    assert "mcp__t__echo  [read-only]  Say the text back." in res.stdout
    assert "mcp__t__add  [mutating]" in res.stdout
    assert "gone: FAILED" in res.stdout
    listed = json.loads(run_cli(cli_env, "mcp", "list", "--json").stdout)
    assert {"server": "t", "name": "mcp__t__pid", "tool": "pid", "read_only": True,
            "description": "The server's process id."} in listed["tools"]


def test_run_uses_the_configured_servers_tools(cli_env: dict[str, str], marks: Path,
                                               tmp_path: Path) -> None:
    _configure(cli_env, marks)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [["mcp__t__echo", {"text": "from cli"}]]},
                                  {"text": "done"}]))
    res = run_cli(cli_env, "run", "go", "--json", "--provider", "scripted", "--script",
                  str(script), "--workspace", str(tmp_path))
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    end = next(e for e in events if e["kind"] == "tool_exec_end")
    assert (end["tool_name"], end["content"]) == ("mcp__t__echo", "echo: from cli")
    assert "MCP server gone left out" in res.stderr


def test_a_project_file_cannot_add_servers(cli_env: dict[str, str], tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".steerable.toml").write_text('[mcp_servers.evil]\ncommand = "rm"\n')
    res = run_cli(cli_env, "config", "show", "--json", cwd=project)
    assert json.loads(res.stdout)["mcp_servers"] == []
    assert "[mcp_servers] from a project file are ignored" in res.stderr


def test_serve_offers_the_configured_servers_tools(cli_env: dict[str, str], marks: Path,
                                                   tmp_path: Path) -> None:
    import subprocess

    import httpx

    _configure(cli_env, marks)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"tool_calls": [["mcp__t__echo", {"text": "served"}]]},
                                  {"text": "done"}]))
    proc = subprocess.Popen([sys.executable, "-m", "steerable", "serve", "--port", "0",
                             "--provider", "scripted", "--script", str(script), "--workspace",
                             str(tmp_path)], env=cli_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on http://127.0.0.1:"), proc.stderr
        with httpx.Client(base_url=line.split()[-1], timeout=10) as client:
            assert client.post("/v1/sessions/m1/messages", json={"text": "go"}).status_code == 202
            with client.stream("GET", "/v1/sessions/m1/events",
                               headers={"Last-Event-ID": "0"}) as events:
                for raw in events.iter_lines():
                    if raw.startswith("data:") and '"turn_end"' in raw:
                        break
            messages = client.get("/v1/sessions/m1").json()["messages"]
        assert "echo: served" in [m["content"] for m in messages]
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def _old_sdk_first(env: dict[str, str], tmp_path: Path) -> None:
    """Put a 1.x ``mcp`` (as a pip install of the previous SDK leaves it) ahead of the real one."""
    shadow = tmp_path / "old-sdk"
    (shadow / "mcp").mkdir(parents=True)
    (shadow / "mcp" / "__init__.py").write_text("from mcp.server.fastmcp import FastMCP\n")
    info = shadow / "mcp-1.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcp\nVersion: 1.26.0\n")
    env["PYTHONPATH"] = f"{shadow}{':'}{env['PYTHONPATH']}"


def test_an_old_sdk_is_one_line_and_runs_without_servers_still_work(
        cli_env: dict[str, str], marks: Path, tmp_path: Path) -> None:
    _old_sdk_first(cli_env, tmp_path)
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "fine"}]))
    run = ("run", "go", "--json", "--provider", "scripted", "--script", str(script),
           "--workspace", str(tmp_path))
    res = run_cli(cli_env, *run)
    assert res.returncode == 0, res.stderr  # no server configured: the SDK is never imported
    _configure(cli_env, marks)
    for args in (run, ("mcp", "list")):
        res = run_cli(cli_env, *args)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert "but mcp 1.26 is installed" in lines[0] and "pip install" in lines[0]
