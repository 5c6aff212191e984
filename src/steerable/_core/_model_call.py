"""The THINKING phase: build the request, run the LLM hooks, stream the reply.

Context overflow (reported by the provider, or foreseen from ``Agent.context_window``) is handled
here: ``before_compress`` hooks may veto, the oldest exchanges are dropped, the rollback
snapshot moves with them, and the call is retried once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from contextlib import aclosing
from typing import Any

from steerable._core._budget import record_usage
from steerable._core._compaction import compress, estimate_tokens
from steerable._core._engine import Engine
from steerable._core._hook_chain import decisions, ignored
from steerable._core._queues import deliver
from steerable._core._turn_state import Interrupt, TurnState
from steerable._events import (
    CompressReason,
    ContextCompress,
    LLMDelta,
    LLMRequestEvent,
    LLMResponseEvent,
    LLMRetry,
    ToolCallDelta,
    TurnPhase,
)
from steerable._history import MessageView
from steerable._hooks import (
    CompressContext,
    HookAction,
    LLMRequestContext,
    LLMResponseContext,
)
from steerable._messages import Message, ToolCall, Usage
from steerable._secrets import known_secrets
from steerable.errors import ContextOverflowError, ProviderError
from steerable.providers._base import (
    Chunk,
    LLMRequest,
    LLMResponse,
    RetryNotice,
    SecretGuard,
    StreamEnd,
    TextDelta,
    ThinkingDelta,
    ToolArgsDelta,
    ToolCallChunk,
    ToolChoice,
    ToolSpec,
    text_guarded,
)

__all__ = ["call_model"]


_MAY_CALL = ToolChoice()
# The last call of a turn (a graceful interrupt's summary, the call numbered max_iterations)
# still lists the tools: the prompt then starts as every earlier call's did, so a server's
# prompt cache (llama-server, a hosted API) has it evaluated, and the summary starts at once.
_MUST_ANSWER = ToolChoice("none", reason="the last call of the turn: answer in words")


def _build_request(st: TurnState, may_call: bool, extra: Sequence[Message],
                   answer: bool) -> LLMRequest:
    agent = st.model_agent
    return LLMRequest(
        messages=MessageView[Message](agent.system_head(), st.base, st.new,
                                      extra),
        tools=agent.tool_specs,
        model=agent.model,
        params=agent.params,
        tool_choice=_MAY_CALL if may_call else _MUST_ANSWER,
        answer_schema=agent.output.schema if answer and agent.output is not None else None,
    )


def _tool_specs(st: TurnState, tools: Sequence[Any]) -> tuple[ToolSpec, ...]:
    """A hook's ``tools=`` may hold specs, tool objects or names of the agent's tools."""
    specs = []
    for t in tools:
        if isinstance(t, ToolSpec):
            specs.append(t)
        elif isinstance(t, str):
            tool = st.model_agent.tools_by_name.get(t)
            if tool is None:
                raise ValueError(f"hook named unknown tool {t!r}")
            specs.append(ToolSpec(tool.name, tool.description, tool.parameters,
                                  tool.read_only))
        else:
            specs.append(ToolSpec(t.name, t.description, t.parameters,
                                  bool(getattr(t, "read_only", False))))
    return tuple(specs)


def _ctx_ids(st: TurnState) -> dict[str, Any]:
    return {"turn_id": st.turn_id, "session_id": st.session_id,
            "parent_turn_id": st.parent_turn_id, "iteration": st.iteration}


def _request_event(engine: Engine, st: TurnState, request: LLMRequest, purpose: str) -> None:
    choice = request.tool_choice
    engine.emit(st, LLMRequestEvent, iteration=st.iteration, model=request.model,
                message_count=len(request.messages),
                tools=tuple(t.name for t in request.tools), tool_choice=choice.mode,
                may_call=choice.only, reason=choice.reason, purpose=purpose)


def _asker(engine: Engine, st: TurnState) -> Any:
    """``ctx.ask`` for the LLM hooks: one call of the hook's own, seen in the events (no
    deltas: its text is not the answer) and counted in the turn's usage."""
    async def ask(request: LLMRequest, purpose: str) -> LLMResponse:
        # A hook's coroutine runs eagerly in the caller's task up to its first wait, then in a
        # task of its own (the hook manager). A call's first wait is inside the provider's
        # HTTP stream, in a cancel scope (anyio, httpx) that must be left in the task that
        # entered it: so the move to the hook's task happens here, before the call starts.
        await asyncio.sleep(0)
        return await call_model(engine, st, asked=(request, purpose))
    return ask


async def _before_llm(engine: Engine, st: TurnState, request: LLMRequest) -> LLMRequest:
    def ctx() -> LLMRequestContext:
        return LLMRequestContext(**_ctx_ids(st), request=request, _ask=_asker(engine, st))

    async with aclosing(decisions(engine, st, "before_llm", ctx)) as chain:
        async for reg, _, decision in chain:
            if decision.action is not HookAction.MODIFY:
                ignored(engine, st, reg, "before_llm", decision)
                continue
            try:
                request = LLMRequest(
                    messages=request.messages if decision.messages is None
                    else tuple(decision.messages),
                    tools=request.tools if decision.tools is None
                    else _tool_specs(st, decision.tools),
                    model=request.model if decision.model is None else decision.model,
                    params=request.params if decision.params is None else decision.params,
                    tool_choice=request.tool_choice if decision.tool_choice is None
                    else decision.tool_choice,
                    answer_schema=request.answer_schema,
                )
            except (ValueError, AttributeError) as exc:
                engine.error(st, f"hook {reg.label}.before_llm MODIFY ignored: {exc}", "hook")
    return request


async def _after_llm(
    engine: Engine, st: TurnState, request: LLMRequest, response: LLMResponse
) -> LLMResponse:
    def ctx() -> LLMResponseContext:
        return LLMResponseContext(**_ctx_ids(st), request=request, response=response,
                                  _ask=_asker(engine, st))

    async with aclosing(decisions(engine, st, "after_llm", ctx)) as chain:
        async for reg, _, decision in chain:
            if decision.action is not HookAction.MODIFY:
                ignored(engine, st, reg, "after_llm", decision)
                continue
            calls = response.tool_calls
            if decision.tool_calls is not None:
                calls = tuple(
                    ToolCall(f"{st.turn_id}_h{st.iteration}_{i}", name, dict(args))
                    for i, (name, args) in enumerate(decision.tool_calls)
                )
            response = LLMResponse(
                text=response.text if decision.text is None else decision.text,
                tool_calls=calls, thinking=response.thinking, usage=response.usage,
                finish_reason=response.finish_reason,
            )
    return response


async def _compress(
    engine: Engine, st: TurnState, reason: CompressReason, target: int | None
) -> bool:
    """Drop old exchanges; False when nothing could be dropped. May raise AbortSignal."""
    history = [*st.base, *st.new]
    tokens = estimate_tokens(history)

    def ctx() -> CompressContext:
        return CompressContext(**_ctx_ids(st), messages=tuple(history), reason=reason,
                               tokens=tokens)

    # Only ABORT_TURN / HARD_ABORT mean anything here, and the chain raises for those.
    async with aclosing(decisions(engine, st, "before_compress", ctx)) as chain:
        async for reg, _, decision in chain:
            ignored(engine, st, reg, "before_compress", decision)
    cut = compress(history, target)
    if cut == 0:
        return False
    engine.set_phase(st, TurnPhase.COMPACTING)
    from_base = min(cut, len(st.base))
    if from_base:
        # The dropped messages are gone from the session too: move the rollback snapshot.
        # New lists, never edits in place: earlier requests hold views of the old ones.
        st.base = st.base[from_base:]
        st.base_rewritten = True
        st.base_dropped += from_base
    if cut > from_base:
        st.new = st.new[cut - from_base:]
    after = [*st.base, *st.new]
    engine.emit(st, ContextCompress, reason=reason, messages_before=len(history),
                messages_after=len(after), tokens_before=tokens,
                tokens_after=estimate_tokens(after))
    engine.set_phase(st, TurnPhase.THINKING)
    return True


def _unique_calls(st: TurnState, calls: list[ToolCall]) -> tuple[ToolCall, ...]:
    if len(calls) < 2:
        return tuple(calls)  # (one call is unique: most replies)
    seen: set[str] = set()
    out = []
    for i, call in enumerate(calls):
        if call.id in seen:
            call = ToolCall(f"{call.id}_{st.iteration}_{i}", call.name, call.arguments,
                            call.arguments_error)
        seen.add(call.id)
        out.append(call)
    return tuple(out)


def _cut_reply(st: TurnState, calls: Sequence[ToolCall]) -> bool:
    """A graceful interrupt while the model writes text (no tool call yet, not the summary
    call): stop the reading now instead of waiting for the whole reply."""
    if st.interrupt is Interrupt.GRACEFUL and not calls and not st.final_call:
        st.reply_cut = True
    return st.reply_cut


class _Pieces:
    """What a reply streamed so far, and the secret guard it is read through. Made at its
    first chunk: a model call in flight waits for that nearly all its time, and each list is
    an object the collector tracks."""

    __slots__ = ("calls", "end", "guard", "texts", "thinking")

    def __init__(self, guard: SecretGuard | None) -> None:
        self.texts: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[ToolCall] = []
        self.end: StreamEnd | None = None
        self.guard = guard


def _take(engine: Engine, st: TurnState, got: _Pieces, chunk: Chunk, deltas: bool,
          iteration: int) -> bool:
    """One chunk (after the guard) into the reply; True when the reading must stop now."""
    if type(chunk) is TextDelta:
        if chunk.text:
            got.texts.append(chunk.text)
            if deltas:
                engine.emit(st, LLMDelta, iteration=iteration, text=chunk.text)
        return deltas and bool(got.texts) and _cut_reply(st, got.calls)
    if type(chunk) is ToolCallChunk:
        got.calls.append(chunk.call)
    elif type(chunk) is ThinkingDelta:
        got.thinking.append(chunk.text)
        if deltas:
            engine.emit(st, LLMDelta, iteration=iteration, text=chunk.text, thinking=True)
    elif type(chunk) is ToolArgsDelta:
        if chunk.text and deltas:  # a piece the guard holds back whole: no event
            engine.emit(st, ToolCallDelta, iteration=iteration, call_index=chunk.index,
                        tool_name=chunk.name, arguments_delta=chunk.text)
    elif type(chunk) is StreamEnd:
        got.end = chunk
    elif type(chunk) is RetryNotice:
        # The provider starts over: what it streamed so far is void.
        got.texts, got.thinking, got.calls = [], [], []
        engine.emit(st, LLMRetry, iteration=iteration, attempt=chunk.attempt,
                    reason=chunk.reason, delay=chunk.delay)
    else:
        raise ProviderError(f"provider {type(st.model_agent.provider).__name__} yielded "
                            f"{type(chunk).__name__}, which is not a chunk type")
    return False


def _feed(engine: Engine, st: TurnState, got: _Pieces, chunk: Chunk | None, deltas: bool,
          iteration: int) -> bool:
    """One chunk of the stream (None: its end), through the secret guard if there is one;
    True when the reading must stop now."""
    guard = got.guard
    if guard is None:
        return chunk is not None and _take(engine, st, got, chunk, deltas, iteration)
    stop = False
    for piece in guard.feed(chunk) if chunk is not None else guard.end():
        stop = _take(engine, st, got, piece, deltas, iteration)
        if stop and chunk is not None:  # (at the end, what the guard holds comes out whole)
            break
    return stop


def _sent(engine: Engine, st: TurnState, request: LLMRequest, purpose: str,
          own: bool) -> None:
    """What a request's start says: the tools the turn offers, the request's event, and the
    messages it delivers (a hook's own call, not ``own``: its event only)."""
    if own:
        # The agent's one set unless a hook changed the tools: a set per call was an object
        # the collector tracks per live turn. (An earlier round saw the last full collection
        # of 10,000 turns grow with a shared set: the collector's 25 % rule moves when full
        # collections fall, so the total of them is the figure; it fell, see performance.md.)
        agent = st.model_agent
        st.offered = agent.tool_names if request.tools is agent.tool_specs \
            else frozenset(t.name for t in request.tools)
    _request_event(engine, st, request, purpose)
    if st.carrying and own:  # taken in since the last request: delivered by this one
        deliver(engine, st, engine.bus.last_seq, "in the context of an LLM request")


async def _prepared(engine: Engine, st: TurnState, request: LLMRequest, may_call: bool,
                    extra: Sequence[Message], answer: bool,
                    overflow: ContextOverflowError | None) -> tuple[LLMRequest, bool]:
    """The request, compressed when it would not fit ``Agent.context_window`` (or, with
    ``overflow``, because the provider said so: raised again when nothing could be dropped),
    then through the ``before_llm`` hooks; and whether compression was tried."""
    window = st.model_agent.context_window
    target = window * 3 // 4 if window is not None else None
    tried = overflow is not None
    if overflow is not None:
        if not await _compress(engine, st, "overflow", target):
            raise overflow
        request = _build_request(st, may_call, extra, answer)
    elif window is not None and estimate_tokens(request.messages) > window:
        tried = True
        if await _compress(engine, st, "estimate", target):
            request = _build_request(st, may_call, extra, answer)
    if engine.hooks.at("before_llm"):
        request = await _before_llm(engine, st, request)
    return request, tried


def _silent(engine: Engine, own: bool) -> Exception:
    """What a call the idle watchdog cut raises: a turn's own call fails as the provider's
    error; a hook's own call sees the timeout."""
    if not own:
        return TimeoutError()
    return ProviderError(f"the provider sent nothing for {engine.timeouts.llm_idle:g} s "
                         "(Timeouts.llm_idle); the call was abandoned")


async def call_model(
    engine: Engine, st: TurnState, *, may_call: bool = False, extra: Sequence[Message] = (),
    answer: bool = False, asked: tuple[LLMRequest, str] | None = None,
) -> LLMResponse:
    """One LLM call, start to finish: returns the reply after ``after_llm`` hooks. ``answer``:
    a reply in the text may be the turn's answer, so an agent's ``output_type`` schema is
    asked for (not in a graceful interrupt's summary). ``asked``: a hook's own call
    (``ctx.ask``), its request and purpose, made as given: no hooks, compression or deltas.
    The stream is read in this frame: a call in flight is one coroutine frame, not two."""
    own = asked is None
    if asked is None:
        engine.set_phase(st, TurnPhase.THINKING)
        request, compressed = _build_request(st, may_call, extra, answer), False
        if st.model_agent.context_window is not None or engine.hooks.at("before_llm"):
            request, compressed = await _prepared(engine, st, request, may_call, extra,
                                                  answer, None)
        purpose = ""
    else:  # (never compressed: an overflow is the hook's to handle)
        (request, purpose), compressed = asked, True
    iteration = st.iteration  # (one call: it does not move while this streams)
    while True:
        _sent(engine, st, request, purpose, own)
        started = time.monotonic()
        stream = st.model_agent.provider.stream(request)
        guarded = not text_guarded(st.model_agent.provider)  # else the guard is per chunk
        got: _Pieces | None = None
        # The watchdog is two entries in the engine's timer tables, keyed by this call's
        # stream: no object of its own per model call in flight.
        timer, idle = engine.idle_timer, engine.timeouts.llm_idle
        timer.start(stream, idle)
        try:
            try:
                async for chunk in stream:
                    timer.tick(stream, idle)  # every chunk buys the provider more time
                    if got is None:
                        got = _Pieces(SecretGuard(known_secrets()) if guarded else None)
                    if _feed(engine, st, got, chunk, own, iteration):
                        break
                else:  # the stream ended: what the guard still holds comes out
                    if got is not None:
                        _feed(engine, st, got, None, own, iteration)
            finally:
                await stream.aclose()
        except asyncio.CancelledError as exc:
            if timer.stop(stream, exc):  # the watchdog's own cancel
                raise _silent(engine, own) from None
            raise
        except ContextOverflowError as exc:
            if compressed:
                raise
            request, compressed = await _prepared(
                engine, st, request, may_call, extra, answer, exc)
            continue
        finally:
            timer.stop(stream)  # (after a stop above, it finds nothing)
        break
    return await _answer(engine, st, request, got or _Pieces(None), purpose, own, started)


async def _answer(engine: Engine, st: TurnState, request: LLMRequest, got: _Pieces,
                  purpose: str, own: bool, started: float) -> LLMResponse:
    """The reply read (its usage counted), through the ``after_llm`` hooks (a turn's own
    call), and its event. One coroutine per call, as before the stream was read in
    ``call_model``."""
    usage: Usage | None = None
    finish: str | None = None
    if (end := got.end) is not None:
        usage, finish = end.usage, end.finish_reason
        if usage is not None:  # counted on this turn and its ancestors, priced if known
            usage = await record_usage(engine, st, usage, end.model or request.model
                                       or getattr(st.model_agent.provider, "model", None),
                                       end.api_url)
    response = LLMResponse(text="".join(got.texts), tool_calls=_unique_calls(st, got.calls),
                           thinking="".join(got.thinking), usage=usage, finish_reason=finish)
    if own and engine.hooks.at("after_llm"):
        response = await _after_llm(engine, st, request, response)
    engine.emit(st, LLMResponseEvent, iteration=st.iteration, text=response.text,
                tool_calls=response.tool_calls, usage=response.usage,
                finish_reason=response.finish_reason, duration=time.monotonic() - started,
                purpose=purpose)
    return response
