"""Model profiles: per-model quirks, so weak models work through the same code path.

A profile says how a model deviates from the OpenAI-compatible contract: it writes tool calls
as text, it only reads tool results sent as a user message, it needs temperature 0. The
provider applies the profile when it builds the request and reads the reply; nothing else in
steerable knows about it. ``profile_for(model)`` picks one by model-name pattern; a provider
also takes ``profile=`` to choose one explicitly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from steerable._messages import Message, ToolCall

__all__ = [
    "DEFAULT_PROFILE",
    "LLAMA_SERVER_QWEN",
    "PROFILES",
    "QWEN25_CODER_SMALL",
    "ModelProfile",
    "profile_for",
    "profile_for_server",
    "tool_call_as_text",
    "tool_result_as_user",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """How a model deviates from the API contract.

    ``text_tool_calls``: tool calls may arrive as JSON in the reply text (``<tool_call>`` tags,
    fenced or bare) and are parsed back into calls. ``tool_results_as_user``: tool results are
    sent as user messages ("Result of name(args): ...") and the model's own calls as text, so the
    conversation is plain text. ``calls_in_history``: False leaves the model's earlier calls out
    of the history it is sent (the result message names the call instead), and the words it
    wrote around them too: measured with the 1.5B, a reply that narrated a call ("...So, the
    notes.txt file does not contain any lines that do not appear in the output.") was copied
    word for word as the answer two calls later, the file's text in front of it.
    ``tools_after_results``: False sends a request that ends with tool results without tools, so
    the model answers from them (one round of tools per turn) unless the request's
    ``ToolChoice`` says otherwise. ``restate_request``: a results message ends with the user's
    request again ("My request was: ..."). ``temperature``: forced on every request when not None.
    """

    name: str
    text_tool_calls: bool = False
    tool_results_as_user: bool = False
    calls_in_history: bool = True
    tools_after_results: bool = True
    restate_request: bool = False
    temperature: float | None = None

    def apply_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(params)
        if self.temperature is not None:
            out["temperature"] = self.temperature
        return out


DEFAULT_PROFILE = ModelProfile(name="default")

QWEN25_CODER_SMALL = ModelProfile(
    name="qwen2.5-coder-small",
    # Measured with Qwen2.5-Coder-0.5B-Instruct Q4_K_M through llama-cpp-python 0.3.36: calls
    # come as fenced or bare JSON; it answers from a result sent as a user message, but not from
    # a role "tool" one, and not while it still sees its own call or the tool definitions (it
    # repeats the call instead); sampling above temperature 0 corrupts the arguments.
    text_tool_calls=True,
    tool_results_as_user=True,
    calls_in_history=False,
    tools_after_results=False,
    temperature=0.0,
)

LLAMA_SERVER_QWEN = ModelProfile(
    name="qwen2.5-coder-llama-server",
    # Qwen2.5-Coder served by llama.cpp's llama-server with --jinja (what LocalModelProvider
    # starts): the server parses <tool_call> blocks into real tool calls under a grammar; a call
    # the model writes outside the tags (fenced JSON) is still read back from the text.
    text_tool_calls=True,
    # Measured through llama-server with Qwen2.5-Coder-1.5B: given a native "tool" result it
    # answered "{}" or made up a different call; with the result as a user message that
    # restates the request it answers from the result. Which tools it may call on each call
    # is the caller's ``ToolChoice`` (the coding agent's policy, ``steerable.coding.policy``).
    tool_results_as_user=True,
    calls_in_history=False,
    restate_request=True,
    temperature=0.0,
)

PROFILES: Sequence[tuple[re.Pattern[str], ModelProfile]] = (
    (re.compile(r"qwen2\.?5[-_ ]?coder[-_ ]?(0\.5|1\.5)b", re.IGNORECASE), QWEN25_CODER_SMALL),
)
"""Model-name patterns, first match wins."""


def profile_for(model: str | None) -> ModelProfile:
    """The profile whose pattern matches ``model``, else the default (no quirks)."""
    if model:
        for pattern, profile in PROFILES:
            if pattern.search(model):
                return profile
    return DEFAULT_PROFILE


def profile_for_server(model_ids: Sequence[str], llama_server: bool) -> ModelProfile:
    """The profile for a server that said what it runs: ``model_ids`` from ``/v1/models``
    (and the model file's name from llama-server's ``/props``), ``llama_server`` when
    ``/props`` answered as llama.cpp's server does. A small Qwen2.5-Coder there gets the
    llama-server profile (the same as the embedded model), elsewhere the one its name picks."""
    for model in model_ids:
        found = profile_for(model)
        if found is not DEFAULT_PROFILE:
            return LLAMA_SERVER_QWEN if llama_server and found is QWEN25_CODER_SMALL else found
    return DEFAULT_PROFILE


def _call_signature(call: ToolCall | None, name: str | None) -> str:
    if call is None:
        return f"{name or 'tool'}(...)"
    return f"{call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})"


def tool_result_as_user(message: Message, calls: Mapping[str, ToolCall]) -> str:
    """The text of a user message that carries a tool result, naming the call it answers."""
    call = calls.get(message.tool_call_id or "")
    what = "Error from" if message.is_error else "Result of"
    return f"{what} {_call_signature(call, message.name)}:\n{message.text}"


def tool_call_as_text(call: ToolCall) -> str:
    """A call as the model itself would write it, for a conversation kept in plain text."""
    payload = json.dumps({"name": call.name, "arguments": dict(call.arguments)},
                         ensure_ascii=False)
    return f"```json\n{payload}\n```"
