"""Optional integrations, each behind its own extra and imported only when used:
``steerable.integrations.mcp`` (MCP tools, extra ``mcp``) and ``steerable.integrations.otel``
(OpenTelemetry traces, extra ``otel``). Record and replay needs no extra: ``steerable.replay``."""
