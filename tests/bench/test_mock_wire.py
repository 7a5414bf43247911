"""Specification of bench/mock_wire.py and mock_reply.last_block: byte for byte what the stdlib and regex gave."""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.mock_reply import last_block
from bench.mock_wire import completion_bytes, decode_body, json_string


def stdlib_completion(reply_id: str, created: int, model: str, content: str, prompt: int, completion: int) -> bytes:
    """The reply as the mock built it before mock_wire (dict + json.dumps)."""
    payload = {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
    return json.dumps(payload, ensure_ascii=False).encode("utf-8")


class TestDecodeBody:
    def test_plain_object(self) -> None:
        """A UTF-8 object decodes to the same dict as json.loads."""
        raw = '{"model": "m", "max_tokens": 64, "x": [1.5, null, true, "Kraków"]}'.encode()
        assert decode_body(raw) == {"model": "m", "max_tokens": 64, "x": [1.5, None, True, "Kraków"]}

    def test_nan_literal_falls_back(self) -> None:
        """NaN (refused by orjson, accepted by json.loads) still decodes, as before."""
        value = decode_body(b'{"temperature": NaN}')
        assert math.isnan(value["temperature"])

    def test_big_integer_falls_back(self) -> None:
        """An integer beyond 64 bits decodes exactly, as json.loads does."""
        assert decode_body(b'{"seed": 123456789012345678901234567890}') == {"seed": 123456789012345678901234567890}

    def test_utf16_body(self) -> None:
        """A UTF-16 body (json.loads detects it) decodes."""
        assert decode_body('{"a": "b"}'.encode("utf-16")) == {"a": "b"}

    def test_not_json(self) -> None:
        """Text that is not JSON raises ValueError (the mock answers 400)."""
        with pytest.raises(ValueError):
            decode_body(b"{not json")


class TestJsonString:
    def test_escapes(self) -> None:
        """Quotes, backslashes and control characters are escaped like json.dumps; non-ASCII is kept."""
        text = 'a "b" \\ \n\t\x01 é ✓'
        assert json_string(text) == '"a \\"b\\" \\\\ \\n\\t\\u0001 é ✓"'
        assert json_string(text) == json.dumps(text, ensure_ascii=False)

    def test_lone_surrogate(self) -> None:
        """A lone surrogate is written as json.dumps writes it (orjson refuses it)."""
        assert json_string("x\ud800") == json.dumps("x\ud800", ensure_ascii=False)

    @given(st.text())
    def test_any_text(self, text: str) -> None:
        """Every string encodes exactly as json.dumps(ensure_ascii=False)."""
        assert json_string(text) == json.dumps(text, ensure_ascii=False)


class TestCompletionBytes:
    def test_hand_example(self) -> None:
        """A known reply: separators ', ' and ': ', total = prompt + completion."""
        raw = completion_bytes("chatcmpl-mock-7", 1700000000, "mock", "Supported\nWhy.", 251, 4)
        assert raw == (
            b'{"id": "chatcmpl-mock-7", "object": "chat.completion", "created": 1700000000, "model": "mock", '
            b'"choices": [{"index": 0, "message": {"role": "assistant", "content": "Supported\\nWhy."}, '
            b'"finish_reason": "stop"}], "usage": {"prompt_tokens": 251, "completion_tokens": 4, '
            b'"total_tokens": 255}}'
        )

    @given(
        st.text(max_size=20),
        st.integers(min_value=0, max_value=2**40),
        st.text(max_size=20),
        st.text(),
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=0, max_value=10**6),
    )
    def test_same_bytes_as_stdlib(
        self, reply_id: str, created: int, model: str, content: str, prompt: int, completion: int
    ) -> None:
        """Any reply is byte for byte what json.dumps(..., ensure_ascii=False).encode() gave."""
        try:
            expected = stdlib_completion(reply_id, created, model, content, prompt, completion)
        except UnicodeEncodeError:
            with pytest.raises(UnicodeEncodeError):
                completion_bytes(reply_id, created, model, content, prompt, completion)
            return
        assert completion_bytes(reply_id, created, model, content, prompt, completion) == expected


class TestDecodeBodyNumbers:
    @given(st.integers(min_value=-(2**80), max_value=2**80))
    def test_any_integer_exact(self, number: int) -> None:
        """Every integer, inside or beyond 64 bits, decodes to the same int as json.loads."""
        value = decode_body(f'{{"max_tokens": {number}}}'.encode())["max_tokens"]
        assert type(value) is int and value == number


class TestLastBlock:
    """bench.mock_reply.last_block against the regex it replaced."""

    @staticmethod
    def regex_last(tag: str, text: str) -> str | None:
        found = re.findall(rf"<{tag}>\n?(.*?)\n?</{tag}>", text, re.DOTALL)
        return str(found[-1]) if found else None

    def test_check_message(self) -> None:
        """A dahl check message gives its claim and question without the framing newlines."""
        text = "<question>\nWho?\n</question>\n\n<claim>\nA is B.\n</claim>"
        assert (last_block("claim", text), last_block("question", text)) == ("A is B.", "Who?")

    def test_last_of_several_and_unclosed(self) -> None:
        """The last closed block wins; an unclosed trailing tag is ignored; none gives None."""
        text = "<claim>one</claim> <claim>\ntwo\n\n</claim> <claim>three"
        assert last_block("claim", text) == "two\n"
        assert last_block("answer", text) is None

    @given(st.lists(st.sampled_from(["<claim>", "</claim>", "\n", "x", "<", "claim>", "</claim", " "]), max_size=14))
    def test_same_as_regex(self, parts: list[str]) -> None:
        """Any mix of tags, newlines and text gives what the regex findall gave."""
        text = "".join(parts)
        assert last_block("claim", text) == self.regex_last("claim", text)
