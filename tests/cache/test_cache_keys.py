"""Tests for dahl.cache._keys: canonical, complete, versioned cache keys."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import msgspec
import pytest

from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.config import EndpointConfig
from dahl.records import Answer, Claim, GivenClaim, Label

ANSWER = Answer(id="a1", question="Who was Ada Lovelace?", response="Ada Lovelace was a mathematician.")
CLAIM = Claim(text="Ada Lovelace was a mathematician.", index=0)
ENV = "DAHL_TEST_CACHE_KEY"


class StubChecker:
    """Offline checker without a cache_request hook."""

    fingerprint = "stub/v1"
    cacheable = True
    parser_version = "1"

    async def check(self, claim: Claim, answer: Answer) -> Any:  # pragma: no cover - never called
        raise AssertionError


class StubSplitter:
    """Offline splitter without a cache_request hook."""

    fingerprint = "stubsplit/v1"
    cacheable = True
    parser_version = "1"

    async def split(self, answer: Answer) -> list[Claim]:  # pragma: no cover - never called
        raise AssertionError


def _cfg(**changes: Any) -> EndpointConfig:
    base = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m1", api_key_env=ENV)
    return dataclasses.replace(base, **changes)


def _checker(cfg: EndpointConfig) -> OpenAIChecker:
    # No request is sent: the session is never touched by cache_request.
    return OpenAIChecker(cfg, None, None)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "sk-first-key")


class TestCheckKeyOpenAI:
    def test_shape(self) -> None:
        """A key is 32 lowercase hex digits (blake2b-128)."""
        key = check_key(_checker(_cfg()), CLAIM, ANSWER)
        assert len(key) == 32
        assert int(key, 16) >= 0 and key == key.lower()

    @pytest.mark.parametrize(
        "changes",
        [
            {"model": "m2"},
            {"temperature": 0.7},
            {"seed": 7},
            {"max_tokens": 64},
            {"response_format": "json_object"},
            {"extra_body": {"search_context_size": "low"}},
            {"base_url": "http://127.0.0.2:9/v1"},
        ],
        ids=["model", "temperature", "seed", "max_tokens", "response_format", "extra_body", "base_url"],
    )
    def test_output_settings_change_key(self, changes: dict[str, Any]) -> None:
        """Every request setting that can change the reply changes the key."""
        assert check_key(_checker(_cfg(**changes)), CLAIM, ANSWER) != check_key(
            _checker(_cfg()), CLAIM, ANSWER
        )

    @pytest.mark.parametrize(
        "changes",
        [{"timeout_s": 5.0}, {"max_in_flight": 3}, {"rpm": 60.0}, {"tpm": 10_000.0}],
        ids=["timeout_s", "max_in_flight", "rpm", "tpm"],
    )
    def test_operational_settings_keep_key(self, changes: dict[str, Any]) -> None:
        """Timeouts, concurrency and rate limits never change the key."""
        assert check_key(_checker(_cfg(**changes)), CLAIM, ANSWER) == check_key(
            _checker(_cfg()), CLAIM, ANSWER
        )

    def test_api_key_not_in_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """A different API key (same endpoint) gives the same cache key."""
        first = check_key(_checker(_cfg()), CLAIM, ANSWER)
        monkeypatch.setenv(ENV, "sk-second-key")
        assert check_key(_checker(_cfg()), CLAIM, ANSWER) == first

    def test_template_version_changes_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Bumping the check template version changes the key."""
        from dahl.adapters import _prompts as prompts

        first = check_key(_checker(_cfg()), CLAIM, ANSWER)
        monkeypatch.setattr(prompts, "CHECK_TEMPLATE", dataclasses.replace(prompts.CHECK_TEMPLATE, version="check/v2"))
        assert check_key(_checker(_cfg()), CLAIM, ANSWER) != first

    def test_claim_and_question_change_key(self) -> None:
        """Another claim text or another question gives another key."""
        checker = _checker(_cfg())
        base = check_key(checker, CLAIM, ANSWER)
        other_claim = Claim(text="Ada Lovelace was a poet.", index=0)
        other_question = Answer(id="a1", question="Who was Lord Byron?", response=ANSWER.response)
        assert check_key(checker, other_claim, ANSWER) != base
        assert check_key(checker, CLAIM, other_question) != base

    def test_whitespace_and_nfc_variants_share_key(self) -> None:
        """Whitespace runs and NFD vs NFC spellings of claim and question give one key."""
        checker = _checker(_cfg())
        nfc = Claim(text="Ada Lovelace was born in Caf\u00e9 street.", index=0)
        nfd = Claim(text="  Ada  Lovelace was born\nin Cafe\u0301 street. ", index=3)
        spaced = Answer(id="other", question=" Who  was\tAda Lovelace? ", response="different")
        assert check_key(checker, nfc, ANSWER) == check_key(checker, nfd, spaced)

    def test_body_sent_matches_key_material(self) -> None:
        """cache_request carries the templated user message with the claim text as sent."""
        material = _checker(_cfg()).cache_request(CLAIM, ANSWER)
        user = material["content"]
        assert "Ada Lovelace was a mathematician." in user and "Who was Ada Lovelace?" in user
        assert len(material["frame"]) == 32
        assert material["model"] == "m1" and material["base_url"] == "http://127.0.0.1:9/v1"
        assert "sk-first-key" not in repr(material)


class TestCheckKeyOffline:
    def test_golden(self) -> None:
        """The key of a fixed input is pinned, so a change of canonical encoding is caught."""
        assert check_key(StubChecker(), CLAIM, ANSWER) == "93637acd63386ddd908530bae280b7be"

    def test_canonical_bytes(self) -> None:
        """A key is blake2b-128 of the deterministic msgpack array of the key struct."""
        material = KeyMaterial(
            version=KEY_VERSION,
            stage="check",
            fingerprint="stub/v1",
            request=None,
            question="Who was Ada Lovelace?",
            text="Ada Lovelace was a mathematician.",
        )
        expected = hashlib.blake2b(
            msgspec.msgpack.encode(
                [2, "check", "stub/v1", None, "Who was Ada Lovelace?", "Ada Lovelace was a mathematician.", None, None]
            ),
            digest_size=16,
        ).hexdigest()
        assert key_of(material) == expected == check_key(StubChecker(), CLAIM, ANSWER)

    def test_dict_order_irrelevant(self) -> None:
        """Request material with the same items in another insertion order gives the same key."""
        a = KeyMaterial(1, "check", "f", {"a": 1, "b": {"x": 1, "y": 2}}, "q", "t")
        b = KeyMaterial(1, "check", "f", {"b": {"y": 2, "x": 1}, "a": 1}, "q", "t")
        assert key_of(a) == key_of(b)

    def test_fingerprint_changes_key(self) -> None:
        """An offline checker with another fingerprint (e.g. another corpus hash) gets another key."""
        other = StubChecker()
        other.fingerprint = "stub/v1:corpus=deadbeef"
        assert check_key(other, CLAIM, ANSWER) != check_key(StubChecker(), CLAIM, ANSWER)

    def test_given_label_changes_key(self) -> None:
        """Same text with another given label (replay) never shares a key."""
        a = Claim(text=CLAIM.text, index=0, given_label=Label.SUPPORTED)
        b = Claim(text=CLAIM.text, index=0, given_label=Label.UNSUPPORTED)
        assert check_key(StubChecker(), a, ANSWER) != check_key(StubChecker(), b, ANSWER)

    def test_stage_separates_split_and_check(self) -> None:
        """A split key never equals a check key over the same text and fingerprint."""
        splitter = StubSplitter()
        splitter.fingerprint = "stub/v1"
        answer = Answer(id="a", question=ANSWER.question, response=CLAIM.text)
        assert split_key(splitter, answer) != check_key(StubChecker(), CLAIM, answer)


class TestSplitKey:
    def test_response_whitespace_matters(self) -> None:
        """Split keys hash the response verbatim: claim spans index it."""
        a = Answer(id="a", question="Q?", response="One. Two.")
        b = Answer(id="a", question="Q?", response="One.  Two.")
        assert split_key(StubSplitter(), a) != split_key(StubSplitter(), b)

    def test_id_and_model_do_not_matter(self) -> None:
        """Two answers with the same question and response share a split key."""
        a = Answer(id="a", question="Q?", response="One. Two.", model="x")
        b = Answer(id="b", question=" Q? ", response="One. Two.", model="y")
        assert split_key(StubSplitter(), a) == split_key(StubSplitter(), b)

    def test_given_claims_change_key(self) -> None:
        """Different given claims (given Splitter) give different keys."""
        a = Answer(id="a", question="Q?", response="R", claims=(GivenClaim(text="A"),))
        b = Answer(id="a", question="Q?", response="R", claims=(GivenClaim(text="B"),))
        assert split_key(StubSplitter(), a) != split_key(StubSplitter(), b)

    def test_openai_settings_change_key(self) -> None:
        """The OpenAI splitter's key follows its request body (model, max_tokens)."""
        def splitter(**changes: Any) -> OpenAISplitter:
            return OpenAISplitter(_cfg(**changes), None, None)  # type: ignore[arg-type]

        base = split_key(splitter(), ANSWER)
        assert split_key(splitter(model="m2"), ANSWER) != base
        assert split_key(splitter(max_tokens=99), ANSWER) != base
        assert split_key(splitter(timeout_s=1.0), ANSWER) == base


class TestEvidenceCheckerKey:
    def test_evidence_ids_and_corpus_in_key(self) -> None:
        """The evidence Checker's key follows meta evidence_ids and the corpus content."""
        from dahl.adapters._corpus import Corpus
        from dahl.adapters._evidence import EvidenceChecker

        docs = [("asp", "", "Aspirin reduces the risk of myocardial infarction.")]
        checker = EvidenceChecker(Corpus.from_documents(docs))
        claim = Claim(text="Aspirin reduces infarction risk.", index=0)

        def ask(meta: dict[str, Any]) -> Answer:
            return Answer(id="a", question="Does aspirin help?", response="", meta=meta)

        base = check_key(checker, claim, ask({}))
        assert check_key(checker, claim, ask({"evidence_ids": ["asp"]})) != base
        assert check_key(checker, claim, ask({"other": 1})) == base
        other_corpus = EvidenceChecker(Corpus.from_documents(docs + [("x", "", "Other text.")]))
        assert check_key(other_corpus, claim, ask({})) != base


class TestHookWithoutText:
    def test_claims_differ_when_the_hook_returns_only_settings(self) -> None:
        """A cache_request hook that returns only settings (document ids) still keys on the claim text."""
        from dahl.records import Answer, Claim, Verdict

        class OnlySettings:
            fingerprint = "only-settings/v1"
            cache_request_covers_input = False

            def cache_request(self, claim: Claim, answer: Answer) -> dict[str, list[str]]:
                return {"doc_ids": ["d1"]}

            async def check(self, claim: Claim, answer: Answer) -> Verdict:
                raise NotImplementedError

        answer = Answer(id="a", question="Q?", response="A. B.")
        checker = OnlySettings()
        first = check_key(checker, Claim(text="A.", index=0), answer)  # type: ignore[arg-type]
        second = check_key(checker, Claim(text="B.", index=1), answer)  # type: ignore[arg-type]
        assert first != second


class TestCheckKeys:
    def test_equal_to_one_by_one(self) -> None:
        """check_keys gives check_key of every claim, in order, for hook and hook-less Checkers."""
        claims = [CLAIM, Claim(text="Ada  Lovelace was born in 1815.", index=1)]
        for checker in (StubChecker(), _checker(_cfg())):
            assert check_keys(checker, claims, ANSWER) == [check_key(checker, c, ANSWER) for c in claims]

    def test_alternating_checkers_keep_their_own_frames(self) -> None:
        """Two Checkers used in turn (the frame memo switches) each get exactly their one-by-one keys."""
        claims = [CLAIM, Claim(text="Ada Lovelace was born in 1815.", index=1)]
        first, second = _checker(_cfg()), _checker(_cfg(model="other-model"))
        expected = {id(c): [check_key(c, claim, ANSWER) for claim in claims] for c in (first, second)}
        assert expected[id(first)] != expected[id(second)]
        for checker in (first, second, first, second):
            assert check_keys(checker, claims, ANSWER) == expected[id(checker)]

    def test_contents_hook_equals_content_per_claim(self) -> None:
        """The OpenAI Checker's batch contents equal its per-claim content, in order."""
        checker = _checker(_cfg())
        claims = [CLAIM, Claim(text="Ada <claim> Lovelace.", index=1)]
        assert checker.cache_request_contents(claims, ANSWER) == [
            checker.cache_request_content(c, ANSWER) for c in claims
        ]
