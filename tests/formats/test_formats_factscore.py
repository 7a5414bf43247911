"""FActScore labelled JSONL reader, on tiny files and on the real shared split."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.records import GivenClaim, Label

LINE = {
    "input": "Question: Tell me a bio of Ada Lovelace.",
    "output": "Ada Lovelace was a mathematician. She liked cats. Born 1815.",
    "topic": "Ada Lovelace",
    "cat": ["very freq", "Europe"],
    "annotations": [
        {
            "text": "Ada Lovelace was a mathematician.",
            "is-relevant": True,
            "model-atomic-facts": [{"text": "model fact, ignored"}],
            "human-atomic-facts": [
                {"text": "Ada Lovelace was a mathematician.", "label": "S"},
                {"text": "Ada Lovelace was English.", "label": "IR"},
            ],
        },
        {
            "text": "She liked cats.",
            "is-relevant": False,
            "model-atomic-facts": [{"text": "She liked cats."}, {"text": "She had cats."}],
            "human-atomic-facts": None,
        },
        {"text": "Agreed.", "is-relevant": True, "model-atomic-facts": [], "human-atomic-facts": []},
        {
            "text": "Born 1815.",
            "is-relevant": True,
            "model-atomic-facts": None,
            "human-atomic-facts": [{"text": "She was born in 1816.", "label": "NS"}],
        },
    ],
}

ABSTAINED = {"input": "Q", "output": "", "topic": "Nobody", "cat": ["rare", "Asia"], "annotations": None}


def write(tmp_path: Path, *records: object, name: str = "InstructGPT.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


class TestReadFactscore:
    def test_answer_fields(self, tmp_path: Path) -> None:
        """id is model/topic, model the file stem, category cat[0], meta keeps topic and cat."""
        (answer,) = read_answers(write(tmp_path, LINE), "factscore")
        assert answer.id == "InstructGPT/Ada Lovelace"
        assert (answer.model, answer.category) == ("InstructGPT", "very freq")
        assert answer.question == LINE["input"] and answer.response == LINE["output"]
        assert answer.meta == {"topic": "Ada Lovelace", "cat": ["very freq", "Europe"]}
        assert answer.abstained is False

    def test_claims_in_sentence_order(self, tmp_path: Path) -> None:
        """Human facts keep their labels; an irrelevant sentence gives its model facts as irrelevant."""
        (answer,) = read_answers(write(tmp_path, LINE), "factscore")
        assert answer.claims == (
            GivenClaim(text="Ada Lovelace was a mathematician.", label=Label.SUPPORTED),
            GivenClaim(text="Ada Lovelace was English.", label=Label.IRRELEVANT),
            GivenClaim(text="She liked cats.", label=Label.IRRELEVANT),
            GivenClaim(text="She had cats.", label=Label.IRRELEVANT),
            GivenClaim(text="She was born in 1816.", label=Label.UNSUPPORTED),
        )

    def test_null_annotations_abstained(self, tmp_path: Path) -> None:
        """annotations: null gives abstained=True and no claims, even with an empty output."""
        (answer,) = read_answers(write(tmp_path, ABSTAINED), "factscore")
        assert (answer.abstained, answer.claims, answer.response) == (True, (), "")

    def test_unknown_label_named(self, tmp_path: Path) -> None:
        """A human label other than S/NS/IR raises InputError with its JSON path."""
        bad = json.loads(json.dumps(LINE))
        bad["annotations"][3]["human-atomic-facts"][0]["label"] = "X"
        with pytest.raises(InputError) as info:
            list(read_answers(write(tmp_path, ABSTAINED, bad), "factscore"))
        assert info.value.line == 2
        assert info.value.field == "$.annotations[3].human-atomic-facts[0].label"

    def test_missing_topic_named(self, tmp_path: Path) -> None:
        """A line without topic raises InputError with field "topic"."""
        bad = {k: v for k, v in LINE.items() if k != "topic"}
        with pytest.raises(InputError) as info:
            list(read_answers(write(tmp_path, bad), "factscore"))
        assert (info.value.line, info.value.field) == (1, "topic")


# (model, abstained, S, NS, IR) on the shared 128-entity split. README totals count human
# facts only (IR 467 / 383 / 247); ours add the model facts of is-relevant=false sentences
# (38 / 2 / 794), which is the convention behind the README's FActScore 41.9 / 57.5 / 69.3.
SHARED = [
    ("InstructGPT", 1, 1426, 1306, 467 + 38),
    ("ChatGPT", 18, 2179, 1188, 383 + 2),
    ("PerplexityAI", 13, 3240, 545, 247 + 794),
]


@pytest.mark.data
class TestFactscoreSharedData:
    @pytest.mark.parametrize(("model", "abstained", "s", "ns", "ir"), SHARED, ids=[m[0] for m in SHARED])
    def test_counts(
        self, shared_data: Path, model: str, abstained: int, s: int, ns: int, ir: int
    ) -> None:
        """128 answers per file, the known abstentions, and the label totals."""
        answers = list(read_answers(shared_data / "factscore" / "labeled" / f"{model}.jsonl"))
        labels = Counter(c.label for a in answers for c in a.claims or ())
        assert len(answers) == 128
        assert sum(a.abstained for a in answers) == abstained
        assert labels == {Label.SUPPORTED: s, Label.UNSUPPORTED: ns, Label.IRRELEVANT: ir}

    @pytest.mark.parametrize(
        ("model", "factscore"),
        [("InstructGPT", 41.9), ("ChatGPT", 57.5), ("PerplexityAI", 69.3)],
    )
    def test_human_factscore(self, shared_data: Path, model: str, factscore: float) -> None:
        """Mean S/(S+NS+IR) over non-abstained answers matches the README to 0.1 point."""
        answers = read_answers(shared_data / "factscore" / "labeled" / f"{model}.jsonl")
        scores = []
        for answer in answers:
            if answer.abstained:
                continue
            labels = Counter(c.label for c in answer.claims or ())
            scores.append(labels[Label.SUPPORTED] / sum(labels.values()))
        assert round(100 * sum(scores) / len(scores), 1) == factscore
