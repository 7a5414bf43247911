"""Tests for dahl.adapters._evidence: the offline evidence Checker's support decision."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dahl.adapters._base import Checker
from dahl.adapters._corpus import Corpus, Hit
from dahl.adapters._evidence import EvidenceChecker
from dahl.cache import CacheStore, CachingChecker
from dahl.cache._keys import check_key
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, Label, UnsupportedReason
from dahl.results._counters import RunCounters

DOCS = [
    ("asp", "", "Aspirin reduces the risk of myocardial infarction."),
    ("zol", "", "The recommended starting dose of zolpidem is 5 mg at bedtime."),
    ("vit", "", "Vitamin D supplementation does not prevent fractures in older adults."),
    ("asp2", "", "Aspirin irritates the stomach lining."),
]


@pytest.fixture
def corpus() -> Corpus:
    return Corpus.from_documents(DOCS)


@pytest.fixture
def checker(corpus: Corpus) -> EvidenceChecker:
    return EvidenceChecker(corpus)


def ask(question: str, meta: dict[str, Any] | None = None) -> Answer:
    return Answer(id="a1", question=question, response="", meta=meta or {})


def claim(text: str) -> Claim:
    return Claim(text=text, index=0)


# The learned support model (support/v1, bench.train_checker) gets these hand-made cases
# wrong: it has no hard rule for numbers, opposites or negation, and tiny corpora are far
# from its training data. Kept as strict xfails so a model that fixes them is noticed.
MODEL_MISSES = "support/v1 model misses this case (see bench.offline_eval for measured quality)"


class TestEvidenceChecker:
    async def test_stated_claim_is_supported_with_its_passage(self, checker: EvidenceChecker) -> None:
        """A claim the corpus states word for word is supported, with that passage as evidence."""
        verdict = await checker.check(
            claim("Aspirin reduces the risk of myocardial infarction."), ask("What does aspirin do?")
        )
        assert verdict.label == Label.SUPPORTED
        assert verdict.evidence[0].source == "asp"
        assert verdict.evidence[0].text == "Aspirin reduces the risk of myocardial infarction."
        assert verdict.evidence[0].score is not None and verdict.evidence[0].score > 0
        assert verdict.checker == checker.fingerprint

    async def test_paraphrase_with_inflections_is_supported(self, checker: EvidenceChecker) -> None:
        """Plural and verb forms fold by stemming: 'reduced risks' matches 'reduces the risk'."""
        verdict = await checker.check(
            claim("Aspirin reduced risks of myocardial infarctions."), ask("What does aspirin do?")
        )
        assert verdict.label == Label.SUPPORTED

    @pytest.mark.xfail(strict=True, reason=MODEL_MISSES)
    async def test_negated_claim_is_unsupported(self, checker: EvidenceChecker) -> None:
        """'does not reduce' against 'reduces' is unsupported despite full word coverage."""
        verdict = await checker.check(
            claim("Aspirin does not reduce the risk of myocardial infarction."), ask("What does aspirin do?")
        )
        assert verdict.label == Label.UNSUPPORTED
        assert verdict.raw is not None and verdict.raw.startswith("negation")

    async def test_claim_dropping_evidence_negation_is_unsupported(self, checker: EvidenceChecker) -> None:
        """An affirmative claim against a negated evidence sentence is unsupported."""
        verdict = await checker.check(
            claim("Vitamin D supplementation prevents fractures in older adults."), ask("Does vitamin D help?")
        )
        assert verdict.label == Label.UNSUPPORTED

    @pytest.mark.xfail(strict=True, reason=MODEL_MISSES)
    async def test_wrong_number_is_unsupported(self, checker: EvidenceChecker) -> None:
        """'2.5 mg' where the evidence says '5 mg' is unsupported."""
        verdict = await checker.check(
            claim("The recommended starting dose of zolpidem is 2.5 mg."), ask("How much zolpidem?")
        )
        assert verdict.label == Label.UNSUPPORTED
        assert verdict.raw is not None and "2.5" in verdict.raw

    async def test_right_number_is_supported(self, checker: EvidenceChecker) -> None:
        """The same claim with '5 mg' is supported."""
        verdict = await checker.check(
            claim("The recommended starting dose of zolpidem is 5 mg."), ask("How much zolpidem?")
        )
        assert verdict.label == Label.SUPPORTED

    async def test_claim_absent_from_corpus_is_unknown(self, checker: EvidenceChecker) -> None:
        """A claim sharing no term with the corpus is unknown, with no evidence."""
        verdict = await checker.check(claim("The Eiffel Tower stands in Paris."), ask("Where is the Eiffel Tower?"))
        assert verdict.label == Label.UNKNOWN
        assert verdict.evidence == ()

    async def test_off_topic_claim_is_unknown_in_open_corpus(self, checker: EvidenceChecker) -> None:
        """New words all absent (coverage 0 < 0.2) and no passage on the question's topic (none holds
        "invented"): unknown when the whole corpus is searched."""
        verdict = await checker.check(
            claim("Aspirin was invented by a French chemist."), ask("Who invented aspirin?")
        )
        assert verdict.label == Label.UNKNOWN

    async def test_off_topic_claim_is_unsupported_against_own_evidence(self, checker: EvidenceChecker) -> None:
        """The same claim is unsupported when the answer names its evidence documents."""
        verdict = await checker.check(
            claim("Aspirin was invented by a French chemist."),
            ask("Who invented aspirin?", {"evidence_ids": ["asp", "asp2"]}),
        )
        assert verdict.label == Label.UNSUPPORTED

    async def test_evidence_ids_restrict_retrieval(self, checker: EvidenceChecker) -> None:
        """With evidence_ids naming an unrelated document, a true claim finds nothing: unknown."""
        verdict = await checker.check(
            claim("Aspirin reduces the risk of myocardial infarction."),
            ask("What does aspirin do?", {"evidence_ids": ["zol"]}),
        )
        assert verdict.label == Label.UNKNOWN

    @pytest.mark.parametrize(
        ("threshold", "label"),
        [(0.0, Label.SUPPORTED), (1.0, Label.UNSUPPORTED)],
        ids=["zero-threshold", "one-threshold"],
    )
    async def test_support_threshold_bounds_the_decision(
        self, corpus: Corpus, threshold: float, label: Label
    ) -> None:
        """P(supports) is always >= 0 and < 1: threshold 0 supports every decided claim, 1 none."""
        checker = EvidenceChecker(corpus, support_threshold=threshold)
        verdict = await checker.check(claim("Aspirin reduces the risk of stroke."), ask("What does aspirin do?"))
        assert verdict.label == label
        assert verdict.raw is not None and verdict.raw.startswith("passage asp")
        assert "P supports=" in verdict.raw and "top: " in verdict.raw

    async def test_runs_off_the_event_loop_thread(
        self, checker: EvidenceChecker, corpus: Corpus, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Retrieval runs in a worker thread, not on the event loop's thread."""
        seen: list[int] = []
        search = corpus.search

        def spy(terms: Sequence[str], **kwargs: Any) -> list[Hit]:
            seen.append(threading.get_ident())
            return search(terms, **kwargs)

        monkeypatch.setattr(corpus, "search", spy)
        await checker.check(claim("Aspirin irritates the stomach."), ask("Is aspirin safe?"))
        assert len(seen) == 1 and seen[0] != threading.get_ident()

    def test_implements_checker_protocol(self, checker: EvidenceChecker) -> None:
        """It satisfies the Checker protocol."""
        assert isinstance(checker, Checker)

    def test_fingerprint_names_corpus_and_settings(self, corpus: Corpus) -> None:
        """The fingerprint holds the corpus fingerprint and changes with a threshold."""
        a = EvidenceChecker(corpus, support_threshold=0.5)
        b = EvidenceChecker(corpus, support_threshold=0.6)
        assert a.fingerprint.startswith(f"evidence/v5:{corpus.fingerprint}:{a.model.digest}:")
        assert a.fingerprint != b.fingerprint

    def test_fingerprint_changes_with_corpus_content(self) -> None:
        """Changing one document's text changes the Checker fingerprint."""
        a = EvidenceChecker(Corpus.from_documents([("d", "", "Dose is 5 mg.")]))
        b = EvidenceChecker(Corpus.from_documents([("d", "", "Dose is 6 mg.")]))
        assert a.fingerprint != b.fingerprint

    @pytest.mark.parametrize(
        "kwargs",
        [{"top_k": 0}, {"n_evidence": 6}, {"support_threshold": 1.5}, {"unknown_below": -0.1},
         {"min_score": -1.0}, {"max_threads": 0}],
        ids=["top_k", "n_evidence", "threshold", "unknown-below", "min_score", "threads"],
    )
    def test_bad_settings_are_config_errors(self, corpus: Corpus, kwargs: dict[str, Any]) -> None:
        """Out-of-range settings raise ConfigError."""
        with pytest.raises(ConfigError):
            EvidenceChecker(corpus, **kwargs)


class TestOnTopicSearch:
    """Rule 4: an unrestricted search gives unknown only when no kept passage is on the question's topic."""

    async def test_claim_with_new_words_against_on_topic_passage_is_unsupported(self, checker: EvidenceChecker) -> None:
        """The question's terms (vitamin, fractures) are in a passage that never names hip surgery:
        the corpus speaks, so no unknown."""
        answer = ask("Does vitamin D prevent fractures?")
        a = checker.assess(claim("Vitamin D speeds recovery after hip surgery."), answer)
        assert a.label == Label.UNSUPPORTED
        assert "off-topic" not in a.reason

    @pytest.mark.parametrize(
        "question",
        ["Does vitamin D prevent fractures? Please answer briefly.", "Can you tell me: does vitamin D prevent fractures?"],
        ids=["please-answer-briefly", "tell-me"],
    )
    async def test_words_that_ask_do_not_change_the_topic(self, checker: EvidenceChecker, question: str) -> None:
        """'please', 'answer', 'tell' are absent from the corpus (largest idf) but name no topic."""
        a = checker.assess(claim("Vitamin D speeds recovery after hip surgery."), ask(question))
        assert a.label == Label.UNSUPPORTED

    async def test_without_the_exemption_the_same_claim_is_unknown(self, corpus: Corpus) -> None:
        """on_topic=None restores the claim-only test: the claim's new words are absent, so unknown."""
        answer = ask("Does vitamin D prevent fractures?")
        a = EvidenceChecker(corpus, on_topic=None).assess(claim("Vitamin D speeds recovery after hip surgery."), answer)
        assert a.label == Label.UNKNOWN
        assert a.reason.startswith("off-topic")

    def test_on_topic_is_in_the_fingerprint_and_checked(self, corpus: Corpus) -> None:
        """The share is a setting: in the fingerprint, in [0, 1]."""
        assert EvidenceChecker(corpus).fingerprint.endswith(",o=0.5")
        assert ",o=" not in EvidenceChecker(corpus, on_topic=None).fingerprint
        with pytest.raises(ConfigError):
            EvidenceChecker(corpus, on_topic=1.5)


# Measured: 97 wins of 200 with evidence/v4 and v5 (support/v1 model, threshold 0.35) and
# sentence-level regex claims; the evidence/v3 rule had 85, evidence/v2 79, evidence/v1 86.
PINNED_ACCURACY = 0.485


class TestMedHalluPairwise:
    def test_first_200_rows_accuracy_pinned(self, shared_data: Path) -> None:
        """Default evidence Checker, regex claims, MedHallu rows 0-199: pairwise accuracy as measured."""
        if not (shared_data / "medhallu" / "medhallu_pqa_labeled.jsonl").exists():
            pytest.skip("medhallu data absent")
        from bench.offline_eval import claims_of, evidence_pairwise, medhallu_answers, regex_claims

        answers, corpus = medhallu_answers(shared_data, rows=200)
        score = evidence_pairwise(EvidenceChecker(corpus), answers, claims_of(answers, regex_claims))
        assert score.n == 200
        assert score.accuracy == pytest.approx(PINNED_ACCURACY, abs=0.01)



EXAMPLE_DOCS = [
    ("hp", "Helicobacter pylori", "Helicobacter pylori is a Gram-negative, spiral-shaped bacterium."),
    ("met", "Metformin", "Metformin is first-line therapy for type 2 diabetes. It lowers hepatic glucose production."),
    ("ins", "Insulin", "Insulin is produced by beta cells. Type 1 diabetes results from destruction of beta cells."),
    ("war", "Warfarin", "Warfarin is teratogenic and is avoided during pregnancy."),
]


class TestOnePassageMustHoldTheClaim:
    @pytest.fixture
    def example(self) -> EvidenceChecker:
        return EvidenceChecker(Corpus.from_documents(EXAMPLE_DOCS))

    @pytest.mark.parametrize(
        ("question", "text", "expected"),
        [
            pytest.param("What is H. pylori?", "Helicobacter pylori is a Gram-negative bacterium.",
                         Label.SUPPORTED, id="stated"),
            pytest.param("What is H. pylori?", "Helicobacter pylori is a Gram-positive bacterium.",
                         Label.UNSUPPORTED, id="opposite-word"),
            pytest.param("What is metformin used for?", "Metformin is the first-line drug for type 1 diabetes.",
                         Label.UNSUPPORTED, id="number-only-in-another-passage"),
            # The insulin passage holds every new word but is not about metformin; the
            # metformin passage holds none of them: the corpus does not speak to it.
            pytest.param("How does metformin work?", "Metformin stimulates insulin secretion from beta cells.",
                         Label.UNKNOWN, id="terms-from-a-passage-about-something-else", marks=pytest.mark.xfail(strict=True, reason=MODEL_MISSES)),
            pytest.param("How is warfarin used?", "Warfarin is safe during pregnancy.",
                         Label.UNSUPPORTED, id="safe-vs-teratogenic"),
        ],
    )
    async def test_decision(self, example: EvidenceChecker, question: str, text: str, expected: Label) -> None:
        """Support needs one passage about the claim; opposites and numbers found elsewhere do not count."""
        verdict = await example.check(claim(text), ask(question))
        assert verdict.label == expected, verdict.raw


class TestWhatTheClaimAdds:
    async def test_restating_the_question_is_irrelevant(self, checker: EvidenceChecker) -> None:
        """A claim whose content terms all occur in the question cannot be checked by word overlap."""
        verdict = await checker.check(
            claim("Aspirin reduces myocardial infarction."),
            ask("Does aspirin reduce myocardial infarction?"),
        )
        assert verdict.label == Label.IRRELEVANT
        assert verdict.raw == "claim adds no term to the question"

    async def test_hedge_only_claim_is_irrelevant(self, checker: EvidenceChecker) -> None:
        """'Our results suggest' has no content term once hedges and reporting words are set aside."""
        verdict = await checker.check(claim("Our results suggest"), ask("What does aspirin do?"))
        assert verdict.label == Label.IRRELEVANT
        assert verdict.raw == "claim has no content word"

    @pytest.mark.xfail(strict=True, reason=MODEL_MISSES)
    async def test_span_limits_judged_words_to_the_added_phrase(self, corpus: Corpus) -> None:
        """With a span on 'in smokers' only 'smokers' is judged (absent: unsupported); without, 0.676 coverage."""
        checker = EvidenceChecker(corpus)  # support_threshold 0.3
        response = "Aspirin reduces the risk of myocardial infarction in smokers."
        answer = Answer(
            id="a1", question="What does aspirin do?", response=response, meta={"evidence_ids": ["asp"]}
        )
        text = response
        start = response.index("in smokers")
        own = Claim(text=text, index=1, span=(start, start + len("in smokers")))
        whole = Claim(text=text, index=1)
        judged_own = checker.assess(own, answer)
        judged_whole = checker.assess(whole, answer)
        assert judged_own.label == Label.UNSUPPORTED and judged_own.coverage == 0.0
        # idf over 4 passages: 'smoker' absent ln(1 + 4.5/0.5) = 2.3026; each of reduc, risk,
        # myocardi, infarct in one passage ln(1 + 3.5/1.5) = 1.2040 -> 4.8159 / 7.1185 = 0.6765.
        assert judged_whole.label == Label.SUPPORTED
        assert judged_whole.coverage == pytest.approx(0.6765, abs=1e-4)

    @pytest.mark.xfail(strict=True, reason=MODEL_MISSES)
    async def test_opposite_in_the_head_decides_a_phrase_claim(self) -> None:
        """'Warfarin is safe during pregnancy' judged on 'during pregnancy' is still unsupported: 'safe' vs 'teratogenic'."""
        checker = EvidenceChecker(Corpus.from_documents(EXAMPLE_DOCS))
        response = "Warfarin is safe during pregnancy."
        answer = Answer(id="a1", question="How is warfarin used?", response=response)
        start = response.index("during pregnancy")
        phrase = Claim(text=response, index=1, span=(start, start + len("during pregnancy")))
        head = Claim(text="Warfarin is safe", index=0, span=(0, len("Warfarin is safe")))
        judged = checker.assess(phrase, answer)
        assert judged.label == Label.UNSUPPORTED and "opposite of ['safe']" in judged.reason
        # The head alone shares no judged word with the passage (coverage 0 < 0.2) but the
        # passage about warfarin holds the opposite: unsupported, not unknown.
        assert checker.assess(head, answer).label == Label.UNSUPPORTED

    def test_cache_request_holds_the_added_words(self, checker: EvidenceChecker) -> None:
        """Two claims with one text but different spans have different cache material."""
        response = "Aspirin reduces the risk of myocardial infarction in smokers."
        answer = Answer(id="a1", question="q?", response=response)
        a = Claim(text=response, index=0, span=(0, 15))
        b = Claim(text=response, index=0, span=(50, 60))
        assert checker.cache_request(a, answer) == {"doc_ids": None, "own": "Aspirin reduces"}
        assert checker.cache_request(b, answer) == {"doc_ids": None, "own": "in smokers"}


class TestNegationAgainstAssertions:
    async def test_aim_sentence_is_not_the_negation_reference(self) -> None:
        """'To determine whether ... not ...' is skipped: the finding sentence decides (supported)."""
        checker = EvidenceChecker(
            Corpus.from_documents(
                [("d", "", "To determine whether aspirin does not reduce pain in adults. Aspirin reduces pain in adults.")]
            )
        )
        verdict = await checker.check(claim("Aspirin reduces pain in adults."), ask("What does aspirin do?"))
        assert verdict.label == Label.SUPPORTED, verdict.raw

    @pytest.mark.xfail(strict=True, reason=MODEL_MISSES)
    async def test_assertive_negated_sentence_still_counts(self) -> None:
        """A negation in a finding sentence still makes the affirmative claim unsupported."""
        checker = EvidenceChecker(
            Corpus.from_documents([("d", "", "The aim was to study pain. Aspirin does not reduce pain in adults.")])
        )
        verdict = await checker.check(claim("Aspirin reduces pain in adults."), ask("What does aspirin do?"))
        assert verdict.label == Label.UNSUPPORTED
        assert verdict.raw is not None and verdict.raw.startswith("negation")


QUICKSTART = [
    ("metformin", "Metformin", "Metformin is a biguanide used as first-line drug therapy for type 2 diabetes. It lowers "
     "hepatic glucose production and improves insulin sensitivity. Metformin rarely causes hypoglycemia when used alone."),
    ("hpylori", "Helicobacter pylori", "Helicobacter pylori is a Gram-negative, spiral-shaped bacterium that colonizes "
     "the stomach. It produces urease, which neutralizes gastric acid around the organism."),
]


class TestStatedClaims:
    """A claim one sentence states is supported unless a number, opposite or negation differs."""

    @pytest.fixture
    def quick(self) -> EvidenceChecker:
        return EvidenceChecker(Corpus.from_documents(QUICKSTART))

    @pytest.mark.parametrize(
        ("question", "text"),
        [("What is metformin?", "Metformin is a biguanide"),
         ("What is metformin?", "It rarely causes hypoglycemia"),
         ("What is H. pylori?", "It produces urease")],
    )
    def test_verbatim_claim_is_supported(self, quick: EvidenceChecker, question: str, text: str) -> None:
        """The README Quickstart's true claims, stated word for word in one sentence, are supported."""
        a = quick.assess(claim(text), Answer(id="a", question=question, response=text))
        assert a.label == Label.SUPPORTED and a.stated, a.reason
        assert " states it: 100% of its content words in one sentence" in a.reason

    def test_model_alone_rejects_one_of_them(self, quick: EvidenceChecker) -> None:
        """Without the rule (stated_share=None) support/v1 rejects 'It produces urease' (P supports 0.27)."""
        off = EvidenceChecker(quick.corpus, stated_share=None)
        answer = Answer(id="a", question="What is H. pylori?", response="It produces urease")
        a = off.assess(claim("It produces urease"), answer)
        assert a.label == Label.UNSUPPORTED and not a.stated
        assert a.probabilities is not None and round(float(a.probabilities[0]), 2) == 0.27

    @pytest.mark.parametrize(
        ("question", "text", "reason"),
        [("What is metformin?", "Metformin is the first-line drug for type 1 diabetes.", "lacks a number of the claim"),
         ("What is H. pylori?", "Helicobacter pylori is a Gram-positive bacterium.", "says the opposite of a claim word")],
    )
    def test_a_veto_still_applies(self, quick: EvidenceChecker, question: str, text: str, reason: str) -> None:
        """Full overlap with a different number or an opposite word stays unsupported."""
        a = quick.assess(claim(text), Answer(id="a", question=question, response=text))
        assert a.label == Label.UNSUPPORTED and not a.stated
        assert reason in a.reason

    def test_stated_share_is_in_the_fingerprint(self, corpus: Corpus) -> None:
        """The rule's setting changes the fingerprint; None leaves support/v1's own tag."""
        assert ",t=0.9," in EvidenceChecker(corpus).fingerprint
        assert ",t=" not in EvidenceChecker(corpus, stated_share=None).fingerprint
        with pytest.raises(ConfigError):
            EvidenceChecker(corpus, stated_share=1.5)


class TestUnsupportedReason:
    """An unsupported verdict says whether its passage contradicts the claim or does not state it."""

    @pytest.mark.parametrize(
        ("question", "text", "meta", "label", "reason", "says"),
        [("Does vitamin D help?", "Vitamin D supplementation prevents fractures in older adults.", None,
          Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED, " contradicts it "),
         ("Who invented aspirin?", "Aspirin was invented by a French chemist.", {"evidence_ids": ["asp", "asp2"]},
          Label.UNSUPPORTED, UnsupportedReason.NO_EVIDENCE, " does not state it "),
         ("How much zolpidem?", "The recommended starting dose of zolpidem is 10 mg at bedtime.", None,
          Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED, " lacks a number of the claim and its closest"),
         ("What does aspirin do?", "Aspirin reduces the risk of myocardial infarction.", None,
          Label.SUPPORTED, None, " states it: "),
         ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris.", None, Label.UNKNOWN, None, "no passage")],
        ids=["model-refutes", "model-neutral", "other-number", "supported", "unknown"],
    )
    def test_reason_follows_the_decision(self, checker: EvidenceChecker, question: str, text: str,
                                         meta: dict[str, Any] | None, label: Label,
                                         reason: UnsupportedReason | None, says: str) -> None:
        """The model's refutes / neutral, and a veto, give the reason the raw text states; other labels none."""
        verdict = checker.check_sync(claim(text), ask(question, meta))
        assert (verdict.label, verdict.reason) == (label, reason)
        assert verdict.raw is not None and says in verdict.raw

    @pytest.mark.parametrize(
        ("question", "text", "reason"),
        [("What is metformin?", "It is used for type 2 diabetes at 500 mg.", UnsupportedReason.NO_EVIDENCE),
         ("What is H. pylori?", "Helicobacter pylori is a Gram-positive bacterium.", UnsupportedReason.CONTRADICTED)],
        ids=["number-not-given", "opposite-word"],
    )
    def test_veto_reason(self, question: str, text: str, reason: UnsupportedReason) -> None:
        """A number the passage does not give at all is not stated; an opposite word contradicts."""
        quick = EvidenceChecker(Corpus.from_documents(QUICKSTART))
        verdict = quick.check_sync(claim(text), Answer(id="a", question=question, response=text))
        assert (verdict.label, verdict.reason) == (Label.UNSUPPORTED, reason), verdict.raw

    async def test_a_verdict_stored_without_reason_is_checked_again(self, checker: EvidenceChecker,
                                                                   tmp_path: Path) -> None:
        """An entry the previous parser version stored (no reason) is not served: the claim is checked again."""
        c, a = claim("Vitamin D supplementation prevents fractures in older adults."), ask("Does vitamin D help?")
        old = msgspec.structs.replace(checker.check_sync(c, a), reason=None)
        with CacheStore(tmp_path / "cache") as store:
            store.put(check_key(checker, c, a), old, old.raw, parser_version="1")
            counters = RunCounters()
            verdict = await CachingChecker(checker, store, counters).check(c, a)
        assert (verdict.label, verdict.reason) == (Label.UNSUPPORTED, UnsupportedReason.CONTRADICTED)
        assert (counters.claims_checked, counters.claims_cached) == (1, 0)
        assert verdict.evidence == old.evidence
