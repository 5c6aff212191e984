"""A2A 1.0 (SPEC 12) on ``steerable serve``, with the official ``a2a-sdk`` (the ``a2a`` extra).

A context is a session, a task a turn; see ``_executor`` for the mapping and ``_server`` for
the endpoints (the agent card at ``/.well-known/agent-card.json``, JSON-RPC at ``/a2a``).
"""

from steerable.protocols.a2a._executor import Runner, TurnExecutor
from steerable.protocols.a2a._server import (
    CARD_PATH,
    MAX_REQUEST,
    RPC_PATH,
    A2AEndpoints,
    BoundedTaskStore,
    a2a_endpoints,
    agent_card,
)

__all__ = ["CARD_PATH", "MAX_REQUEST", "RPC_PATH", "A2AEndpoints", "BoundedTaskStore", "Runner",
           "TurnExecutor", "a2a_endpoints", "agent_card"]
