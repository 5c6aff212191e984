"""steerable as an ACP agent (Agent Client Protocol, package ``agent-client-protocol``).

``steerable acp`` serves it over stdio for editors (Zed, JetBrains IDEs, Neovim...); from code::

    async with SteerableAcpAgent(loop, make_agent, approver=approver) as agent:
        await acp.run_agent(agent, use_unstable_protocol=True)
"""

from steerable.protocols.acp._agent import AcpOptions, AgentFactory, SteerableAcpAgent
from steerable.protocols.acp._approval import EditorApprover

__all__ = ["AcpOptions", "AgentFactory", "EditorApprover", "SteerableAcpAgent"]
