"""Tests for the cache hooks of dahl.adapters._openai, through dahl.cache on a scripted server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dahl.adapters import _keybody as keybody
from dahl.adapters._bodies import BodyBytes, check_request_body, estimate_tokens
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.adapters._route import ChatRoute
from dahl.cache import CacheStore, CachingChecker, CachingSplitter
from dahl.config import EndpointConfig
from dahl.errors import OutputParseError
from dahl.records import (
    Answer,
    Claim,
    Evidence,
    Label,
    UnsupportedReason,
    Verdict,
    normalize_text,
)
from dahl.results._counters import RunCounters

ENV = "DAHL_TEST_OPENAI_KEY"
ANSWER = Answer(id="a1", question="What is metformin?", response="Metformin treats diabetes. It is cheap.")
CLAIM = Claim(text="Metformin treats type 2 diabetes.", index=0)


@pytest.fixture
def cfg(server, monkeypatch) -> EndpointConfig:
    """An endpoint on the scripted server, key in a test-only variable."""
    monkeypatch.setenv(ENV, "sk-test-key")
    return EndpointConfig(base_url=server.base_url, model="test-model", api_key_env=ENV)


class TestOpenAICheckerHooks:
    async def test_cached_second_check_sends_nothing(self, server, session, lane, cfg, tmp_path: Path) -> None:
        """The second check of a claim (new run, same cache) is served without a request."""
        server.push(server.chat("Supported", citations=["https://example.org/m"]))
        with CacheStore(tmp_path / "c") as store:
            first = await CachingChecker(OpenAIChecker(cfg, session, lane), store, RunCounters()).check(CLAIM, ANSWER)
        counters = RunCounters()
        with CacheStore(tmp_path / "c") as store:
            second = await CachingChecker(OpenAIChecker(cfg, session, lane), store, counters).check(CLAIM, ANSWER)
        assert len(server.requests) == 1
        assert second == first
        assert second.evidence == (Evidence(source="https://example.org/m"),)
        assert counters.claims_cached == 1

    async def test_parse_raw_matches_check(self, server, session, lane, cfg) -> None:
        """parse_raw on a reply gives the label check gives on the same reply."""
        server.push(server.chat("Not true: it treats type 2 only."))
        checker = OpenAIChecker(cfg, session, lane)
        verdict = await checker.check(CLAIM, ANSWER)
        assert verdict.label is Label.UNSUPPORTED
        assert checker.parse_raw(verdict.raw or "") == Verdict(
            label=Label.UNSUPPORTED, checker=checker.fingerprint, raw="Not true: it treats type 2 only.",
            reason=UnsupportedReason.CONTRADICTED,
        )

    def test_parse_raw_rejects_garbage(self, cfg) -> None:
        """parse_raw raises OutputParseError on a reply with no label."""
        checker = OpenAIChecker(cfg, None, None)  # type: ignore[arg-type]
        with pytest.raises(OutputParseError):
            checker.parse_raw("I would rather talk about the weather.")

    async def test_question_sent_normalized(self, server, session, lane, cfg) -> None:
        """The question is sent whitespace-normalized, as it is keyed."""
        server.push(server.chat("Supported"))
        spaced = Answer(id="a", question="  What is\n metformin? ", response="x")
        await OpenAIChecker(cfg, session, lane).check(CLAIM, spaced)
        assert "<question>\nWhat is metformin?\n</question>" in server.requests[0]["messages"][1]["content"]


class TestOpenAISplitterHooks:
    async def test_split_with_raw(self, server, session, lane, cfg) -> None:
        """split_with_raw returns the claims and the reply content they came from."""
        server.push(server.chat("- Metformin treats diabetes.\n- Metformin is cheap."))
        claims, raw = await OpenAISplitter(cfg, session, lane).split_with_raw(ANSWER)
        assert [c.text for c in claims] == ["Metformin treats diabetes.", "Metformin is cheap."]
        assert raw == "- Metformin treats diabetes.\n- Metformin is cheap."

    async def test_reask_raw_is_the_parsed_reply(self, server, session, lane, cfg) -> None:
        """After a re-ask, the raw reply returned is the one that parsed."""
        server.push(server.chat(""), server.chat("Metformin treats diabetes."))
        _, raw = await OpenAISplitter(cfg, session, lane).split_with_raw(ANSWER)
        assert raw == "Metformin treats diabetes."

    async def test_cached_split_and_reparse(self, server, session, lane, cfg, tmp_path: Path) -> None:
        """A cached split needs no request; with a new parser version it is re-parsed from raw."""
        server.push(server.chat("- Metformin treats diabetes.\n- Metformin is cheap."))
        with CacheStore(tmp_path / "c") as store:
            first = await CachingSplitter(OpenAISplitter(cfg, session, lane), store, RunCounters()).split(ANSWER)
        splitter = OpenAISplitter(cfg, session, lane)
        splitter.parser_version = "2"  # type: ignore[misc]
        with CacheStore(tmp_path / "c") as store:
            wrapped = CachingSplitter(splitter, store, RunCounters())
            second = await wrapped.split(ANSWER)
        assert len(server.requests) == 1
        assert second == first and wrapped.splits_cached == 1


OFFLINE_CFG = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="")
TAGGY = st.lists(
    st.sampled_from(["a", " ", "<", "/", "claim", "question", ">", "\x00", "é", "\n", "dahl-claim-hole"])
).map("".join)


class TestCheckKeyTemplate:
    @pytest.mark.parametrize("fmt", ["text", "json_object", "json_schema"])
    def test_usable_for_every_format(self, fmt) -> None:
        """The fast template passes its self-check for every reply format."""
        assert keybody.CheckKeyTemplate(OFFLINE_CFG, fmt, {}).usable

    @settings(max_examples=200, deadline=None)
    @given(question=TAGGY, claim=TAGGY)
    def test_fill_equals_exact(self, question: str, claim: str) -> None:
        """Filling the template gives exactly the body the prompt builder gives, tags and NULs included."""
        template = keybody.CheckKeyTemplate(OFFLINE_CFG, "text", {})
        assert template.fill(question, claim) == template.exact(question, claim)

    @settings(max_examples=200, deadline=None)
    @given(question=TAGGY, claim=TAGGY, fmt=st.sampled_from(["text", "json_object", "json_schema"]),
           provider=st.sampled_from(["openai", "anthropic"]))
    def test_sent_bytes_equal_encoded_body(self, question: str, claim: str, fmt, provider: str) -> None:
        """The request bytes filled from the template's are the route's encoding of the built body,
        and their token estimate is estimate_tokens of it."""
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="", provider=provider)
        route = ChatRoute(cfg)
        template = keybody.CheckKeyTemplate(cfg, fmt, {})
        sent_body = template.sent_body()
        assert sent_body is not None
        sent = BodyBytes(sent_body, keybody.CONTENT_HOLE, route.encode)
        assert sent.usable
        body = check_request_body(cfg, question, claim, fmt=fmt)
        assert sent.encode(template.content(question, claim)) == (route.encode(body), estimate_tokens(body))

    def test_sent_bytes_refuse_a_hole_encoded_twice(self) -> None:
        """A body holding the hole in two places cannot be split: BodyBytes says it is not usable."""
        hole = keybody.CONTENT_HOLE
        body = {"model": "m", "messages": [{"role": "user", "content": hole}], "metadata": {"tag": hole}}
        assert not BodyBytes(body, hole, orjson.dumps).usable

    async def test_key_body_is_sent_body(self, server, session, lane, cfg) -> None:
        """cache_request's content is the user message sent; its frame digests the rest of the body."""
        server.push(server.chat("Supported"))
        checker = OpenAIChecker(cfg, session, lane)
        answer = Answer(id="a", question=" What  is <question> metformin?", response="x")
        keyed = checker.cache_request(CLAIM, answer)
        await checker.check(CLAIM, answer)
        sent = server.requests[0]
        system = sent["messages"][0]["content"]
        digest = hashlib.blake2b(system.encode(), digest_size=16).hexdigest()
        assert keyed["content"] == sent["messages"][1]["content"]
        frame = {
            **sent,
            "messages": [{"role": "system", "content_blake2b": digest}, {**sent["messages"][1], "content": None}],
            "dahl_hole": 1,
        }
        expected = hashlib.blake2b(msgspec.msgpack.encode(frame, order="deterministic"), digest_size=16).hexdigest()
        assert keyed["frame"] == expected
        assert normalize_text(answer.question) in sent["messages"][1]["content"].replace("\u2039", "<")
