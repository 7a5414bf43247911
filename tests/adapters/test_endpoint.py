"""Tests for dahl.adapters._endpoint: the one client's fallback, re-ask, usage and cost."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from dahl.adapters._bodies import Task, format_field
from dahl.adapters._endpoint import CountMismatch, Endpoint, reask_messages, rejects_format
from dahl.adapters._parse import parse_json_object
from dahl.config import EndpointConfig
from dahl.errors import OutputParseError, PermanentAPIError, TransientAPIError
from dahl.lanes._spend import Spend
from dahl.pricing import Price, PriceTable
from dahl.records import Usage

ENV = "DAHL_ENDPOINT_TEST_KEY"
SCHEMA = {"type": "json_schema", "json_schema": {"name": "t", "strict": True, "schema": {"type": "object"}}}
TASK = Task(name="extract", template="t/v1", max_tokens=64, json_schema=SCHEMA,
            reask_json="reply with the JSON object only", reask_text="reply with JSON only")
MESSAGES = [{"role": "system", "content": "S"}, {"role": "user", "content": "<data>x</data>"}]
#: $1 per million prompt tokens, $10 per million completion tokens.
PRICES = PriceTable({"test-model": Price(model="test-model", input_usd=1.0, output_usd=10.0)}, "2025-05-01")


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "sk-test-0123456789abcdef")


def make(server: Any, session: Any, lane: Any, fmt: str = "text", **kwargs: Any) -> Endpoint:
    cfg = EndpointConfig(base_url=server.base_url, model="test-model", api_key_env=ENV, response_format=fmt)  # type: ignore[arg-type]
    return Endpoint(cfg, session, lane, TASK, **kwargs)


def facts(raw: str) -> list[str]:
    value = parse_json_object(raw).get("facts")
    if not isinstance(value, list):
        raise OutputParseError("no facts list", raw=raw)
    return value


class TestRejectsFormat:
    @pytest.mark.parametrize(
        ("error", "anthropic", "expected"),
        [
            (PermanentAPIError("HTTP 400: 'response_format' is not supported", status=400), False, True),
            (PermanentAPIError("HTTP 422: response_format json_schema unsupported", status=422), False, True),
            (PermanentAPIError("HTTP 400: tool_choice is not supported", status=400), False, False),
            (PermanentAPIError("HTTP 400: tool_choice is not supported", status=400), True, True),
            (PermanentAPIError("HTTP 400: tools: forced tool use unsupported", status=400), True, True),
            (PermanentAPIError("HTTP 404: response_format", status=404), False, False),
            (PermanentAPIError("HTTP 400: max_tokens too large", status=400), True, False),
            (TransientAPIError("HTTP 500: response_format", status=500), False, False),
        ],
        ids=["openai-400", "openai-422", "openai-tool-words", "anthropic-tool_choice", "anthropic-tools",
             "404", "other-400", "5xx"],
    )
    def test_decision(self, error: Exception, anthropic: bool, expected: bool) -> None:
        """Only a 400/422 naming response_format (or, for Anthropic, the forced tool) is a format rejection."""
        assert rejects_format(error, anthropic=anthropic) is expected  # type: ignore[arg-type]


class TestBody:
    def test_schema_per_format(self, server, session, lane) -> None:
        """json_schema sends the task's schema, json_object the plain mode, text no field; max_tokens is the task's."""
        endpoint = make(server, session, lane, "json_schema")
        assert endpoint.body(MESSAGES)["response_format"] == SCHEMA
        assert endpoint.body(MESSAGES, "json_object")["response_format"] == {"type": "json_object"}
        assert "response_format" not in endpoint.body(MESSAGES, "text")
        assert endpoint.body(MESSAGES)["max_tokens"] == 64
        assert format_field("json_schema", None) == {"type": "json_object"}

    def test_fingerprint_names_task_and_settings(self, server, session, lane) -> None:
        """The fingerprint holds the task name, template, budget and format; never the key."""
        fingerprint = make(server, session, lane, "json_object").fingerprint
        assert fingerprint.startswith(f"openai:extract|{server.base_url}|model=test-model|template=t/v1|")
        assert "|max_tokens=64|format=json_object|" in fingerprint and "sk-test" not in fingerprint


class TestFallback:
    async def test_rejection_switches_to_text_for_good(self, server, session, lane, caplog) -> None:
        """A 400 naming response_format: the same request again in text mode, text mode stays, logged once."""
        server.push(server.error(400, "Invalid parameter: 'response_format' is not supported"),
                    server.chat('{"facts": ["a"]}'), server.chat('{"facts": ["b"]}'))
        endpoint = make(server, session, lane, "json_object")
        with caplog.at_level(logging.WARNING, logger="dahl.adapters._endpoint"):
            first = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
            second = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
        assert (first.value, second.value, endpoint.reply_format, endpoint.calls) == (["a"], ["b"], "text", 3)
        assert ["response_format" in r for r in server.requests] == [True, False, False]
        assert len([r for r in caplog.records if "response_format" in r.getMessage()]) == 1

    async def test_concurrent_rejections_each_fall_back(self, server, session, lane, caplog) -> None:
        """Two requests in flight, both rejected in json_object: each is sent again in text; logged once."""
        server.push(server.error(400, "response_format is not supported"),
                    server.error(400, "response_format is not supported"),
                    server.chat('{"facts": ["a"]}'), server.chat('{"facts": ["a"]}'))
        endpoint = make(server, session, lane, "json_object")
        results: list[list[str] | None] = []

        async def ask() -> None:
            results.append((await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)).value)

        with caplog.at_level(logging.WARNING, logger="dahl.adapters._endpoint"):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                tg.start_soon(ask)
        assert (results, endpoint.reply_format, endpoint.calls) == ([["a"], ["a"]], "text", 4)
        assert ["response_format" in r for r in server.requests] == [True, True, False, False]
        assert len([r for r in caplog.records if "response_format" in r.getMessage()]) == 1

    async def test_rejection_in_text_mode_stands(self, server, session, lane) -> None:
        """In text mode there is nothing to fall back from: the 400 is raised after one request."""
        server.push(server.error(400, "response_format is not supported"))
        endpoint = make(server, session, lane, "text")
        with pytest.raises(PermanentAPIError):
            await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
        assert len(server.requests) == 1


class TestReask:
    async def test_reask_once_and_usage_summed(self, server, session, lane) -> None:
        """An unparseable reply is re-asked once with the error; the usage of both calls is summed."""
        server.push(server.chat("not json", prompt_tokens=10, completion_tokens=2),
                    server.chat('{"facts": ["a"]}', prompt_tokens=30, completion_tokens=5))
        endpoint = make(server, session, lane, "json_object")
        parsed = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
        assert (parsed.get(), parsed.error, parsed.raw) == (["a"], None, '{"facts": ["a"]}')
        assert parsed.usage == Usage(prompt_tokens=40, completion_tokens=7)
        follow_up = server.requests[1]["messages"]
        assert follow_up[:2] == MESSAGES and follow_up[2] == {"role": "assistant", "content": "not json"}
        assert follow_up[3]["content"].startswith("Your reply could not be parsed: the reply is not JSON")
        assert "; reply with the JSON object only.\n\n<data>x</data>" in follow_up[3]["content"]

    async def test_second_failure_keeps_error_raw_and_usage(self, server, session, lane) -> None:
        """Two unparseable replies: the parser's error of the last reply, its raw text and both calls' usage."""
        server.push(server.chat("nope", prompt_tokens=10, completion_tokens=2),
                    server.chat("still nope", prompt_tokens=20, completion_tokens=3))
        endpoint = make(server, session, lane)
        parsed = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
        assert type(parsed.error) is OutputParseError and parsed.value is None
        assert (parsed.raw, parsed.usage, len(server.requests)) == (
            "still nope", Usage(prompt_tokens=30, completion_tokens=5), 2)
        with pytest.raises(OutputParseError, match="not JSON"):
            parsed.get()
        assert "reply with JSON only" in server.requests[1]["messages"][-1]["content"]  # text-mode wording

    async def test_count_mismatch_is_not_reasked(self, server, session, lane) -> None:
        """A CountMismatch from the parser is not re-asked (one request); get() raises it."""
        def count(raw: str) -> list[str]:
            raise CountMismatch("1 rating for 2 facts", raw=raw)

        server.push(server.chat('{"ratings": []}'))
        endpoint = make(server, session, lane)
        parsed = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), count)
        with pytest.raises(CountMismatch):
            parsed.get()
        assert len(server.requests) == 1

    async def test_reask_off(self, server, session, lane) -> None:
        """reask=False: an unparseable reply is the parse error after one request."""
        server.push(server.chat("nope"))
        endpoint = make(server, session, lane)
        parsed = await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts, reask=False)
        assert isinstance(parsed.error, OutputParseError) and len(server.requests) == 1

    def test_reask_messages_neutralize_the_reply(self) -> None:
        """The quoted reply goes through the stage's neutralizer; the data blocks are repeated."""
        messages = reask_messages(MESSAGES, "a </data> b", "bad", "say X", neutralize=lambda t: t.replace("<", "‹"))
        assert messages[2] == {"role": "assistant", "content": "a ‹/data> b"}
        assert messages[3]["content"] == "Your reply could not be parsed: bad; say X.\n\n<data>x</data>"


class TestSpend:
    async def test_calls_metered_under_the_task_name(self, server, session, lane) -> None:
        """With spend, each call's usage is charged to the task's stage: 40 in + 7 out = $0.00011."""
        server.push(server.chat("not json", prompt_tokens=10, completion_tokens=2),
                    server.chat('{"facts": []}', prompt_tokens=30, completion_tokens=5))
        spend = Spend(PRICES)
        endpoint = make(server, session, lane, spend=spend)
        await endpoint.ask(lambda fmt: endpoint.body(MESSAGES, fmt), facts)
        stage = spend.stages["extract"]
        assert (stage.calls, stage.input_tokens, stage.output_tokens) == (2, 40, 7)
        assert stage.usd == pytest.approx(40e-6 + 7e-5)

    async def test_meter_as_names_the_stage(self, server, session, lane) -> None:
        """meter_as reports the money under another name (generation: the model's)."""
        server.push(server.chat("text"))
        spend = Spend(PRICES)
        endpoint = make(server, session, lane, spend=spend, meter_as="test-model")
        await endpoint.send(endpoint.body(MESSAGES))
        assert list(spend.stages) == ["test-model"]
