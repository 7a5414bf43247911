"""Tests for dahl.adapters._openai against a scripted loopback server."""

from __future__ import annotations

import dataclasses
import logging

import orjson
import pytest

from dahl.adapters import _openai as openai_adapter
from dahl.adapters import _prompts as prompts
from dahl.adapters._base import Checker, Splitter
from dahl.adapters._bodies import check_request_body, endpoint_fingerprint, estimate_tokens, split_request_body
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.config import EndpointConfig
from dahl.errors import ConfigError, OutputParseError, TransientAPIError
from dahl.records import Answer, Claim, Evidence, Label, Usage

KEY = "sk-test-SECRETKEY123456"
ENV = "DAHL_TEST_OPENAI_KEY"
ANSWER = Answer(id="a1", question="What is metformin?", response="Metformin treats diabetes. It is cheap.")
CLAIM = Claim(text="Metformin treats type 2 diabetes.", index=0)


@pytest.fixture
def cfg(server, monkeypatch) -> EndpointConfig:
    """An endpoint on the scripted server, key in a test-only variable."""
    monkeypatch.setenv(ENV, KEY)
    return EndpointConfig(base_url=server.base_url, model="test-model", api_key_env=ENV)


class TestRequestBodies:
    def test_check_body_text_mode(self) -> None:
        """A non-OpenAI host gets text mode: no response_format, default 128 tokens, no seed."""
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="llama")
        body = check_request_body(cfg, "What is metformin?", "Metformin treats diabetes.")
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}
        assert body["model"] == "llama"
        assert body["temperature"] == 0.0
        assert body["max_tokens"] == 128
        assert body["messages"] == prompts.check_messages("What is metformin?", "Metformin treats diabetes.")

    def test_openai_host_uses_schema(self) -> None:
        """api.openai.com with format auto sends the strict check schema and JSON instructions."""
        cfg = EndpointConfig(base_url="https://api.openai.com/v1", model="gpt-4o-mini")
        body = check_request_body(cfg, "q", "c")
        assert body["response_format"]["type"] == "json_schema"
        assert '{"label":' in body["messages"][0]["content"]

    def test_seed_and_extra_body(self) -> None:
        """seed and provider extras are merged into the body."""
        cfg = EndpointConfig(
            base_url="https://api.perplexity.ai", model="sonar", seed=7,
            extra_body={"search_context_size": "low"},
        )
        body = split_request_body(cfg, "q", "a")
        assert body["seed"] == 7
        assert body["search_context_size"] == "low"
        assert body["max_tokens"] == 1024

    def test_no_key_in_body(self, monkeypatch) -> None:
        """The API key never appears in a request body."""
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        cfg = EndpointConfig(base_url="https://api.openai.com/v1", model="m")
        for body in (check_request_body(cfg, "q", "c"), split_request_body(cfg, "q", "a")):
            assert b"SECRETKEY" not in orjson.dumps(body)

    def test_estimate_tokens(self) -> None:
        """Estimate = ceil(11 chars / 4) = 3 prompt tokens + max_tokens 10 = 13."""
        body = {"messages": [{"role": "system", "content": "abcdefgh"}, {"role": "user", "content": "abc"}],
                "max_tokens": 10}
        assert estimate_tokens(body) == 13


class TestFingerprint:
    BASE = EndpointConfig(base_url="http://127.0.0.1:8000/v1", model="m")

    @pytest.mark.parametrize(
        "change",
        [
            {"model": "m2"},
            {"temperature": 0.7},
            {"seed": 1},
            {"max_tokens": 64},
            {"response_format": "json_object"},
            {"extra_body": {"top_p": 0.5}},
            {"base_url": "http://127.0.0.1:8001/v1"},
        ],
        ids=["model", "temperature", "seed", "max_tokens", "format", "extra_body", "base_url"],
    )
    def test_changes_with_output_settings(self, change: dict[str, object]) -> None:
        """Every setting that changes the model's reply changes the fingerprint."""
        other = dataclasses.replace(self.BASE, **change)  # type: ignore[arg-type]
        assert endpoint_fingerprint(other, "check") != endpoint_fingerprint(self.BASE, "check")

    @pytest.mark.parametrize(
        "change",
        [{"api_key_env": "OTHER_KEY"}, {"timeout_s": 5.0}, {"max_in_flight": 3}, {"rpm": 60.0},
         {"base_url": "HTTP://127.0.0.1:8000/v1/"}],
        ids=["key", "timeout", "max_in_flight", "rpm", "url-spelling"],
    )
    def test_ignores_key_and_limits(self, change: dict[str, object]) -> None:
        """Key, timeouts, concurrency and URL spelling do not change the fingerprint."""
        other = dataclasses.replace(self.BASE, **change)  # type: ignore[arg-type]
        assert endpoint_fingerprint(other, "check") == endpoint_fingerprint(self.BASE, "check")

    def test_template_version(self, monkeypatch) -> None:
        """Bumping the check template version changes the check fingerprint."""
        before = endpoint_fingerprint(self.BASE, "check")
        monkeypatch.setattr(prompts, "CHECK_TEMPLATE", dataclasses.replace(prompts.CHECK_TEMPLATE, version="check/v2"))
        assert endpoint_fingerprint(self.BASE, "check") != before

    def test_stage_and_default_tokens(self) -> None:
        """Split and check fingerprints differ and spell out the stage defaults."""
        assert "max_tokens=1024" in endpoint_fingerprint(self.BASE, "split")
        assert "max_tokens=128|" in endpoint_fingerprint(self.BASE, "check")
        assert "template=check/v1" in endpoint_fingerprint(self.BASE, "check")


class TestOpenAIChecker:
    async def test_supported(self, server, session, lane, cfg) -> None:
        """A 'Supported' reply gives a supported verdict with raw text, usage and fingerprint."""
        server.push(server.chat("Supported\nWell documented.", prompt_tokens=40, completion_tokens=5))
        checker = OpenAIChecker(cfg, session, lane)
        assert isinstance(checker, Checker)
        verdict = await checker.check(CLAIM, ANSWER)
        assert verdict.label == Label.SUPPORTED
        assert verdict.raw == "Supported\nWell documented."
        assert verdict.usage == Usage(prompt_tokens=40, completion_tokens=5)
        assert verdict.checker == checker.fingerprint
        assert server.requests == [check_request_body(cfg, ANSWER.question, CLAIM.text)]
        assert lane.estimates == [estimate_tokens(server.requests[0])]

    async def test_reask_then_label(self, server, session, lane, cfg) -> None:
        """An unparseable reply is re-asked once with the error; the second reply decides."""
        server.push(server.chat("As an assistant I think this is interesting."), server.chat("Not true"))
        verdict = await OpenAIChecker(cfg, session, lane).check(CLAIM, ANSWER)
        assert verdict.label == Label.UNSUPPORTED
        assert len(server.requests) == 2
        follow_up = server.requests[1]["messages"]
        assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "user"]
        assert follow_up[3]["content"].startswith("Your reply could not be parsed:")
        assert "<claim>\nMetformin treats type 2 diabetes.\n</claim>" in follow_up[3]["content"]
        assert verdict.usage == Usage(prompt_tokens=20, completion_tokens=4)

    async def test_reask_once_then_error(self, server, session, lane, cfg) -> None:
        """Two unparseable replies give label error after exactly 2 requests (the third is unused)."""
        server.push(server.chat("Hmm."), server.chat("Well, hard to say"), server.chat("Supported"))
        verdict = await OpenAIChecker(cfg, session, lane).check(CLAIM, ANSWER)
        assert verdict.label == Label.ERROR
        assert verdict.error is not None and verdict.error.startswith("OutputParseError: ")
        assert verdict.raw == "Well, hard to say"
        assert len(server.requests) == 2
        assert len(server.script) == 1

    async def test_citations_kept(self, server, session, lane, cfg) -> None:
        """Perplexity citations and search results become evidence: URL, and title and snippet when sent."""
        server.push(server.chat(
            "Supported",
            citations=["https://pubmed.example/1", "https://fda.example/2"],
            search_results=[
                {"url": "https://fda.example/2", "title": "FDA", "date": "2024-01-02",
                 "snippet": "Metformin is approved for type 2 diabetes."},
                {"url": "https://other.example/3", "title": "Other"},
            ],
        ))
        verdict = await OpenAIChecker(cfg, session, lane).check(CLAIM, ANSWER)
        assert verdict.evidence == (
            Evidence(source="https://pubmed.example/1"),
            Evidence(source="https://fda.example/2", title="FDA", text="Metformin is approved for type 2 diabetes."),
            Evidence(source="https://other.example/3", title="Other"),
        )

    async def test_format_fallback(self, server, session, lane, cfg, caplog) -> None:
        """A 400 naming response_format switches to text mode for this and later calls, logged once."""
        cfg = dataclasses.replace(cfg, response_format="json_schema")
        server.push(
            server.error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported"),
            server.chat("Supported"),
            server.chat("Unknown"),
        )
        checker = OpenAIChecker(cfg, session, lane)
        with caplog.at_level(logging.WARNING, logger="dahl"):
            first = await checker.check(CLAIM, ANSWER)
            second = await checker.check(CLAIM, ANSWER)
        assert (first.label, second.label) == (Label.SUPPORTED, Label.UNKNOWN)
        assert ["response_format" in r for r in server.requests] == [True, False, False]
        assert len([r for r in caplog.records if "response_format" in r.getMessage()]) == 1

    async def test_http_error_propagates(self, server, session, lane, cfg) -> None:
        """A failed call raises the typed error (the lane decides on retries), not a verdict."""
        server.push(server.error(503, "overloaded"))
        with pytest.raises(TransientAPIError):
            await OpenAIChecker(cfg, session, lane).check(CLAIM, ANSWER)

    async def test_missing_key(self, server, session, lane, monkeypatch) -> None:
        """An unset key variable fails at construction with a ConfigError naming the variable."""
        monkeypatch.delenv("DAHL_TEST_MISSING_KEY", raising=False)
        cfg = EndpointConfig(base_url=server.base_url, model="m", api_key_env="DAHL_TEST_MISSING_KEY")
        with pytest.raises(ConfigError, match="DAHL_TEST_MISSING_KEY"):
            OpenAIChecker(cfg, session, lane)

    async def test_bearer_sent(self, server, session, lane, cfg) -> None:
        """The key from the environment is sent as the bearer token."""
        server.push(server.chat("Yes"))
        await OpenAIChecker(cfg, session, lane).check(CLAIM, ANSWER)
        assert server.request_headers[0]["Authorization"] == f"Bearer {KEY}"


class TestOpenAISplitter:
    async def test_text_lines(self, server, session, lane, cfg) -> None:
        """A bulleted reply becomes indexed, normalized claims."""
        server.push(server.chat("- Metformin treats diabetes.\n-  Metformin is  cheap."))
        splitter = OpenAISplitter(cfg, session, lane)
        assert isinstance(splitter, Splitter)
        claims = await splitter.split(ANSWER)
        assert claims == [
            Claim(text="Metformin treats diabetes.", index=0),
            Claim(text="Metformin is cheap.", index=1),
        ]
        assert server.requests == [split_request_body(cfg, ANSWER.question, ANSWER.response)]

    async def test_json_mode(self, server, session, lane, cfg) -> None:
        """In json_object mode the body asks for JSON and a {"claims": [...]} reply is parsed."""
        cfg = dataclasses.replace(cfg, response_format="json_object")
        server.push(server.chat('{"claims": ["Metformin treats diabetes."]}'))
        claims = await OpenAISplitter(cfg, session, lane).split(ANSWER)
        assert [c.text for c in claims] == ["Metformin treats diabetes."]
        assert server.requests[0]["response_format"] == {"type": "json_object"}

    async def test_reask_then_raise(self, server, session, lane, cfg) -> None:
        """Two unparseable replies raise OutputParseError after exactly 2 requests."""
        server.push(server.chat("I'm sorry, I can't."), server.chat("As an AI, no."), server.chat("- A."))
        with pytest.raises(OutputParseError) as info:
            await OpenAISplitter(cfg, session, lane).split(ANSWER)
        assert info.value.raw == "As an AI, no."
        assert len(server.requests) == 2
        assert "<answer>" in server.requests[1]["messages"][-1]["content"]

    async def test_reask_then_claims(self, server, session, lane, cfg) -> None:
        """A re-ask that succeeds returns its claims."""
        server.push(server.chat(""), server.chat("Metformin treats diabetes."))
        claims = await OpenAISplitter(cfg, session, lane).split(ANSWER)
        assert claims == [Claim(text="Metformin treats diabetes.", index=0)]


def test_module_exports() -> None:
    """The module's __all__ names exist."""
    for name in openai_adapter.__all__:
        assert hasattr(openai_adapter, name)
