"""Tests for dahl.preprocess: DAHL step 0 (echo, duplicate, truncated tail, abstention)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dahl.preprocess import Removal, is_noncommittal, may_abstain, preprocess

# DAHL paper (Seo et al. 2024), Table 1, verbatim.
TABLE1_PROMPT = (
    "What is the incidence rate of cystic lymphangioma (CL) in live births, and where are the "
    "most common locations for CL to occur?"
)
TABLE1_S1 = (
    "The authors retrospectively reviewed the records of all live births at a single hospital "
    "between 1985 and 2014."
)
TABLE1_S2 = (
    "They identified 215,077 live births, and of these, 136,106 had complete records of antenatal "
    "ultrasound findings."
)
TABLE1_S3 = (
    "Of these 136,106 births, 134,594 (98.9%) had complete records of the neonatal period."
)
TABLE1_TAIL = "The authors defined CL as a non-cystic mass of at"
TABLE1_BEFORE = " ".join(
    [TABLE1_PROMPT, TABLE1_S1, TABLE1_S2, TABLE1_S3, TABLE1_S3, TABLE1_TAIL]
)
TABLE1_AFTER = (
    "The authors retrospectively reviewed the records of all live births at a single hospital "
    "between 1985 and 2014. They identified 215,077 live births, and of these, 136,106 had "
    "complete records of antenatal ultrasound findings. Of these 136,106 births, 134,594 (98.9%) "
    "had complete records of the neonatal period."
)


class TestTable1:
    def test_after_text(self) -> None:
        """The paper's Table 1 'before' text becomes exactly its 'after' text."""
        assert preprocess(TABLE1_PROMPT, TABLE1_BEFORE).text == TABLE1_AFTER

    def test_removals(self) -> None:
        """Echo, duplicate and truncated tail are reported with their spans in the input."""
        result = preprocess(TABLE1_PROMPT, TABLE1_BEFORE)
        dup_start = len(TABLE1_PROMPT) + 1 + len(TABLE1_S1) + 1 + len(TABLE1_S2) + 1
        dup_start += len(TABLE1_S3) + 1
        tail_start = len(TABLE1_BEFORE) - len(TABLE1_TAIL)
        assert result.removed == (
            Removal(kind="echo", text=TABLE1_PROMPT, span=(0, 127)),
            Removal(kind="duplicate", text=TABLE1_S3, span=(dup_start, dup_start + 85)),
            Removal(kind="truncated", text=TABLE1_TAIL, span=(tail_start, 575)),
        )
        assert result.abstained is False


class TestEcho:
    @pytest.mark.parametrize(
        ("response", "expected"),
        [
            ("What is X? X is a gene.", "X is a gene."),
            ("what  is\nx?  X is a gene.", "X is a gene."),
            ("Question: What is X? X is a gene.", "X is a gene."),
            ("Q: What is X?\nAnswer: X is a gene.", "X is a gene."),
            ("What is X\nX is a gene.", "X is a gene."),
        ],
        ids=["exact", "case-and-whitespace", "question-label", "q-and-answer-labels", "no-mark"],
    )
    def test_removed(self, response: str, expected: str) -> None:
        """The question echoed at the start is removed, with labels and case ignored."""
        result = preprocess("What is X?", response)
        assert result.text == expected
        assert [r.kind for r in result.removed] == ["echo"]

    def test_first_sentence_equal_up_to_punctuation(self) -> None:
        """A first sentence equal to the question up to punctuation and case is removed."""
        result = preprocess("Tell me a bio of Ada Lovelace.", "Tell me a bio of Ada-Lovelace! She was a mathematician.")
        assert result.text == "She was a mathematician."

    @pytest.mark.parametrize(
        ("question", "response"),
        [
            ("What is X?", "X is a gene. What is X? It is small."),
            ("What is X", "What is Xylene used for? It is a solvent."),
            ("", "Anything here."),
        ],
        ids=["not-at-start", "word-prefix-only", "empty-question"],
    )
    def test_kept(self, question: str, response: str) -> None:
        """The question is not removed when it is not the opening of the response."""
        assert preprocess(question, response).text == response


class TestDuplicate:
    def test_case_and_punctuation_insensitive(self) -> None:
        """A later sentence with the same words is removed and the first copy kept."""
        result = preprocess("", "Insulin lowers glucose. Zinc is a metal. INSULIN lowers  glucose!")
        assert result.text == "Insulin lowers glucose. Zinc is a metal."
        assert result.removed == (
            Removal(kind="duplicate", text="INSULIN lowers  glucose!", span=(41, 65)),
        )

    def test_numbers_differ(self) -> None:
        """Sentences differing only in a number are both kept."""
        text = "The dose is 25 mg. The dose is 2.5 mg."
        assert preprocess("", text).text == text

    def test_list_layout_kept(self) -> None:
        """Line breaks between kept sentences survive; duplicates inside a list go."""
        text = "Causes:\n- Smoking\n- Obesity\n- Smoking"
        assert preprocess("", text).text == "Causes:\n- Smoking\n- Obesity"


class TestTruncated:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Aspirin thins blood. It is cheap and", "Aspirin thins blood."),
            ("Aspirin thins blood. It was seen in 1985 and 2014", "Aspirin thins blood."),
            ("Aspirin thins blood. Causes include:", "Aspirin thins blood."),
            ("Causes:\n- Smoking\n- Obesity, and", "Causes:\n- Smoking"),
            ("Causes:\n- Smoking\n- Obesity of the", "Causes:\n- Smoking"),
        ],
        ids=["dangling-and", "no-period", "ends-with-colon", "item-dangling-comma", "item-function-word"],
    )
    def test_dropped(self, text: str, expected: str) -> None:
        """A last sentence cut off by the token limit is removed."""
        result = preprocess("", text)
        assert result.text == expected
        assert result.removed[-1].kind == "truncated"

    @pytest.mark.parametrize(
        "text",
        [
            "Aspirin thins blood without a period",
            "Aspirin thins blood. It is cheap.",
            "Aspirin thins blood. It is cheap (see below)",
            'Aspirin thins blood. He said "yes"',
            "Aspirin thins blood. It is cheap…",
            "Causes:\n- Smoking\n- Obesity",
            "Aspirin thins blood. See [1]",
        ],
        ids=["single-sentence", "period", "paren", "quote", "ellipsis", "list-item", "citation"],
    )
    def test_kept(self, text: str) -> None:
        """Complete endings, list items and single-sentence answers are not truncated."""
        result = preprocess("", text)
        assert result.text == text
        assert result.removed == ()


class TestAbstained:
    @pytest.mark.parametrize(
        "text",
        [
            "I don't know.",
            "I do not know the answer to this question.",
            "It cannot be answered.",
            "I'm not sure.",
            "I cannot answer that.",
            "There is not enough information to answer this question.",
            "As an AI language model, I cannot provide medical advice. Please consult a doctor.",
            "I'm unable to provide an answer.",
            "No answer",
            "I'm sorry, but I couldn't find any notable person named Zelma Wilson. "
            "Could you please provide more information about this person?",
            "I'm sorry, but without additional information, I cannot provide a bio of D. Luke. "
            "There are many people with that name. Could you give more context?",
            "",
        ],
        ids=[
            "dont-know", "do-not-know", "cannot-be-answered", "not-sure", "cannot-answer",
            "not-enough-information", "as-an-ai", "unable-to-provide", "no-answer",
            "sorry-could-not-find", "sorry-without-information", "blank",
        ],
    )
    def test_abstained(self, text: str) -> None:
        """Noncommittal statements (with questions back to the user) make an abstention, which the
        cheap pre-test lets through."""
        assert preprocess("Who is Zelma Wilson?", text).abstained is True
        assert may_abstain(text) is True

    def test_pre_test_passes_content_over(self) -> None:
        """Plain content is surely not abstained; a noncommittal opening at a word start may be."""
        assert may_abstain("Angina is chest pain. Nausea is unknown to none.") is True
        assert may_abstain("Angina is chest pain. It causes nausea in China.") is False
        assert may_abstain("Sorry,I don't know.") is True

    def test_pre_test_first_letters_cover_every_opening(self) -> None:
        """The pre-test's first-letter lookahead skips no opening: each pattern matches nothing
        that starts with a letter outside the set (tried on every letter, digit and mark)."""
        import re
        import string

        from dahl.preprocess import _FIRST_LETTERS, NONCOMMITTAL_PATTERNS

        for pattern in NONCOMMITTAL_PATTERNS:
            opening = re.compile(pattern, re.IGNORECASE)
            first = {c for c in string.printable + "ſK" if opening.match(c + " ") or any(
                opening.match(c + rest) for rest in ("'m not sure", " don't know", "t is not possible to say",
                                                      "o answer", "/a", "nknown", "one", "rovided search results do not",
                                                      "earch results do not", "here is no information available",
                                                      "his cannot be answered", "he search results do not"))}
            assert {c.casefold() for c in first} <= set(_FIRST_LETTERS), pattern
        assert may_abstain("Angina is chest pain. The provided search results do not mention it.") is True
        assert may_abstain("Angina is chest pain. N/A") is True

    @pytest.mark.parametrize(
        "text",
        [
            "I'm not sure, but smoking causes lung cancer.",
            "I'm not sure. Smoking causes lung cancer and heart disease.",
            "Smoking causes lung cancer. There is no evidence that it prevents colds.",
            "There is insufficient evidence to recommend vitamin D for this.",
            "I know that aspirin thins the blood.",
        ],
        ids=["but-continues", "hedge-then-content", "no-evidence-claim", "insufficient-evidence", "i-know"],
    )
    def test_not_abstained(self, text: str) -> None:
        """A hedge followed by real content, or a factual 'no evidence' claim, is scored."""
        assert preprocess("", text).abstained is False

    def test_echo_only_is_abstained(self) -> None:
        """A response that only repeats the question leaves nothing to score: abstained."""
        result = preprocess("What is X?", "What is X?")
        assert (result.text, result.abstained) == ("", True)


class TestIsNoncommittal:
    @pytest.mark.parametrize(
        ("sentence", "expected"),
        [
            ("Unfortunately, the provided search results do not contain his biography.", True),
            ("I’m not sure.", True),
            ("I'm not sure, however X is Y.", False),
            ("Nobody knows the cause.", False),
        ],
        ids=["search-results", "curly-apostrophe", "however-continues", "factual-unknown"],
    )
    def test_sentence(self, sentence: str, expected: bool) -> None:
        """Openings from the pattern list count unless a contrast follows."""
        assert is_noncommittal(sentence) is expected


class TestAbstainedOnFactScore:
    @pytest.mark.parametrize(
        ("model", "caught", "annotated"),
        [("ChatGPT", 17, 18), ("PerplexityAI", 4, 13)],
        ids=["ChatGPT", "PerplexityAI"],
    )
    def test_against_human_abstentions(
        self, shared_data: Path, model: str, caught: int, annotated: int
    ) -> None:
        """Measured recall on FActScore's abstentions, and no answer with annotations flagged."""
        path = shared_data / "factscore" / "labeled" / f"{model}.jsonl"
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        flagged = [preprocess(r["input"], r["output"]).abstained for r in rows]
        gold = [r["annotations"] is None for r in rows]
        assert sum(g for g in gold) == annotated
        assert sum(f and g for f, g in zip(flagged, gold, strict=True)) >= caught
        assert sum(f and not g for f, g in zip(flagged, gold, strict=True)) == 0
