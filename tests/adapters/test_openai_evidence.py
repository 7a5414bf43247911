"""Tests for the OpenAI-compatible Checker with a corpus (retrieve, then ask) on a scripted loopback server."""

from __future__ import annotations

import dataclasses
import threading

import msgspec
import orjson
import pytest

from dahl.adapters import _prompts as prompts
from dahl.adapters._corpus import Corpus
from dahl.run._plan import AdapterSettings
from dahl.adapters._openai import NO_PASSAGE, OpenAIChecker
from dahl.cache import CacheStore, CachingChecker
from dahl.cache._keys import check_key
from dahl.config import EndpointConfig
from dahl.results._counters import RunCounters
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, Evidence, Label, UnsupportedReason, Verdict

KEY = "sk-test-SECRETKEY123456"
ENV = "DAHL_TEST_OPENAI_KEY"
DOCS = [
    ("metformin", "Metformin", "Metformin lowers glucose production in the liver. It was approved in 1994."),
    ("aspirin", "Aspirin", "Aspirin was approved for pain relief."),
    ("insulin", "", "Insulin lowers blood glucose."),
]
ANSWER = Answer(id="a1", question="What is metformin?", response="...")
CLAIM = Claim(text="Metformin lowers  glucose production.", index=0)


@pytest.fixture
def cfg(server, monkeypatch) -> EndpointConfig:
    """An endpoint on the scripted server, key in a test-only variable."""
    monkeypatch.setenv(ENV, KEY)
    return EndpointConfig(base_url=server.base_url, model="test-model", api_key_env=ENV)


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.from_documents(DOCS)


class TestPrompt:
    async def test_top_k_passages_delimited_in_the_prompt(self, server, session, lane, cfg, corpus) -> None:
        """The user message holds question, claim, then the 2 best passages, each in its own evidence block."""
        server.push(server.chat("Supported\nPassage 1 says so."))
        await OpenAIChecker(cfg, session, lane, corpus=corpus, top_k=2).check(CLAIM, ANSWER)
        (body,) = server.requests
        assert body["messages"][1]["content"] == (
            "<question>\nWhat is metformin?\n</question>\n\n"
            "<claim>\nMetformin lowers glucose production.\n</claim>\n\n"
            "<evidence>\n[1] source: metformin#0-74 | title: Metformin\n"
            "Metformin lowers glucose production in the liver. It was approved in 1994.\n</evidence>\n\n"
            "<evidence>\n[2] source: insulin#0-29\nInsulin lowers blood glucose.\n</evidence>"
        )
        assert "by the passages only" in body["messages"][0]["content"]

    async def test_json_mode_sends_the_evidence_schema(self, server, session, lane, cfg, corpus) -> None:
        """With response_format json_schema the label enum is supported/contradicted/not_supported/irrelevant."""
        cfg = dataclasses.replace(cfg, response_format="json_schema")
        server.push(server.chat('{"label": "contradicted", "reason": "[1] says 1994."}'))
        verdict = await OpenAIChecker(cfg, session, lane, corpus=corpus).check(CLAIM, ANSWER)
        schema = server.requests[0]["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["label"]["enum"] == list(prompts.CHECK_EVIDENCE_LABELS)
        assert (verdict.label, verdict.reason) == (Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED)

    async def test_evidence_ids_restrict_retrieval(self, server, session, lane, cfg, corpus) -> None:
        """An answer naming its evidence documents is judged against passages of those documents only."""
        server.push(server.chat("Not supported by the evidence"))
        answer = msgspec.structs.replace(ANSWER, meta={"evidence_ids": ["insulin"]})
        verdict = await OpenAIChecker(cfg, session, lane, corpus=corpus).check(CLAIM, answer)
        assert [e.passage_id for e in verdict.evidence] == ["insulin#0-29"]
        assert (verdict.label, verdict.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)


class TestVerdict:
    async def test_keeps_passages_as_evidence(self, server, session, lane, cfg, corpus) -> None:
        """The verdict keeps each passage's id, title, text, document id and BM25 score, best first."""
        server.push(server.chat("Supported"))
        verdict = await OpenAIChecker(cfg, session, lane, corpus=corpus, top_k=2).check(CLAIM, ANSWER)
        hits = corpus.search(["metformin", "lower", "glucos", "product", "metformin"], k=2)
        assert verdict.evidence == (
            Evidence(text=DOCS[0][2], source="metformin", score=round(hits[0].score, 4), title="Metformin",
                     passage_id="metformin#0-74"),
            Evidence(text=DOCS[2][2], source="insulin", score=round(hits[1].score, 4), passage_id="insulin#0-29"),
        )
        assert verdict.label is Label.SUPPORTED and verdict.reason is None

    async def test_no_passage_no_call(self, server, session, lane, cfg, corpus) -> None:
        """A claim no passage shares a term with is unsupported (no_evidence) without a request."""
        claim = Claim(text="Zebras gallop.", index=0)
        verdict = await OpenAIChecker(cfg, session, lane, corpus=corpus).check(claim, Answer(id="x", question="Q?", response=""))
        assert (verdict.label, verdict.reason, verdict.raw) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE, NO_PASSAGE)
        assert server.requests == []

    async def test_parse_raw_gives_the_reason(self, server, session, lane, cfg, corpus) -> None:
        """A stored reply re-parsed with a corpus reads 'not supported' as no_evidence, as check does."""
        checker = OpenAIChecker(cfg, session, lane, corpus=corpus)
        verdict = checker.parse_raw("Not supported by the evidence\nNo passage names it.")
        assert (verdict.label, verdict.reason) == (Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE)

    def test_top_k_must_be_positive(self, cfg, corpus) -> None:
        """top_k 0 is a ConfigError."""
        with pytest.raises(ConfigError, match="top_k must be >= 1"):
            OpenAIChecker(cfg, None, None, corpus=corpus, top_k=0)  # type: ignore[arg-type]


class TestCacheKey:
    def test_material_names_the_passages(self, cfg, corpus) -> None:
        """The key material is the whole body (passages in it) plus the passages' digests; no frame, no recipe."""
        checker = OpenAIChecker(cfg, None, None, corpus=corpus, top_k=2)  # type: ignore[arg-type]
        material = checker.cache_request(CLAIM, ANSWER)
        hits = corpus.search(["metformin", "lower", "glucos", "product", "metformin"], k=2)
        assert material["passages"] == [h.passage.digest for h in hits]
        assert material["template"] == "check-evidence/v1"
        assert "Insulin lowers blood glucose." in orjson.dumps(material["body"]).decode()
        assert checker.cache_request_frame() is None and checker.cache_request_parts() is None

    def test_changed_corpus_changes_the_key(self, cfg, corpus) -> None:
        """Editing a document changes the key; the same corpus built again gives the same key."""
        same = Corpus.from_documents(DOCS)
        edited = Corpus.from_documents([DOCS[0], DOCS[1], ("insulin", "", "Insulin raises blood glucose.")])

        def key(c: Corpus) -> str:
            return check_key(OpenAIChecker(cfg, None, None, corpus=c), CLAIM, ANSWER)  # type: ignore[arg-type]

        assert key(same) == key(corpus)
        assert key(edited) != key(corpus)

    def test_fingerprint_names_corpus_and_top_k(self, cfg, corpus) -> None:
        """The fingerprint carries the evidence template, the corpus fingerprint and top_k."""
        fp = OpenAIChecker(cfg, None, None, corpus=corpus, top_k=3).fingerprint  # type: ignore[arg-type]
        assert "template=check-evidence/v1" in fp
        assert fp.endswith(f"|evidence={corpus.fingerprint}|analyzer=1|top_k=3")
        plain = OpenAIChecker(cfg, None, None).fingerprint  # type: ignore[arg-type]
        assert "template=check/v1" in plain and "evidence=" not in plain


class TestRetrievalOffTheLoop:
    async def test_prepare_keys_searches_in_a_worker_thread(self, cfg, corpus, monkeypatch) -> None:
        """prepare_keys runs each claim's search once, off the loop; cache_request and check then reuse it."""
        threads: list[str] = []
        search = corpus.search

        def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
            threads.append(threading.current_thread().name)
            return search(*args, **kwargs)

        monkeypatch.setattr(corpus, "search", recorded)
        checker = OpenAIChecker(cfg, None, None, corpus=corpus)  # type: ignore[arg-type]
        other = Claim(text="Aspirin was approved.", index=1)
        await checker.prepare_keys([CLAIM, other, CLAIM], ANSWER)
        checker.cache_request(CLAIM, ANSWER)
        checker.cache_request(other, ANSWER)
        assert len(threads) == 2
        assert threading.main_thread().name not in threads

    async def test_cache_lookup_prepares_keys_off_the_loop(self, cfg, corpus, monkeypatch, tmp_path) -> None:
        """A cached lookup of an answer's claims searches the corpus only in worker threads."""
        threads: list[str] = []
        search = corpus.search

        def recorded(*args, **kwargs):  # type: ignore[no-untyped-def]
            threads.append(threading.current_thread().name)
            return search(*args, **kwargs)

        monkeypatch.setattr(corpus, "search", recorded)
        store = CacheStore(tmp_path / "cache")
        try:
            wrapped = CachingChecker(OpenAIChecker(cfg, None, None, corpus=corpus), store, RunCounters())  # type: ignore[arg-type]
            lookup = await wrapped.look_up([CLAIM, Claim(text="Aspirin was approved.", index=1)], ANSWER)
        finally:
            store.close()
        assert lookup.verdicts == [None, None]
        assert len(threads) == 2 and threading.main_thread().name not in threads


class TestSettings:
    def test_missing_corpus_is_a_config_error(self, cfg, tmp_path) -> None:
        """--checker openai --evidence with a missing path is refused, no longer ignored."""
        with pytest.raises(ConfigError, match="evidence file not found"):
            AdapterSettings(checker="openai", check_endpoint=cfg, evidence=tmp_path / "missing.jsonl")

    def test_top_k_checked(self, cfg, tmp_path) -> None:
        """top_k below 1 is refused with the flag's name."""
        with pytest.raises(ConfigError, match="--top-k must be >= 1, got 0"):
            AdapterSettings(checker="openai", check_endpoint=cfg, top_k=0)


class TestStoredVerdicts:
    def test_verdict_stored_before_the_new_fields_still_decodes(self) -> None:
        """A cached verdict whose evidence has no title or passage id (msgpack, as the cache stores it) decodes."""
        old = msgspec.msgpack.encode(
            {"label": "supported", "checker": "c", "evidence": [{"text": "t", "source": "https://x", "score": 1.5}]}
        )
        verdict = msgspec.msgpack.decode(old, type=Verdict)
        assert verdict.evidence == (Evidence(text="t", source="https://x", score=1.5),)
        assert (verdict.evidence[0].title, verdict.evidence[0].passage_id, verdict.reason) == (None, None, None)
