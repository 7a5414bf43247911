"""The mock server's Anthropic Messages route, ``POST /v1/messages`` (API version 2023-06-01).

Answers the same kinds as the chat route (split, check, evidence check, cover, with the
oracle when loaded) in Anthropic's format: a ``tool_use`` block whose ``input`` is the
JSON reply when the request forces a tool (``tool_choice {"type": "tool"}``), else one
``text`` block; ``usage {input_tokens, output_tokens}``; ``stop_reason`` ``tool_use`` /
``end_turn``. Requests must carry ``anthropic-version: 2023-06-01`` (else 400) and an
``x-api-key`` (else 401), as the real API requires. With ``--rpm``/``--tpm`` every reply
has ``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`` headers (reset an
RFC 3339 time) and an exhausted window answers 429 ``rate_limit_error`` with
``retry-after``. Faults (``--fault``) take Anthropic's shapes: ``529`` is
``overloaded_error``; ``quota`` is the 400 "credit balance is too low"; ``400`` is a
400 refusing ``tool_choice`` (the adapters then ask in text mode); ``refusal`` is a 200 with
``stop_reason: "refusal"``.

With ``--echo-auth`` the reply carries the request's ``x-api-key``, ``anthropic-version``,
``authorization``, ``api-key`` and ``x-*`` headers: an ``"echo"`` object in the tool
input, or ``name: value`` lines after the text.
"""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from bench.mock_reply import OFFFORMAT_TEXT, REFUSAL_TEXT, estimate_tokens, parse_prompt, reply_content
from bench.mock_window import format_seconds
from bench.mock_wire import decode_body
from dahl.lanes._retry import parse_duration_s

__all__ = ["ANTHROPIC_VERSION", "anthropic_headers", "chat_view", "message_reply", "serve_messages"]

#: The only ``anthropic-version`` the mock accepts.
ANTHROPIC_VERSION = "2023-06-01"
_ECHOED = ("x-api-key", "anthropic-version", "authorization", "api-key")


def chat_view(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages request body seen as a chat-completions body, for :func:`bench.mock_reply.parse_prompt`.

    ``system`` becomes the first message; a forced tool counts as JSON mode
    (``response_format {"type": "json_object"}``); ``max_tokens`` and ``model`` are kept.
    """
    messages: list[Any] = []
    system = body.get("system")
    if isinstance(system, str):
        messages.append({"role": "system", "content": system})
    elif isinstance(system, list):  # a list of text blocks
        messages.append({"role": "system", "content": system})
    if isinstance(body.get("messages"), list):
        messages.extend(body["messages"])
    view: dict[str, Any] = {"model": body.get("model"), "messages": messages, "max_tokens": body.get("max_tokens")}
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("tool", "any") and body.get("tools"):
        view["response_format"] = {"type": "json_object"}
    return view


def _tool_name(body: Mapping[str, Any]) -> str:
    choice = body.get("tool_choice")
    if isinstance(choice, Mapping) and isinstance(choice.get("name"), str):
        return str(choice["name"])
    tools = body.get("tools")
    return str(tools[0].get("name", "reply")) if isinstance(tools, list) and tools else "reply"


def message_reply(
    reply_id: str, body: Mapping[str, Any], content: str, *, json_mode: bool, input_tokens: int,
    echo: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """An Anthropic Message answering ``body`` with ``content`` (the chat route's reply text).

    Args:
        reply_id: e.g. ``"msg_mock_0"``.
        body: the Messages request.
        content: reply text from :func:`bench.mock_reply.reply_content`: JSON in JSON mode.
        json_mode: answer with a ``tool_use`` block (``content`` parsed as its input);
            content that is not a JSON object (an ``offformat`` fault) goes out as text.
        input_tokens: prompt tokens to report.
        echo: request headers to echo (``--echo-auth``), or None.

    Returns:
        ``{"id", "type": "message", "role": "assistant", "model", "content": [block],
        "stop_reason", "stop_sequence": None, "usage": {"input_tokens", "output_tokens"}}``.
    """
    parsed: Any = None
    if json_mode:
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = None
    block: dict[str, Any]
    if isinstance(parsed, dict):
        if echo is not None:
            parsed = {**parsed, "echo": dict(echo)}
        block = {"type": "tool_use", "id": f"toolu_{reply_id}", "name": _tool_name(body), "input": parsed}
        stop = "tool_use"
    else:
        if echo is not None:
            content = "\n".join([content, *(f"{k}: {v}" for k, v in echo.items())])
        block = {"type": "text", "text": content}
        stop = "end_turn"
    return {
        "id": reply_id, "type": "message", "role": "assistant", "model": str(body.get("model") or "mock"),
        "content": [block], "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": estimate_tokens(len(content))},
    }


def anthropic_headers(openai_headers: Mapping[str, str], *, now: float | None = None) -> dict[str, str]:
    """The mock window's ``x-ratelimit-*`` headers in Anthropic's names; resets as RFC 3339 times.

    Args:
        openai_headers: :meth:`bench.mock_window.RateWindow.headers` output.
        now: Unix time, seconds (default ``time.time()``).
    """
    now = time.time() if now is None else now
    out: dict[str, str] = {}
    for budget in ("requests", "tokens"):
        for field in ("limit", "remaining"):
            value = openai_headers.get(f"x-ratelimit-{field}-{budget}")
            if value is not None:
                out[f"anthropic-ratelimit-{budget}-{field}"] = value
        reset = openai_headers.get(f"x-ratelimit-reset-{budget}")
        seconds = parse_duration_s(reset) if reset is not None else None
        if seconds is not None:
            when = datetime.datetime.fromtimestamp(now + seconds, datetime.UTC)
            out[f"anthropic-ratelimit-{budget}-reset"] = when.isoformat(timespec="milliseconds").replace(
                "+00:00", "Z")
    return out


def _error(status: int, kind: str, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return web.json_response(body, status=status, headers=dict(headers or {}))


async def serve_messages(
    request: web.Request, state: Any, *, pause: Callable[[Any, float], Awaitable[None]],
    draw_fault: Callable[[Any], str | None],
) -> web.Response | None:
    """Answer one ``POST /v1/messages``; None when a ``reset`` fault aborted the connection.

    Args:
        request: the request.
        state: the mock's per-app state (``bench.mockserver._State``).
        pause: sleeps that many seconds unless the server is closing.
        draw_fault: draws this request's fault kind, or None.
    """
    stats = state.stats
    if request.headers.get("anthropic-version") != ANTHROPIC_VERSION:
        stats.kinds["other"] += 1
        return _error(400, "invalid_request_error", f"anthropic-version: header must be {ANTHROPIC_VERSION}")
    if not request.headers.get("x-api-key"):
        stats.kinds["other"] += 1
        return _error(401, "authentication_error", "x-api-key header is required")
    try:
        body = decode_body(await request.read())
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or "max_tokens" not in body:
        stats.kinds["other"] += 1
        return _error(400, "invalid_request_error", "body must be a JSON object with messages and max_tokens")
    view = chat_view(body)
    prompt = parse_prompt(view)
    stats.kinds[prompt.kind] += 1
    headers: dict[str, str] = {}
    if state.window is not None:
        cost = prompt.prompt_tokens + prompt.max_tokens
        admission = state.window.admit(cost)
        headers = anthropic_headers(admission.headers)
        if not admission.admitted:
            stats.rate_limited[admission.reason] += 1
            headers["retry-after"] = format_seconds(max(admission.reset_s, 0.001))
            return _error(429, "rate_limit_error", f"Number of {admission.reason} has exceeded your rate limit.",
                          headers)
        stats.admitted_tokens += cost
    fault = draw_fault(state)
    if fault is not None:
        stats.faults[fault] += 1
    if fault == "529":
        return _error(529, "overloaded_error", "Overloaded", headers)
    if fault == "quota":
        return _error(400, "invalid_request_error",
                      "Your credit balance is too low to access the Anthropic API.", headers)
    if fault == "timeout":
        await pause(state, state.config.timeout_fault_s)
        return _error(504, "api_error", "Mock timeout fault elapsed.", headers)
    await pause(state, state.config.latency.sample_s(state.latency_rng))
    if fault == "reset":
        if request.transport is not None:
            request.transport.abort()
        return None
    if fault in ("500", "503"):
        return _error(int(fault), "api_error", f"Mock fault {fault}.", headers)
    if fault == "401":
        return _error(401, "authentication_error", "invalid x-api-key", headers)
    if fault == "400":
        return _error(400, "invalid_request_error", "Mock fault 400: tool_choice is not supported.", headers)
    if fault == "refusal":
        return web.json_response({"id": f"msg_mock_{next(state.ids)}", "type": "message", "role": "assistant",
                                  "model": str(body.get("model")), "content": [{"type": "text", "text": REFUSAL_TEXT}],
                                  "stop_reason": "refusal", "stop_sequence": None,
                                  "usage": {"input_tokens": prompt.prompt_tokens, "output_tokens": 9}}, headers=headers)
    content = OFFFORMAT_TEXT if fault == "offformat" else reply_content(prompt, state.oracle)
    echo = None
    if state.config.echo_auth:
        echo = {k.lower(): v for k, v in request.headers.items()
                if k.lower() in _ECHOED or k.lower().startswith("x-")}
    message = message_reply(f"msg_mock_{next(state.ids)}", body, content, json_mode=prompt.json_mode,
                            input_tokens=prompt.prompt_tokens, echo=echo)
    if state.config.cached_prompt:  # Anthropic's input_tokens excludes the cache reads
        read = prompt.prompt_tokens // 2
        message["usage"].update(input_tokens=prompt.prompt_tokens - read, cache_read_input_tokens=read)
    stats.prompt_tokens += prompt.prompt_tokens
    stats.completion_tokens += message["usage"]["output_tokens"]
    raw = json.dumps(message, ensure_ascii=False).encode()
    if fault == "malformed":
        raw = raw[: len(raw) // 2]
    return web.Response(body=raw, content_type="application/json", headers=headers)
