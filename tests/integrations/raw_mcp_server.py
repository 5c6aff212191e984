"""A hand-written MCP server over stdio, one revision at a time, for the revision tests.

``python raw_mcp_server.py 2025`` speaks only the 2025-06-18 revision: ``initialize`` and no
``server/discover`` (method not found), as servers built on the 1.x SDKs do. ``python
raw_mcp_server.py 2026`` speaks only the 2026-07-28 revision: ``server/discover``, no
``initialize``, and its ``ask`` tool answers ``input_required``. Payloads are built with the
``mcp_types`` models so their shape is the revision's own; the transport is plain JSON lines.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import mcp_types as t

ERA = sys.argv[1]
ECHO = t.Tool(name="echo", description="Say the text back.",
              input_schema={"type": "object", "properties": {"text": {"type": "string"}}})
ASK = t.Tool(name="ask", description="Ask the user first.", input_schema={"type": "object"})


def dump(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if ERA == "2025":  # the 2026 revision's cache and result-type fields are not in 2025's
        for key in ("ttlMs", "cacheScope", "resultType"):
            out.pop(key, None)
    return out


def answer(method: str, params: dict[str, Any]) -> dict[str, Any] | None:
    if method == "initialize" and ERA == "2025":
        return {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw2025", "version": "1"}}
    if method == "server/discover" and ERA == "2026":
        return dump(t.DiscoverResult(
            supported_versions=["2026-07-28"], result_type="complete", ttl_ms=0,
            cache_scope="public", capabilities=t.ServerCapabilities(tools=t.ToolsCapability())))
    if method == "ping" and ERA == "2025":
        return {}
    if method == "tools/list":
        return dump(t.ListToolsResult(tools=[ECHO, ASK] if ERA == "2026" else [ECHO]))
    if method == "tools/call" and params.get("name") == "echo":
        text = f"{ERA} echo: {params.get('arguments', {}).get('text')}"
        return dump(t.CallToolResult(content=[t.TextContent(type="text", text=text)]))
    if method == "tools/call" and params.get("name") == "ask" and ERA == "2026":
        return dump(t.InputRequiredResult(result_type="input_required", request_state="s1",
                                          input_requests={"confirm": t.ElicitRequest(
                                              params=t.ElicitRequestFormParams(
                                                  message="Proceed?", requested_schema={
                                                      "type": "object", "properties": {}}))}))
    return None


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification (initialized, cancelled)
        result = answer(message["method"], message.get("params") or {})
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
        if result is None:
            reply["error"] = {"code": -32601, "message": f"method not found: {message['method']}"}
        else:
            reply["result"] = result
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
