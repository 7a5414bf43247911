"""Anthropic Messages API on the wire: chat-completions bodies in, chat-completion replies out.

For ``provider = "anthropic"`` the chat-completions body dahl builds (and hashes) is converted
just before sending and the reply just after, so the stages work unchanged:

==========================================  ==========================================
chat-completions body                       Anthropic Messages body (API 2023-06-01)
==========================================  ==========================================
``messages[role=system]``                   top-level ``system`` (joined by a blank line)
``messages`` (user / assistant)             ``messages`` (same roles; runs of one role merged)
``max_tokens``                              ``max_tokens`` (required: 1024 when absent)
``response_format`` json_schema             one tool whose ``input_schema`` is the schema,
                                            forced by ``tool_choice {"type": "tool"}``
``response_format`` json_object             the same with ``input_schema {"type": "object"}``
``stop``                                    ``stop_sequences``
``seed``                                    dropped (the Messages API has none)
anything else (``temperature``, extras)     copied as is
==========================================  ==========================================
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "chat_reply",
    "messages_body",
    "ratelimit_headers",
    "token_count",
]

#: The ``anthropic-version`` header dahl sends (the Messages API version its bodies follow).
ANTHROPIC_VERSION = "2023-06-01"
#: ``max_tokens`` of a converted body that had none (Anthropic requires the field), tokens.
DEFAULT_MAX_TOKENS = 1024

# Keys messages_body handles itself; every other key of the chat body is copied.
_OWN_KEYS = frozenset({"messages", "max_tokens", "response_format", "stop", "seed"})
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
                 "refusal": "refusal"}


def _text(content: Any) -> str:
    """Text of a chat message's content: a string, or the ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _tool(response_format: Any) -> dict[str, Any] | None:
    """The forced tool for a ``response_format``, or None (text mode)."""
    if not isinstance(response_format, Mapping):
        return None
    if response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema") or {}
        return {
            "name": str(spec.get("name") or "reply"),
            "description": "Give the reply as this tool's input.",
            "input_schema": spec.get("schema") or {"type": "object"},
        }
    if response_format.get("type") == "json_object":
        return {"name": "reply", "description": "Give the reply as this tool's input.",
                "input_schema": {"type": "object"}}
    return None


def messages_body(chat_body: Mapping[str, Any]) -> dict[str, Any]:
    """Convert a chat-completions request body to an Anthropic Messages body (pure; see the module table).

    Returns:
        ``{"model", "max_tokens", ["system"], "messages", ...copied keys, ["stop_sequences"],
        ["tools", "tool_choice"]}``, ``messages`` alternating user / assistant.

    Raises:
        ValueError: no ``messages`` list, or a role other than system / user / assistant.
    """
    messages = chat_body.get("messages")
    if not isinstance(messages, list):
        raise ValueError("chat body has no messages list")
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message.get("role")
        text = _text(message.get("content"))
        if role == "system":
            system.append(text)
        elif role in ("user", "assistant"):
            if turns and turns[-1]["role"] == role:
                turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{text}"}
            else:
                turns.append({"role": role, "content": text})
        else:
            raise ValueError(f"message role {role!r} has no Anthropic equivalent")
    limit = chat_body.get("max_tokens")
    body: dict[str, Any] = {
        "model": chat_body.get("model"),
        "max_tokens": limit if isinstance(limit, int) and not isinstance(limit, bool) else DEFAULT_MAX_TOKENS,
    }
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = turns
    body.update((k, v) for k, v in chat_body.items() if k not in _OWN_KEYS and k != "model")
    stop = chat_body.get("stop")
    if stop is not None:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tool = _tool(chat_body.get("response_format"))
    if tool is not None:
        body["tools"] = [tool]
        body["tool_choice"] = {"type": "tool", "name": tool["name"]}
    return body


def token_count(value: Any) -> int:
    """A token count from a usage field; 0 when absent or not a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def chat_reply(message: Mapping[str, Any]) -> dict[str, Any]:
    """Convert an Anthropic Message (a 200 reply of ``/v1/messages``) to a chat-completion reply.

    The content is the first ``tool_use`` block's ``input`` as compact JSON, else the ``text``
    blocks joined; ``finish_reason`` is ``length`` for ``stop_reason: max_tokens``, ``refusal``
    for ``refusal``, else ``stop``; ``usage`` is ``prompt_tokens`` (cache reads and
    writes included), ``completion_tokens``, ``total_tokens``, the cache reads (when any) as OpenAI's
    ``prompt_tokens_details.cached_tokens`` and the writes (when any) as ``cache_creation_input_tokens``.

    Raises:
        ValueError: ``message`` has no ``content`` list (not a Message: e.g. an error body).
    """
    blocks = message.get("content")
    if not isinstance(blocks, list):
        raise ValueError("Anthropic reply has no content list")
    content: str | None = None
    for block in blocks:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            content = orjson.dumps(block.get("input")).decode()
            break
    if content is None:
        content = "".join(
            str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text"
        )
    stop = message.get("stop_reason")
    reply: dict[str, Any] = {
        "id": message.get("id"),
        "object": "chat.completion",
        "model": message.get("model"),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": _STOP_REASONS.get(stop, "stop") if isinstance(stop, str) else None,
        }],
    }
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        prompt = sum(token_count(usage.get(k)) for k in
                     ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        completion = token_count(usage.get("output_tokens"))
        reply["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}
        read, written = (token_count(usage.get(k)) for k in ("cache_read_input_tokens", "cache_creation_input_tokens"))
        if read:
            reply["usage"]["prompt_tokens_details"] = {"cached_tokens": read}
        if written:
            reply["usage"]["cache_creation_input_tokens"] = written
    return reply


def _reset_s(stamp: str, now: float) -> float | None:
    """Seconds from ``now`` (Unix time) to an RFC 3339 UTC time ``2026-01-01T00:00:30Z``; None if unreadable."""
    text = stamp.strip()
    if text.endswith("Z"):
        text = text[:-1]
    elif text.endswith("+00:00"):
        text = text[:-6]
    else:
        return None
    whole, _, fraction = text.partition(".")
    try:
        seconds = calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S"))
        part = float(f"0.{fraction}") if fraction else 0.0
    except ValueError:
        return None
    return max(0.0, seconds + part - now)


def ratelimit_headers(headers: Mapping[str, str], *, now: float | None = None) -> dict[str, str]:
    """Reply headers with Anthropic's rate-limit headers added in OpenAI's ``x-ratelimit-*`` names.

    ``anthropic-ratelimit-{requests,tokens}-{limit,remaining}`` are copied to
    ``x-ratelimit-{limit,remaining}-{requests,tokens}``; ``-reset`` (RFC 3339) becomes
    ``x-ratelimit-reset-*`` as seconds from ``now`` (Unix time, default ``time.time()``),
    e.g. ``"1.500s"``. Existing ``x-ratelimit-*`` headers are kept; returns a new dict.
    """
    out = dict(headers)
    if not any(name.startswith("anthropic-ratelimit-") for name in headers):
        return out
    now = time.time() if now is None else now
    for budget in ("requests", "tokens"):
        for field in ("limit", "remaining"):
            value = headers.get(f"anthropic-ratelimit-{budget}-{field}")
            if value is not None:
                out.setdefault(f"x-ratelimit-{field}-{budget}", value)
        stamp = headers.get(f"anthropic-ratelimit-{budget}-reset")
        seconds = _reset_s(stamp, now) if stamp is not None else None
        if seconds is not None:
            out.setdefault(f"x-ratelimit-reset-{budget}", f"{seconds:.3f}s")
    return out
