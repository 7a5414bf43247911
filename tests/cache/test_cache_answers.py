"""Tests for whole answers in the cache (dahl.cache._wrap.AnswerCache): finished answers stored whole, keyed by all that shapes them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dahl.adapters._fake import FakeChecker
from dahl.adapters._given import GivenSplitter
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.cache import AnswerCache, CacheStore, CachingChecker, CachingSplitter
from dahl.cache._wrap import StoredAnswer
from dahl.config import EndpointConfig
from dahl.results._counters import RunCounters
from dahl.results._assemble import EncodedResult, FoundAnswer, result_of_claims, result_of_encoded
from dahl.records import Answer, AnswerResult, ClaimResult, Label, content_id

ENV = "DAHL_TEST_ANSWERS_KEY"
ANSWER = Answer(id="a1", question="Who was Ada Lovelace?", response="Ada Lovelace was a mathematician. She wrote notes.")
CLAIMS = (
    ClaimResult(text="Ada Lovelace was a mathematician.", index=0, label=Label.SUPPORTED, raw="Supported"),
    ClaimResult(text="She wrote notes.", index=1, label=Label.UNSUPPORTED, raw="Unsupported"),
)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "sk-first-key")


def _cfg(**changes: Any) -> EndpointConfig:
    base = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m1", api_key_env=ENV)
    return dataclasses.replace(base, **changes)


def _cache(store: CacheStore | None, cfg: EndpointConfig | None = None, *, splitter: Any = None,
           preprocess: bool = False) -> AnswerCache | None:
    counters = RunCounters()
    inner = OpenAIChecker(cfg or _cfg(), None, None)  # type: ignore[arg-type]  # never sends
    return AnswerCache.for_run(
        store,
        CachingSplitter(splitter or GivenSplitter(), store, counters),
        CachingChecker(inner, store, counters),
        preprocess=preprocess,
        max_response_chars=50_000,
    )


def _key_of(store: CacheStore, cfg: EndpointConfig | None = None, input_hash: str = "h1", **kw: Any) -> str | None:
    cache = _cache(store, cfg, **kw)
    assert cache is not None
    return cache.keys([(ANSWER, input_hash)])[0]


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with CacheStore(tmp_path / "cache") as s:
        yield s


class TestForRun:
    def test_no_store_no_answer_cache(self) -> None:
        """--no-cache: no whole-answer entries."""
        assert _cache(None) is None

    def test_an_uncached_checker_gets_none(self, store: CacheStore) -> None:
        """A cheap Checker (fake: not cacheable) is never cached, whole or claim by claim."""
        counters = RunCounters()
        checker = CachingChecker(FakeChecker(), store, counters)
        assert AnswerCache.for_run(store, CachingSplitter(GivenSplitter(), store, counters), checker,
                                   preprocess=False, max_response_chars=10) is None


class TestKeys:
    def test_shape_and_stability(self, store: CacheStore) -> None:
        """A key is 32 hex digits and the same for the same answer and settings."""
        key = _key_of(store)
        assert key is not None and len(key) == 32 and int(key, 16) >= 0
        assert _key_of(store) == key

    def test_everything_that_shapes_a_result_changes_the_key(self, store: CacheStore) -> None:
        """Input hash, Checker model, base URL, temperature, preprocessing: each gives another key."""
        base = _key_of(store)
        others = [
            _key_of(store, input_hash="h2"),
            _key_of(store, _cfg(model="m2")),
            _key_of(store, _cfg(base_url="http://127.0.0.1:10/v1")),
            _key_of(store, _cfg(temperature=0.5)),
            _key_of(store, preprocess=True),
        ]
        assert len({base, *others}) == 6

    def test_operational_settings_keep_the_key(self, store: CacheStore, monkeypatch: pytest.MonkeyPatch) -> None:
        """API key, timeout and concurrency are not part of the key."""
        base = _key_of(store)
        monkeypatch.setenv(ENV, "sk-second-key")
        assert _key_of(store, _cfg(timeout_s=7.0, max_in_flight=3)) == base

    def test_splitter_parser_and_code_changes_change_the_key(
        self, store: CacheStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A new Splitter parser version, or other dahl code (preprocessing, offline Splitters), is another key."""
        import dahl.cache._wrap as answers

        base = _key_of(store)
        with monkeypatch.context() as m:
            m.setattr(GivenSplitter, "parser_version", "2", raising=False)
            parser = _key_of(store)
        with monkeypatch.context() as m:
            m.setattr(answers, "code_digest", lambda: "another version of dahl")
            code = _key_of(store)
        assert len({base, parser, code}) == 3

    def test_the_code_digest_covers_every_module(self) -> None:
        """code_digest hashes the package's source files: 32 hex digits, stable within a process."""
        from dahl.cache._wrap import code_digest

        assert len(code_digest()) == 32 and code_digest() == code_digest()

    def test_a_cached_splitter_adds_its_request(self, store: CacheStore) -> None:
        """With an LLM Splitter, another split model is another key (its claims may differ)."""
        one = _key_of(store, splitter=OpenAISplitter(_cfg(model="s1"), None, None))  # type: ignore[arg-type]
        two = _key_of(store, splitter=OpenAISplitter(_cfg(model="s2"), None, None))  # type: ignore[arg-type]
        assert one is not None and two is not None and one != two != _key_of(store)


def _result(claims: tuple[ClaimResult, ...], response: str | None = None) -> AnswerResult:
    answer = ANSWER if response is None else msgspec.structs.replace(ANSWER, response=response)
    return result_of_claims(answer, "h1", claims, gamma=10.0, k=64)


def _claims_of(found: FoundAnswer | None) -> tuple[ClaimResult, ...]:
    assert found is not None
    return msgspec.json.decode(found.claims, type=tuple[ClaimResult, ...])


class TestKeepAndLookUp:
    async def test_kept_answer_is_found_before_and_after_commit(self, store: CacheStore) -> None:
        """keep then look_up: the same claims, label counts and question id come back (from memory, then disk)."""
        cache = _cache(store)
        assert cache is not None
        keys, found = await cache.look_up([(ANSWER, "h1")])
        assert found == [None] and keys[0] is not None
        cache.keep(keys[0], _result(CLAIMS), False)
        got = (await cache.look_up([(ANSWER, "h1")]))[1][0]
        assert got is not None and _claims_of(got) == CLAIMS
        assert (got.counts, got.question_id, got.response) == ((1, 1, 0, 0, 0), content_id(ANSWER.question), None)
        await store.flush()
        other = _cache(store)
        assert other is not None
        again = (await other.look_up([(ANSWER, "h1"), (ANSWER, "h9")]))[1]
        assert again[1] is None and _claims_of(again[0]) == CLAIMS
        assert (other.hits, other.misses, cache.kept) == (1, 1, 1)

    async def test_a_hit_writes_the_line_a_scored_answer_writes(self, store: CacheStore) -> None:
        """The line spliced from a whole answer is byte for byte the line of the result it was kept from."""
        cache = _cache(store)
        assert cache is not None
        key = cache.keys([(ANSWER, "h1")])[0]
        assert key is not None
        result = _result(CLAIMS)
        cache.keep(key, result, False)
        got = (await cache.look_up([(ANSWER, "h1")]))[1][0]
        assert got is not None
        line = result_of_encoded(ANSWER, "h1", got.claims, got.counts, got.question_id, gamma=10.0, k=64)
        assert msgspec.json.encode(line) == msgspec.json.encode(result)
        assert line.decoded() == result
        # The splice relies on both structs having the same fields in the same order.
        assert EncodedResult.__struct_fields__ == AnswerResult.__struct_fields__

    async def test_the_cleaned_response_is_kept(self, store: CacheStore) -> None:
        """A response changed by preprocessing comes back with the claims; an unchanged one is not stored."""
        cache = _cache(store)
        assert cache is not None
        key = cache.keys([(ANSWER, "h1")])[0]
        assert key is not None
        cache.keep(key, _result(CLAIMS, "Ada Lovelace was a mathematician."), True)
        got = (await cache.look_up([(ANSWER, "h1")]))[1][0]
        assert got is not None and got.response == "Ada Lovelace was a mathematician."

    async def test_errors_and_empty_answers_are_not_kept(self, store: CacheStore) -> None:
        """An answer with an error verdict, or without claims, is never stored whole."""
        cache = _cache(store)
        assert cache is not None
        key = cache.keys([(ANSWER, "h1")])[0]
        assert key is not None
        failed = (CLAIMS[0], ClaimResult(text="x", index=1, label=Label.ERROR, error="TransientAPIError: 503"))
        cache.keep(key, _result(failed), False)
        cache.keep(key, _result(()), False)
        assert cache.kept == 0
        assert (await cache.look_up([(ANSWER, "h1")]))[1] == [None]
        assert store.stats()["queued"] == 0

    async def test_a_damaged_entry_is_a_miss(self, store: CacheStore) -> None:
        """Bytes that are not a whole answer, claims that are not JSON claims, or an error claim: a miss."""
        cache = _cache(store)
        assert cache is not None
        key = cache.keys([(ANSWER, "h1")])[0]
        assert key is not None
        damaged = [
            b"\xc1 not msgpack",
            msgspec.msgpack.encode(StoredAnswer(b'[{"label": "supported"', "q")),  # cut JSON
            msgspec.msgpack.encode(StoredAnswer(b'[{"label": "maybe"}]', "q")),  # not a label
            msgspec.msgpack.encode(StoredAnswer(b'[{"label": "error"}]', "q")),
            msgspec.msgpack.encode(StoredAnswer(b"[]", "q")),
        ]
        for value in damaged:
            store.put(key, value, None)
            assert (await cache.look_up([(ANSWER, "h1")]))[1] == [None], value
        store.put(key, msgspec.msgpack.encode(StoredAnswer(b'[{"label": "unknown"}]', "q")), None)
        assert (await cache.look_up([(ANSWER, "h1")]))[1][0] is not None
