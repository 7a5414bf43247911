"""Specification of dahl.refs._pool (pooled reference sets) and dahl.refs._dedupe."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.errors import ConfigError, InputError
from dahl.formats._refs import read_refs, write_refs
from dahl.metrics import answer_recall, fstar
from dahl.records import AnswerResult, Coverage, FactResult, FactSource, Label, Status, content_id
from dahl.analysis._summary import RecordedRecallSettings, SummaryBuilder
from dahl.refs._dedupe import fact_key, near_groups
from dahl.refs._pool import pool_runs

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")


def claim(text: str, label: str = "supported", span: list[int] | None = None) -> dict[str, Any]:
    return {"text": text, "index": 0, "label": label, "span": span}


def line(
    aid: str, qid: str, claims: list[dict[str, Any]], *, status: str = "scored", question: str = ""
) -> dict[str, Any]:
    """One answers.jsonl line with only the fields a pool reads (plus the usual ones)."""
    return {"id": aid, "model": aid.split("/")[0], "category": "all", "status": status, "claims": claims,
            "counts": {}, "metrics": {}, "input_hash": aid, "question": question or f"Q {qid}", "question_id": qid}


def run_dir(path: Path, lines: list[dict[str, Any]], *, state: str = "complete") -> Path:
    """A finished run folder: answers.jsonl and a manifest in ``state``."""
    path.mkdir(parents=True)
    (path / "answers.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    (path / "manifest.json").write_text(json.dumps({"state": state}), encoding="utf-8")
    return path


@pytest.fixture
def two_runs(tmp_path: Path) -> list[Path]:
    a = run_dir(tmp_path / "a", [
        line("A/1", "q1", [claim("Paris is in France.", span=[0, 19]), claim("It rains.", "unsupported"),
                           claim("Paris  is big.")]),
        line("A/2", "q2", [], status="abstained"),
    ])
    b = run_dir(tmp_path / "b", [
        line("B/1", "q1", [claim("Paris is big."), claim("paris is in France"), claim("Paris is in France.")]),
        line("B/2", "q2", [claim("Lyon is a city.", "irrelevant")]),
        line("B/3", "q3", [claim("x")], status="error"),
    ])
    return [a, b]


class TestPool:
    def test_union_of_supported_claims(self, two_runs: list[Path]) -> None:
        """q1's set is the union of both runs' supported claims, exact duplicates (NFC, whitespace) merged."""
        sets = {s.question_id: s for s in pool_runs(two_runs)}
        assert list(sets) == ["q1", "q2", "q3"]
        assert [f.text for f in sets["q1"].facts] == ["Paris is in France.", "Paris is big.", "paris is in France"]
        assert [f.support for f in sets["q1"].facts] == [2, 2, 1]
        assert sets["q1"].facts[0].source == FactSource(answer_id="A/1", span=(0, 19))
        assert sets["q1"].facts[2].source == FactSource(answer_id="B/1")
        assert sets["q1"].facts[0].id == content_id("Paris is in France.")
        assert sets["q1"].meta == {"pooled_answers": 2}

    def test_questions_without_supported_claims(self, two_runs: list[Path]) -> None:
        """Abstained, irrelevant-only and split-error questions give empty sets, or none with keep_empty=False."""
        sets = {s.question_id: s for s in pool_runs(two_runs)}
        assert sets["q2"].facts == () and sets["q3"].facts == ()
        assert [s.question_id for s in pool_runs(two_runs, keep_empty=False)] == ["q1"]

    def test_fold_merges_case_and_end_punctuation(self, two_runs: list[Path]) -> None:
        """With fold, "paris is in France" joins "Paris is in France." and adds its answer to the support."""
        q1 = pool_runs(two_runs, fold=True)[0]
        assert [(f.text, f.support) for f in q1.facts] == [("Paris is in France.", 2), ("Paris is big.", 2)]

    def test_facts_ordered_by_support(self, tmp_path: Path) -> None:
        """Facts stated by more answers come first; ties keep first-seen order."""
        run = run_dir(tmp_path / "r", [line("m/1", "q", [claim("A."), claim("B."), claim("C.")]),
                                       line("n/1", "q", [claim("C."), claim("D.")])])
        assert [(f.text, f.support) for f in pool_runs([run])[0].facts] == [("C.", 2), ("A.", 1), ("B.", 1), ("D.", 1)]

    def test_support_counts_answers_not_claims(self, tmp_path: Path) -> None:
        """One answer stating a fact twice supports it once; the same answer id in two runs counts twice."""
        one = run_dir(tmp_path / "one", [line("m/1", "q", [claim("A b."), claim("A b.")])])
        two = run_dir(tmp_path / "two", [line("m/1", "q", [claim("A b.")])])
        assert pool_runs([one])[0].facts[0].support == 1
        assert pool_runs([one, two])[0].facts[0].support == 2

    def test_question_text_when_no_question_id(self, tmp_path: Path) -> None:
        """An answer without question_id is pooled under content_id of its question, as RefIndex matches it."""
        entry = line("m/1", "", [claim("A b.")], question="Who is  X?")
        run = run_dir(tmp_path / "r", [entry])
        assert pool_runs([run])[0].question_id == content_id("Who is X?")

    def test_round_trip_through_refs_file(self, two_runs: list[Path], tmp_path: Path) -> None:
        """A pooled set written with write_refs reads back equal."""
        sets = pool_runs(two_runs)
        assert write_refs(tmp_path / "refs.jsonl", sets) == 3
        assert list(read_refs(tmp_path / "refs.jsonl")) == sets

    def test_unfinished_run_refused(self, tmp_path: Path) -> None:
        """A run folder whose manifest is not complete is an input error, unless require_complete=False."""
        run = run_dir(tmp_path / "r", [line("m/1", "q", [claim("A b.")])], state="running")
        with pytest.raises(InputError, match="not finished"):
            pool_runs([run])
        assert len(pool_runs([run], require_complete=False)[0].facts) == 1
        assert len(pool_runs([run / "answers.jsonl"])[0].facts) == 1  # a file is taken as is

    def test_bad_line_names_file_line_field(self, tmp_path: Path) -> None:
        """A claim whose text is a number is an error naming the file, line 2 and the JSON path."""
        run = run_dir(tmp_path / "r", [line("m/1", "q", [claim("A b.")]), line("m/2", "q", [claim("x")])])
        text = (run / "answers.jsonl").read_text().replace('"text": "x"', '"text": 3')
        (run / "answers.jsonl").write_text(text)
        with pytest.raises(InputError) as info:
            pool_runs([run])
        assert (info.value.file, info.value.line, info.value.field) == (str(run / "answers.jsonl"), 2,
                                                                         "$.claims[0].text")

    def test_missing_answers_and_no_runs(self, tmp_path: Path) -> None:
        """No runs, or a folder without answers.jsonl, is an input error."""
        with pytest.raises(InputError, match="at least one run"):
            pool_runs([])
        (tmp_path / "empty").mkdir()
        with pytest.raises(InputError, match="cannot read answers"):
            pool_runs([tmp_path / "empty"], require_complete=False)


class TestPoolRefusals:
    def test_a_run_given_twice_is_refused(self, two_runs: list[Path]) -> None:
        """The same run twice (folder or its answers file) would count every fact's support twice."""
        with pytest.raises(InputError, match="given twice"):
            pool_runs([two_runs[0], two_runs[1], two_runs[0] / "answers.jsonl"])

    @pytest.mark.parametrize("name", ["answers.jsonl", "summary.json", "manifest.json"])
    def test_output_over_a_pooled_runs_file_is_refused(self, two_runs: list[Path], name: str) -> None:
        """-o naming a file of a pooled run exits 2 and leaves the run as it was."""
        target = two_runs[1] / name
        target.write_text(before := target.read_text() if target.exists() else "{}\n")
        result = CliRunner().invoke(main, ["refs", "build", "--pool", str(two_runs[0]), "--pool", str(two_runs[1]),
                                           "-o", str(target)])
        assert result.exit_code == 2, result.output
        assert "would overwrite" in result.output and target.read_text() == before


class TestDedupe:
    @pytest.mark.parametrize(
        ("text", "fold", "key"),
        [
            ("A  b.", False, "A b."),
            ("Cafe\u0301 is open.", False, "Caf\u00e9 is open."),
            ("Ramesses IV was a Pharaoh.", True, "ramesses iv was a pharaoh"),
            ("It is!?  ", True, "it is"),
        ],
        ids=["whitespace", "nfc", "fold-case-and-dot", "fold-punct-run"],
    )
    def test_fact_key(self, text: str, fold: bool, key: str) -> None:
        """The exact key is the normalized text; fold also case-folds and strips end punctuation."""
        assert fact_key(text, fold=fold) == key

    def test_near_groups(self) -> None:
        """"is"/"was" variants (ratio 96.97) group at 95, not at 97; distinct facts stay apart."""
        texts = ["General Hospital is a soap opera.", "He was born in 1950.", "General Hospital was a soap opera."]
        assert near_groups(texts, 95) == [[0, 2], [1]]
        assert near_groups(texts, 97) == [[0], [1], [2]]

    def test_near_threshold_range(self) -> None:
        """A threshold outside [0, 100] is a configuration error."""
        with pytest.raises(ConfigError):
            near_groups(["a"], 101)

    def test_pool_near(self, tmp_path: Path) -> None:
        """pool_runs(near=95) merges the tense variant into the first-seen fact with both answers' support."""
        run = run_dir(tmp_path / "r", [line("m/1", "q", [claim("General Hospital is a soap opera.")]),
                                       line("n/1", "q", [claim("General Hospital was a soap opera.")])])
        facts = pool_runs([run], near=95)[0].facts
        assert [(f.text, f.support) for f in facts] == [("General Hospital is a soap opera.", 2)]


def human_supported(path: Path) -> dict[str, set[str]]:
    """Independent reading: per topic, the NFC, whitespace-collapsed human facts labelled S
    from sentences not marked irrelevant."""
    out: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as fh:
        for raw in fh:
            record = json.loads(raw)
            facts = out.setdefault(record["topic"], set())
            for sentence in record["annotations"] or []:
                if sentence.get("is-relevant") is False:
                    continue
                for fact in sentence.get("human-atomic-facts") or []:
                    if fact["label"] == "S":
                        facts.add(" ".join(unicodedata.normalize("NFC", fact["text"]).split()))
    return out


@pytest.mark.data
class TestPoolOnFactscore:
    def test_pooled_set_is_the_union_of_human_supported_facts(self, shared_data: Path, tmp_path: Path) -> None:
        """Three replay runs pooled: per entity, the set equals the union of human S facts; 120 of 128 non-empty."""
        files = [shared_data / "factscore" / "labeled" / f"{m}.jsonl" for m in MODELS]
        if not all(f.is_file() for f in files):
            pytest.skip("FActScore labeled files not found")
        runs = []
        for model, path in zip(MODELS, files, strict=True):
            out = tmp_path / model
            result = CliRunner().invoke(main, ["score", str(path), "--splitter", "given", "--checker", "replay",
                                               "-o", str(out), "--no-progress"])
            assert result.exit_code == 0, result.output
            runs.append(out)
        sets = pool_runs(runs)
        human = [human_supported(f) for f in files]
        union = {topic: set().union(*(h.get(topic, set()) for h in human)) for topic in human[0]}
        pooled = {s.question.removeprefix("Question: Tell me a bio of ").removesuffix("."): s for s in sets}
        assert set(pooled) == set(union) and len(pooled) == 128
        assert {t: {f.text for f in s.facts} for t, s in pooled.items()} == union
        assert sum(1 for s in sets if s.facts) == 120
        assert sum(len(s.facts) for s in sets) == 6335
        # support = how many of the three models' answers stated the fact
        for topic, ref_set in pooled.items():
            for fact in ref_set.facts:
                assert fact.support == sum(fact.text in h.get(topic, set()) for h in human)
        # each model covering exactly its own S facts, abstained 0, empty sets skipped (the lead's figures)
        for model, own, expected in zip(MODELS, human, (23.2, 35.0, 49.2), strict=True):
            recalls = [len(own.get(t, set())) / len(u) for t, u in union.items() if u]
            assert len(recalls) == 120
            assert round(100 * sum(recalls) / len(recalls), 1) == expected, model
        abstained = {m: 0 for m in MODELS}
        for model, path in zip(MODELS, files, strict=True):
            for raw in path.read_text(encoding="utf-8").splitlines():
                record = msgspec.json.decode(raw)
                if record["annotations"] is None and union[record["topic"]]:
                    abstained[model] += 1
        assert abstained == {"InstructGPT": 1, "ChatGPT": 12, "PerplexityAI": 9}

    def test_pooled_recall_in_the_summary(self, shared_data: Path, tmp_path: Path) -> None:
        """Replayed labels on the pooled sets: the summary's recall is 23.2 / 35.0 / 49.2, n = 120, 1/12/9 abstained."""
        runs = []
        for model in MODELS:
            path = shared_data / "factscore" / "labeled" / f"{model}.jsonl"
            if not path.is_file():
                pytest.skip(f"{path} not found")
            result = CliRunner().invoke(main, ["score", str(path), "--splitter", "given", "--checker", "replay",
                                               "-o", str(tmp_path / model), "--no-progress"])
            assert result.exit_code == 0, result.output
            runs.append(tmp_path / model)
        sets = {s.question_id: s for s in pool_runs(runs)}
        builder = SummaryBuilder(n_boot=200, recall_settings=RecordedRecallSettings(
            refs="pool", refs_sha256="", coverage="exact-in-test"))
        decoder = msgspec.json.Decoder(AnswerResult)
        for run in runs:
            for raw in (run / "answers.jsonl").read_bytes().splitlines():
                answer = decoder.decode(raw)
                stated = {c.text for c in answer.claims if c.label == Label.SUPPORTED}
                judged = [FactResult(id=f.id, text=f.text, weight=w, label=Coverage.COVERED if f.text in stated
                                     else Coverage.NOT_COVERED) for f, w in fstar(sets[answer.question_id].facts)]
                recall = answer_recall(judged, precision=answer.metrics.precision,
                                       abstained=answer.status == Status.ABSTAINED)
                builder.add(msgspec.structs.replace(answer, recall=recall))
        models = builder.build().as_builtins()["models"]
        for model, expected, n_abstained in zip(MODELS, (23.2, 35.0, 49.2), (1, 12, 9), strict=True):
            rec = models[model]["recall"]
            assert round(100 * rec["recall"], 1) == expected, model
            assert rec["recall_w"] == pytest.approx(rec["recall"])  # unrated facts weigh 1
            assert (rec["n"], rec["n_abstained"], rec["null_by_reason"]["empty_fstar"]) == (120, n_abstained, 8)
