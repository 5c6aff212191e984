"""The OpenAI-compatible Chat Completions provider (OpenAI, vLLM, Ollama, llama.cpp, LM Studio,
OpenRouter...).

Streams with ``stream: true``: text and reasoning deltas pass straight through; tool calls come
as argument fragments keyed by index, passed on as ``ToolArgsDelta`` as they come and yielded
whole once the reply ends. A model profile
adapts weak models (tool calls written as text, tool results sent as user messages). Retries,
timeouts and error wording live in ``_retry`` and ``_http``, shared with the Anthropic provider.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from steerable._messages import Message, ToolCall, Usage
from steerable._parts import Part, TextPart
from steerable.errors import ConfigurationError, RetryableProviderError
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
)
from steerable.providers._http import (
    ApiTarget,
    check_base_url,
    parse_event,
    stream_error,
    stream_events,
)
from steerable.providers._http_provider import HttpProvider
from steerable.providers._parts_wire import openai_parts
from steerable.providers._retry import RetryPolicy
from steerable.providers._textcalls import TextCallBuffer, distinct
from steerable.providers._timeouts import ProviderTimeouts
from steerable.providers._tool_wire import (
    NO_CALL_GRAMMAR,
    answer_format,
    call_schema,
    restate_request,
)
from steerable.providers.profiles import (
    DEFAULT_PROFILE,
    ModelProfile,
    profile_for,
    profile_for_server,
    tool_call_as_text,
    tool_result_as_user,
)

__all__ = ["OpenAIProvider", "ask_server_profile"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"


def _parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {}, f"arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return {}, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _wire_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(dict(call.arguments))}}


def wire_messages(messages: Sequence[Message], profile: ModelProfile) -> list[dict[str, Any]]:
    """Messages in the Chat Completions shape, adapted to the profile."""
    out: list[dict[str, Any]] = []
    calls: dict[str, ToolCall] = {}
    as_text = profile.tool_results_as_user
    returned: list[tuple[Message, list[Part]]] = []  # images and files of the tool results
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            calls.update((c.id, c) for c in m.tool_calls)
            # Without calls in the history, nor the words around them (``ModelProfile``).
            if not profile.calls_in_history:
                continue
            if as_text:
                text = "\n".join([m.text, *map(tool_call_as_text, m.tool_calls)]).strip()
                out.append({"role": "assistant", "content": text})
            else:
                # No "content": null: OpenAI allows leaving it out, llama-cpp-python rejects null.
                wire: dict[str, Any] = {"role": "assistant",
                                        "tool_calls": [_wire_call(c) for c in m.tool_calls]}
                if m.content:
                    wire["content"] = m.text
                out.append(wire)
        elif m.role == "tool" and as_text:
            text = tool_result_as_user(m, calls)
            previous = out[-1] if out else None
            if previous is not None and previous.get("_results"):
                previous["content"] += "\n\n" + text  # one user message for a batch of results
            else:
                out.append({"role": "user", "content": text, "_results": True})
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
            media: list[Part] = [p for p in m.parts if not isinstance(p, TextPart)]
            if media:
                returned.append((m, media))
            if returned and (i + 1 == len(messages) or messages[i + 1].role != "tool"):
                out.append(_returned_media(returned))
                returned = []
        elif isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
        elif m.role == "user":
            out.append({"role": "user", "content": openai_parts(m.content)})
        else:  # system and assistant messages take text only
            out.append({"role": m.role, "content": m.text})
    for item in out:
        item.pop("_results", None)
    return out


def _returned_media(returned: list[tuple[Message, list[Part]]]) -> dict[str, Any]:
    """The images and files tool results returned, as one user message after the results:
    a Chat Completions tool message carries text only (it shows their placeholders)."""
    content: list[dict[str, Any]] = []
    for m, media in returned:
        content.append({"type": "text", "text": f"Returned by tool call {m.tool_call_id} "
                                                f"({m.name}):"})
        content += openai_parts(media)
    return {"role": "user", "content": content}


def wire_tools(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": dict(t.parameters)}}
            for t in tools]


def _usage(usage: Mapping[str, Any], timings: Any) -> Usage:
    """Chat Completions usage; cached prompt tokens from ``prompt_tokens_details`` (OpenAI,
    vLLM, recent llama-server) or llama-server's ``timings.cache_n`` (older builds)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None and isinstance(timings, dict):
        cached = timings.get("cache_n")
    return Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                 int(cached or 0))


@dataclass(slots=True)
class _PartialCall:
    id: str | None = None
    name: str = ""
    fragments: list[str] = field(default_factory=list)


class _Reply:
    """The state of one streamed reply: partial tool calls, text held back, usage, finish."""

    __slots__ = ("api_url", "calls", "done", "finish", "model", "target", "text_calls", "usage")

    def __init__(self, target: ApiTarget, text_calls: bool, api_url: str | None = None) -> None:
        self.target = target
        self.api_url = api_url
        self.calls: dict[int, _PartialCall] = {}
        self.text_calls = TextCallBuffer() if text_calls else None
        self.usage: Usage | None = None
        self.model: str | None = None
        self.finish: str | None = None
        self.done = False

    def feed(self, data: Any) -> list[Chunk]:
        if not isinstance(data, dict):
            raise stream_error(self.target, f"unexpected chunk {str(data)[:200]!r}", None)
        if "error" in data:
            error = data["error"]
            if isinstance(error, dict):
                raise stream_error(self.target, str(error.get("message", error)),
                                   error.get("code") or error.get("type"))
            raise stream_error(self.target, str(error), None)
        out: list[Chunk] = []
        usage = data.get("usage")
        if isinstance(usage, dict):
            self.usage = _usage(usage, data.get("timings"))
        if isinstance(data.get("model"), str) and data["model"]:
            self.model = data["model"]
        for choice in data.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # n > 1 is not something a turn can use
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning:
                out.append(ThinkingDelta(reasoning))
            text = delta.get("content")
            if text:
                if self.text_calls is not None:
                    passed = self.text_calls.feed(text)
                    if not passed:  # a call being written: shown as progress, not as answer
                        out.append(ThinkingDelta(text))
                    text = passed
                if text:
                    out.append(TextDelta(text))
            for position, fragment in enumerate(delta.get("tool_calls") or ()):
                if (piece := self._add_fragment(position, fragment)) is not None:
                    out.append(piece)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
        return out

    def _add_fragment(self, position: int, fragment: Mapping[str, Any]) -> ToolArgsDelta | None:
        """Add one streamed piece of a call; the arguments it brings, if any, as a delta."""
        index = fragment.get("index", position)
        partial_call = self.calls.get(index)
        if partial_call is None:
            partial_call = self.calls[index] = _PartialCall()
        if fragment.get("id"):
            partial_call.id = fragment["id"]
        function = fragment.get("function") or {}
        if function.get("name"):
            partial_call.name += function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some servers send the object itself
            arguments = json.dumps(arguments)
        if not isinstance(arguments, str) or not arguments:
            return None
        partial_call.fragments.append(arguments)
        # The position among the calls that have come, not the server's index (which some
        # servers start at 1): the same order the whole calls come in.
        return ToolArgsDelta(sorted(self.calls).index(index), partial_call.name, arguments)

    def end(self) -> list[Chunk]:
        if not self.done and self.finish is None:
            raise RetryableProviderError(
                f"the {self.target.api} stream ended before the reply was complete")
        out: list[Chunk] = []
        for index in sorted(self.calls):
            part = self.calls[index]
            arguments, error = _parse_arguments("".join(part.fragments))
            if not part.name:
                error = "the model sent a tool call without a name"
            call_id = part.id or f"call_{secrets.token_hex(6)}"
            out.append(ToolCallChunk(ToolCall(call_id, part.name, arguments, error)))
        finish = self.finish
        if self.text_calls is not None:
            rest, found = self.text_calls.finish()
            if rest:
                out.insert(0, TextDelta(rest))
            for c in distinct(found):
                call = ToolCall(f"call_{secrets.token_hex(6)}", c.name, c.arguments, c.error)
                out.append(ToolCallChunk(call))
            if found and finish in (None, "stop"):
                finish = "tool_calls"
        out.append(StreamEnd(self.usage, finish, self.model, self.api_url))
        return out


class OpenAIProvider(HttpProvider):
    """Chat Completions over httpx with server-sent events.

    Every argument is optional: ``api_key`` falls back to ``OPENAI_API_KEY``, ``base_url`` to
    ``OPENAI_BASE_URL`` then OpenAI's own, ``model`` to ``OPENAI_MODEL`` then ``gpt-4o-mini``.
    A key is required only for OpenAI's own URL (local servers need none). ``profile`` overrides
    the one chosen by model name. ``stream_usage`` asks for the usage chunk
    (``stream_options.include_usage``), which a few old servers reject.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: ProviderTimeouts | None = None,
        retry: RetryPolicy | None = None,
        profile: ModelProfile | None = None,
        stream_usage: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.model = model or env.get("OPENAI_MODEL") or DEFAULT_MODEL
        self.base_url = check_base_url(base_url or env.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL)
        self._api_key = api_key if api_key is not None else env.get("OPENAI_API_KEY")
        self._headers = dict(headers or {})
        super().__init__(timeouts, retry)
        self.profile = profile
        self.stream_usage = stream_usage
        # Known now, so said now: before a session is created or anything is printed.
        if not self._api_key and urlsplit(self.base_url).hostname == "api.openai.com":
            raise ConfigurationError(
                "no OpenAI API key: set OPENAI_API_KEY, or point --base-url (or "
                "OPENAI_BASE_URL) at a server that needs no key; in Python: api_key=, base_url=")

    def __repr__(self) -> str:  # never show the key
        return f"<OpenAIProvider model={self.model!r} base_url={self.base_url!r}>"

    def _request_headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", **self._headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, request: LLMRequest, profile: ModelProfile, model: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": wire_messages(request.messages, profile),
            "stream": True,
        }
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        choice = request.tool_choice
        answering = bool(request.messages) and request.messages[-1].role == "tool"
        if request.tools and (profile.tools_after_results or not answering
                              or choice != ToolChoice()):
            self._tools(body, request, profile)
        if request.answer_schema is not None and "response_format" not in body:
            calls = wire_tools(choice.callable(request.tools)) \
                if profile.text_tool_calls and "tools" in body else []
            body["response_format"] = answer_format(request.answer_schema, calls)
            body.pop("grammar", None)
        if choice.max_tokens is not None:
            body["max_tokens"] = choice.max_tokens
        body.update(profile.apply_params(request.params))
        return body

    @staticmethod
    def _tools(body: dict[str, Any], request: LLMRequest, profile: ModelProfile) -> None:
        """The request's tools and ``ToolChoice`` in wire form (the caller decided them)."""
        choice = request.tool_choice
        callable_tools = choice.callable(request.tools)
        # A text-call model gets every tool listed even when it may call fewer or none: the
        # chat template puts them in the system message, and a prompt that starts the same way
        # every time is a prefix llama-server's cache keeps evaluated. The call is held to
        # the allowed tools by a schema instead.
        listed = request.tools if profile.text_tool_calls else callable_tools or request.tools
        body["tools"] = wire_tools(listed)
        if profile.restate_request and request.messages[-1].role == "tool":
            restate_request(body["messages"], request.messages,
                            answer_now=not callable_tools)
        if not callable_tools:
            body["tool_choice"] = "none"
            if profile.text_tool_calls:
                body["grammar"] = NO_CALL_GRAMMAR
        elif choice.mode == "required":
            if profile.text_tool_calls:  # the reply can only be valid calls, read as text
                body["response_format"] = call_schema(wire_tools(callable_tools),
                                                      choice.values)
            else:
                body["tool_choice"] = "required"

    async def _attempt(self, request: LLMRequest) -> AsyncGenerator[Chunk, None]:
        model = request.model or self.model
        profile = self.profile or profile_for(model)
        headers = self._request_headers()
        target = ApiTarget(api="OpenAI-compatible", url=f"{self.base_url}/chat/completions",
                           model=model, key_hint="OPENAI_API_KEY (in Python: api_key=)")
        body = self._body(request, profile, model)
        reply = _Reply(target, profile.text_tool_calls and "tools" in body
                       and body.get("tool_choice") != "none", self.base_url)
        events = stream_events(self._http(), target, headers, body, self.timeouts)
        async with aclosing(events):
            async for event in events:
                if reply.done:
                    continue  # read to the end so the connection can be reused
                if event.data == "[DONE]":
                    reply.done = True
                    continue
                for chunk in reply.feed(parse_event(target, event)):
                    yield chunk
        for chunk in reply.end():
            yield chunk


def ask_server_profile(base_url: str, api_key: str | None = None,
                       timeout: float = 3.0) -> ModelProfile:
    """The profile for what a server other than OpenAI's says it runs: ``/v1/models`` names
    the model, llama.cpp's server also answers ``/props`` with its model file. A server that
    answers neither (or cannot be reached) gets the default profile; the call that follows
    says what is wrong with it."""
    if urlsplit(base_url).hostname == "api.openai.com":
        return DEFAULT_PROFILE
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    root = base_url.rstrip("/").removesuffix("/v1")
    ids: list[str] = []
    llama = False
    with httpx.Client(timeout=timeout, headers=headers) as client:
        for url in (f"{base_url.rstrip('/')}/models", f"{root}/props"):
            try:
                reply = client.get(url)
                data = reply.json() if reply.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                continue
            if isinstance(data, dict) and isinstance(data.get("data"), list):
                ids += [str(m.get("id")) for m in data["data"] if isinstance(m, dict)]
            if isinstance(data, dict) and "model_path" in data:
                llama = True
                ids.append(str(data["model_path"]).rsplit("/", 1)[-1])
    return profile_for_server(ids, llama)
