"""Hooks that watch and change a turn, permission rules, and an approval answered in code.

A hook may rewrite a tool's arguments, deny a call (the model reads why), or stand in for the
tool. Permission rules decide which calls need a person; ``HumanApprover`` asks through
``APPROVAL_REQUESTED`` events, and any front end answers with ``resolve_approval``.
"""

import asyncio

from steerable import (
    Agent,
    AgentLoop,
    EventKind,
    Hook,
    HookAction,
    HookDecision,
    HookResult,
    HumanApprover,
    Permissions,
    Reply,
    ScriptedProvider,
    ToolCallContext,
    tool,
)


@tool()
async def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path: Where to write.
        content: What to write.
    """
    return f"wrote {len(content)} bytes to {path}"


class StayInProject(Hook):
    """Denies writes outside the project and tidies the paths it lets through."""

    def before_tool(self, ctx: ToolCallContext) -> HookResult:
        path = str(ctx.call.arguments.get("path", ""))
        if path.startswith("/"):
            return HookDecision(HookAction.DENY_TOOL, reason="outside the project")
        if path.startswith("./"):
            return HookDecision(HookAction.MODIFY, arguments={**ctx.call.arguments, "path": path[2:]})
        return None


async def main() -> None:
    provider = ScriptedProvider([
        Reply(tool_calls=[("write_file", {"path": "/etc/motd", "content": "hi"}),
                          ("write_file", {"path": "./notes.md", "content": "# Notes"})]),
        Reply(text="notes.md is written; /etc/motd was refused."),
    ])
    agent = Agent(name="writer", provider=provider, tools=[write_file])
    rules = Permissions([("ask", "write_file")])      # every write needs a person
    async with AgentLoop(agent, permissions=rules) as loop:
        loop.register_hook(StayInProject(), priority=10)
        loop.register_hook(HumanApprover())
        with loop.subscribe(kinds=[EventKind.APPROVAL_REQUESTED, EventKind.TOOL_EXEC_END,
                                   EventKind.TOOL_EXEC_SKIPPED, EventKind.TURN_END]) as events:
            turn = loop.start_turn("Write the notes.", session_id="s1")
            async for event in events:
                if event.kind is EventKind.APPROVAL_REQUESTED:
                    print("asked:", event.tool_name, event.arguments)
                    loop.resolve_approval(event.request_id, approved=True)
                elif event.kind is EventKind.TOOL_EXEC_SKIPPED:
                    print("skipped:", event.reason, "-", event.detail)
                elif event.kind is EventKind.TOOL_EXEC_END:
                    print("ran:", event.tool_name)
                else:
                    break
        print((await turn).text)


asyncio.run(main())
