"""Anthropic Messages conversion: chat-completions body -> Messages body, Message -> chat reply, headers."""

from __future__ import annotations

import calendar
import time
from typing import Any

import pytest

from dahl.adapters import _prompts as prompts
from dahl.adapters._anthropic_wire import chat_reply, messages_body, ratelimit_headers
from dahl.adapters._bodies import check_request_body, split_request_body
from dahl.adapters._endpoint import reask_messages
from dahl.adapters._http import parse_reply
from dahl.config import EndpointConfig
from dahl.records import Usage

CHECK_SCHEMA = {
    "type": "object",
    "properties": {
        "label": {"type": "string", "enum": ["supported", "unsupported", "irrelevant", "unknown"]},
        "reason": {"type": "string"},
    },
    "required": ["label", "reason"],
    "additionalProperties": False,
}


def anthropic(**kwargs: Any) -> EndpointConfig:
    return EndpointConfig(base_url="https://api.anthropic.com/v1", model="claude-3-5-haiku-latest", **kwargs)


class TestMessagesBody:
    def test_check_body_in_json_schema_mode(self) -> None:
        """The check body: system on top, seed dropped, the label schema as a forced tool's input_schema."""
        chat = check_request_body(anthropic(seed=3), "Who?", "Paris is in France.")
        system, user = chat["messages"]
        assert messages_body(chat) == {
            "model": "claude-3-5-haiku-latest",
            "max_tokens": 128,
            "system": system["content"],
            "messages": [{"role": "user", "content": user["content"]}],
            "temperature": 0.0,
            "tools": [{"name": "dahl_check", "description": "Give the reply as this tool's input.",
                       "input_schema": CHECK_SCHEMA}],
            "tool_choice": {"type": "tool", "name": "dahl_check"},
        }

    def test_split_body_in_text_mode_has_no_tool(self) -> None:
        """Text mode: no tools, no tool_choice; max_tokens is the split default 1024."""
        chat = split_request_body(anthropic(response_format="text"), "Q?", "A. B.")
        body = messages_body(chat)
        assert list(body) == ["model", "max_tokens", "system", "messages", "temperature"]
        assert body["max_tokens"] == 1024
        assert [m["role"] for m in body["messages"]] == ["user"]

    def test_reask_keeps_alternating_roles(self) -> None:
        """A re-ask's [system, user, assistant, user] becomes system + user/assistant/user."""
        chat = check_request_body(anthropic(), "Q?", "C.")
        again = reask_messages(chat["messages"], "chatty", "no label", prompts.expected_reply("check", json_reply=True))
        body = messages_body({**chat, "messages": again})
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
        assert body["messages"][1] == {"role": "assistant", "content": "chatty"}

    def test_consecutive_roles_merge_and_extras_pass(self) -> None:
        """Two user messages merge with a blank line; stop -> stop_sequences; json_object -> a generic tool; extras copied."""
        chat = {
            "model": "m", "max_tokens": 5, "temperature": 0.5, "top_k": 7, "stop": "\n",
            "messages": [{"role": "system", "content": "S1"}, {"role": "system", "content": "S2"},
                         {"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "b"}]}],
            "response_format": {"type": "json_object"},
        }
        assert messages_body(chat) == {
            "model": "m", "max_tokens": 5, "system": "S1\n\nS2", "messages": [{"role": "user", "content": "a\n\nb"}],
            "temperature": 0.5, "top_k": 7, "stop_sequences": ["\n"],
            "tools": [{"name": "reply", "description": "Give the reply as this tool's input.",
                       "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": "reply"},
        }

    def test_missing_max_tokens_gets_the_default_and_input_is_untouched(self) -> None:
        """max_tokens absent -> 1024 (Anthropic requires it); the chat body is not modified."""
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert messages_body(chat) == {"model": "m", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]}
        assert chat == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def test_unknown_role_is_refused(self) -> None:
        """A tool-role message has no equivalent: ValueError naming the role."""
        with pytest.raises(ValueError, match="'tool'"):
            messages_body({"model": "m", "messages": [{"role": "tool", "content": "x"}]})


class TestChatReply:
    def test_tool_use_input_becomes_json_content(self) -> None:
        """The tool_use input is the content as compact JSON; usage counts cache tokens as prompt tokens."""
        message = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
            "content": [{"type": "text", "text": "Sure."},
                        {"type": "tool_use", "id": "t1", "name": "dahl_check",
                         "input": {"label": "supported", "reason": "ok"}}],
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 12, "cache_read_input_tokens": 50,
                      "cache_creation_input_tokens": 0},
        }
        assert chat_reply(message) == {
            "id": "msg_1", "object": "chat.completion", "model": "claude",
            "choices": [{"index": 0, "message": {"role": "assistant",
                                                 "content": '{"label":"supported","reason":"ok"}'},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 150, "completion_tokens": 12, "total_tokens": 162,
                      "prompt_tokens_details": {"cached_tokens": 50}},
        }

    def test_cache_reads_and_writes_reach_the_usage(self) -> None:
        """input 100 + cache read 50 + cache write 30: prompt 180, of them 50 cached and 30 written."""
        message = {"id": "m", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 50,
                             "cache_creation_input_tokens": 30}}
        assert parse_reply(chat_reply(message), {}).usage == Usage(
            prompt_tokens=180, completion_tokens=7, cached_tokens=50, cache_write_tokens=30)

    def test_text_fallback_and_length(self) -> None:
        """No tool_use: the text blocks joined; stop_reason max_tokens -> finish_reason length; no usage -> none."""
        message = {"id": "m", "content": [{"type": "text", "text": "Supported"}, {"type": "text", "text": "\nok"}],
                   "stop_reason": "max_tokens"}
        reply = parse_reply(chat_reply(message), {})
        assert (reply.content, reply.finish_reason, reply.usage, reply.usage_tokens) == (
            "Supported\nok", "length", None, None)

    def test_refusal_is_flagged(self) -> None:
        """stop_reason refusal -> finish_reason refusal; the reply is refused, its text kept."""
        message = {"id": "m", "content": [{"type": "text", "text": "I can't help with that."}],
                   "stop_reason": "refusal"}
        reply = parse_reply(chat_reply(message), {})
        assert (reply.content, reply.finish_reason, reply.refused) == ("I can't help with that.", "refusal", True)

    def test_not_a_message(self) -> None:
        """An error body (no content list) is a ValueError."""
        with pytest.raises(ValueError, match="no content list"):
            chat_reply({"type": "error", "error": {"type": "overloaded_error"}})


class TestRatelimitHeaders:
    NOW = float(calendar.timegm(time.strptime("2026-01-01T00:00:00", "%Y-%m-%dT%H:%M:%S")))

    def test_translated_to_x_ratelimit_names(self) -> None:
        """Limits and remaining copied; RFC 3339 resets become seconds from now; other headers kept."""
        headers = {
            "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01.5Z",
            "anthropic-ratelimit-tokens-limit": "40000", "anthropic-ratelimit-tokens-remaining": "39000",
            "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:30Z", "retry-after": "2",
        }
        assert ratelimit_headers(headers, now=self.NOW) == {
            **headers,
            "x-ratelimit-limit-requests": "50", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1.500s",
            "x-ratelimit-limit-tokens": "40000", "x-ratelimit-remaining-tokens": "39000",
            "x-ratelimit-reset-tokens": "30.000s",
        }

    def test_past_or_unreadable_reset(self) -> None:
        """A reset in the past is 0 s; one with a non-UTC offset is left untranslated."""
        headers = {"anthropic-ratelimit-requests-reset": "2025-12-31T23:59:00Z",
                   "anthropic-ratelimit-tokens-reset": "2026-01-01T01:00:00+01:00"}
        out = ratelimit_headers(headers, now=self.NOW)
        assert out["x-ratelimit-reset-requests"] == "0.000s"
        assert "x-ratelimit-reset-tokens" not in out

    def test_openai_headers_untouched(self) -> None:
        """Without anthropic-ratelimit-* headers the result equals the input."""
        headers = {"x-ratelimit-remaining-requests": "3"}
        assert ratelimit_headers(headers, now=self.NOW) == headers
