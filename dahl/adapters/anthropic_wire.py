"""Anthropic Messages wire format <-> the OpenAI chat-completions shape dahl builds and parses.

Minimal version for batch mode (issue 18 §2); the native Anthropic adapter (§3)
owns the full one. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Any

__all__ = ["chat_reply", "messages_body"]

#: Anthropic ``stop_reason`` -> chat-completions ``finish_reason``.
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


def messages_body(chat_body: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions body as a Messages API body (``POST /v1/messages``).

    System messages become the top-level ``system`` text; ``model``, ``max_tokens``
    and ``temperature`` are kept (``max_tokens`` is required there). OpenAI-only keys
    (``response_format``, ``seed``) are dropped: the prompts already ask for the
    reply's form in words.

    Args:
        chat_body: ``{"model", "messages", "max_tokens", "temperature", ...}``.

    Returns:
        ``{"model", "max_tokens", "messages", ["system"], ["temperature"]}``.
    """
    system = [str(m.get("content", "")) for m in chat_body.get("messages", ()) if m.get("role") == "system"]
    messages = [{"role": m["role"], "content": m.get("content", "")}
                for m in chat_body.get("messages", ()) if m.get("role") != "system"]
    body: dict[str, Any] = {"model": chat_body["model"], "max_tokens": int(chat_body.get("max_tokens") or 1024),
                            "messages": messages}
    if system:
        body["system"] = "\n\n".join(system)
    if "temperature" in chat_body:
        body["temperature"] = chat_body["temperature"]
    return body


def chat_reply(message: dict[str, Any]) -> dict[str, Any]:
    """A Messages API reply as a chat-completions reply (what :mod:`dahl.adapters.http` parses).

    Args:
        message: ``{"id", "content": [{"type": "text", "text"}...], "stop_reason", "usage":
            {"input_tokens", "output_tokens"}, ...}``.

    Returns:
        ``{"id", "object", "model", "choices": [{"message": {"role", "content"}, "finish_reason"}],
        "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}`` (tokens).
    """
    text = "".join(part.get("text", "") for part in message.get("content", ()) if part.get("type") == "text")
    usage = message.get("usage") or {}
    prompt, completion = int(usage.get("input_tokens") or 0), int(usage.get("output_tokens") or 0)
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "model": message.get("model"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "finish_reason": _FINISH.get(str(message.get("stop_reason")), message.get("stop_reason"))}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
