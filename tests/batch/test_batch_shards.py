"""Batch files: provider lines, sharding under each provider's limits, the ledger."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dahl.adapters._anthropic_wire import chat_reply, messages_body
from dahl.batch._ledger import LEDGER_NAME, Ledger
from dahl.batch._requests import BatchRequest
from dahl.batch._shards import LIMITS, Limits, cut, request_line, write_shards
from dahl.errors import InputError


def _requests(n: int) -> list[BatchRequest]:
    """``n`` synthetic check requests (distinct 32-hex keys, a small body each)."""
    body = {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "c"}],
            "temperature": 0.0, "max_tokens": 128}
    return [BatchRequest(f"{i:032x}", "check", body) for i in range(n)]


def _line_counts(files: list[tuple[Path, int]]) -> list[int]:
    return [len(path.read_bytes().splitlines()) for path, _ in files]


class TestSharding:
    def test_openai_120000_requests_make_files_of_50000_50000_20000_lines(self, tmp_path: Path) -> None:
        """OpenAI's 50,000-request limit cuts 120,000 check requests into 50,000 / 50,000 / 20,000 lines."""
        files = write_shards(tmp_path, "check", "openai", _requests(120_000), LIMITS["openai"])
        assert _line_counts(files) == [50_000, 50_000, 20_000]
        assert [n for _, n in files] == [50_000, 50_000, 20_000]
        assert [p.name for p, _ in files] == ["check-0001.jsonl", "check-0002.jsonl", "check-0003.jsonl"]

    def test_anthropic_120000_requests_make_batches_of_100000_and_20000(self, tmp_path: Path) -> None:
        """Anthropic's 100,000-request limit cuts the same requests into 100,000 / 20,000."""
        files = write_shards(tmp_path, "check", "anthropic", _requests(120_000), LIMITS["anthropic"])
        assert _line_counts(files) == [100_000, 20_000]

    def test_byte_limit_cuts_before_the_request_limit(self) -> None:
        """Lines of 10 bytes (11 with the newline) under a 25-byte limit go two to a shard."""
        assert [len(s) for s in cut([b"0123456789"] * 5, Limits(100, 25))] == [2, 2, 1]

    def test_a_line_above_the_byte_limit_is_refused(self) -> None:
        """One request larger than a whole batch cannot be sent: an error naming both sizes."""
        with pytest.raises(ValueError, match="one request of 11 bytes exceeds the batch limit of 10 bytes"):
            list(cut([b"0123456789"], Limits(100, 10)))

    def test_openai_line_carries_the_cache_key_and_the_chat_body(self) -> None:
        """An OpenAI line is {custom_id: key, method POST, url /v1/chat/completions, body}."""
        request = _requests(1)[0]
        assert orjson.loads(request_line("openai", request)) == {
            "custom_id": "0" * 32, "method": "POST", "url": "/v1/chat/completions", "body": request.body}

    def test_anthropic_line_carries_a_messages_body(self) -> None:
        """An Anthropic request moves the system message to ``system`` and keeps max_tokens."""
        line = orjson.loads(request_line("anthropic", _requests(1)[0]))
        assert line == {"custom_id": "0" * 32, "params": {
            "model": "m", "max_tokens": 128, "system": "s", "temperature": 0.0,
            "messages": [{"role": "user", "content": "c"}]}}


class TestAnthropicWire:
    def test_messages_body_and_chat_reply(self) -> None:
        """A Messages reply reads back as a chat completion: text, finish reason and usage in tokens."""
        assert messages_body({"model": "m", "messages": [{"role": "user", "content": "q"}]})["max_tokens"] == 1024
        reply = chat_reply({"id": "msg_1", "model": "m", "content": [{"type": "text", "text": "Supported"}],
                            "stop_reason": "max_tokens", "usage": {"input_tokens": 7, "output_tokens": 2}})
        assert reply["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "Supported"},
                                       "finish_reason": "length"}
        assert reply["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}


class TestLedger:
    def _wave(self) -> dict[str, object]:
        return {"event": "wave", "wave": 1, "provider": "openai", "resubmit_of": None, "only": None,
                "cache_dir": "c", "stages": {}, "shards": [{"path": "wave-01/check-0001.jsonl", "stage": "check",
                                                              "requests": 3}]}

    def test_events_are_read_back_in_order(self, tmp_path: Path) -> None:
        """A wave, an upload and a submit read back as one shard with its file and batch ids."""
        ledger = Ledger.read(tmp_path)
        ledger.append(self._wave())
        ledger.append({"event": "uploaded", "shard": "wave-01/check-0001.jsonl", "file_id": "file-1"})
        ledger.append({"event": "submitted", "shard": "wave-01/check-0001.jsonl", "batch_id": "batch-1"})
        shard = Ledger.read(tmp_path).shards["wave-01/check-0001.jsonl"]
        assert (shard.file_id, shard.batch_id, shard.requests, shard.collected) == ("file-1", "batch-1", 3, None)

    def test_a_torn_last_line_is_an_event_that_never_happened(self, tmp_path: Path) -> None:
        """A kill mid-append leaves a line without newline: ignored on read, trimmed by the next append."""
        ledger = Ledger.read(tmp_path)
        ledger.append(self._wave())
        with (tmp_path / LEDGER_NAME).open("ab") as handle:
            handle.write(b'{"event": "submitted", "shard": "wave-01/check-0001.jsonl", "batch')
        assert Ledger.read(tmp_path).shards["wave-01/check-0001.jsonl"].batch_id is None
        Ledger.read(tmp_path).append({"event": "uploaded", "shard": "wave-01/check-0001.jsonl", "file_id": "f"})
        assert len((tmp_path / LEDGER_NAME).read_bytes().splitlines()) == 2

    def test_a_damaged_line_names_file_and_line(self, tmp_path: Path) -> None:
        """A whole line that is not JSON is an InputError naming the ledger and line 2."""
        (tmp_path / LEDGER_NAME).write_bytes(orjson.dumps(self._wave()) + b"\nnot json\n")
        with pytest.raises(InputError, match=r"ledger\.jsonl:2"):
            Ledger.read(tmp_path)
