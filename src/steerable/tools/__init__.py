"""Tools: the ``Tool`` seam, ``@tool``, and the context a running tool receives."""

from steerable.tools._base import (
    BaseTool,
    CarriedState,
    Tool,
    ToolContext,
    UncoveredSubject,
    result_from_return,
)
from steerable.tools._function import FunctionTool, tool

__all__ = [
    "BaseTool",
    "CarriedState",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "UncoveredSubject",
    "result_from_return",
    "tool",
]
