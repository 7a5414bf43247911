"""The columnar verdict store: writer, reader, merge, rebuild."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest

from dahl.errors import ConfigError, InputError
from dahl.records import AnswerMetrics, AnswerResult, ClaimResult, Label, Status
from dahl.verdicts import STORE_DIR, VerdictWriter, load_verdicts, merge_verdicts, rebuild

S, U, I, N = Label.SUPPORTED, Label.UNSUPPORTED, Label.IRRELEVANT, Label.UNKNOWN


def result(aid: str, model: str, labels: list[Label], *, status: Status = Status.SCORED,
           question_id: str = "q1", category: str = "cat") -> AnswerResult:
    """An AnswerResult with the given claim labels (counts derived from them)."""
    counts = {str(x): sum(1 for y in labels if y == x) for x in Label}
    claims = tuple(ClaimResult(text=f"c{i}", index=i, label=x) for i, x in enumerate(labels))
    return AnswerResult(id=aid, model=model, category=category, status=status, claims=claims, counts=counts,
                        metrics=AnswerMetrics(), input_hash="h", question="Q?", response="R.",
                        question_id=question_id)


def write(out: Path, results: list[AnswerResult]) -> Path:
    writer = VerdictWriter(out, gamma=10.0, k=64)
    for r in results:
        writer.add(r)
    return writer.close()


SAMPLE = [
    result("a1", "m1", [S, U], question_id="q1", category="x"),
    result("a2", "m2", [], status=Status.ABSTAINED, question_id="q1", category="y"),
    result("a3", "m1", [S, S, I], question_id="q2", category="x"),
]


class TestVerdictWriter:
    def test_round_trip_columns(self, tmp_path: Path) -> None:
        """Codes, counts, offsets and per-claim labels read back as written."""
        write(tmp_path, SAMPLE)
        v = load_verdicts(tmp_path)
        assert v.models == ["m1", "m2"] and v.categories == ["x", "y"] and v.question_ids == ["q1", "q2"]
        assert v.model.tolist() == [0, 1, 0]
        assert v.question.tolist() == [0, 0, 1]
        assert v.counts.tolist() == [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [2, 0, 1, 0, 0]]
        assert v.offsets.tolist() == [0, 2, 2, 5]
        assert v.labels.tolist() == [0, 1, 0, 0, 2]
        assert v.status.tolist() == [0, 1, 0]
        assert v.ids == ["a1", "a2", "a3"]
        assert (v.gamma, v.k) == (10.0, 64)

    def test_arrays_are_memory_mapped(self, tmp_path: Path) -> None:
        """The reader memory-maps the numpy columns instead of copying them."""
        write(tmp_path, SAMPLE)
        assert isinstance(load_verdicts(tmp_path).labels, np.memmap)

    def test_no_temporary_folder_is_left(self, tmp_path: Path) -> None:
        """After close the run folder holds only verdicts/ (the temporary folder was renamed)."""
        write(tmp_path, SAMPLE)
        assert sorted(p.name for p in tmp_path.iterdir()) == [STORE_DIR]

    def test_failed_write_keeps_the_old_store(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A crash while writing leaves the previous complete store in place."""
        write(tmp_path, SAMPLE[:1])
        real_save = np.save
        calls = []

        def boom(*args: Any, **kwargs: Any) -> None:
            calls.append(1)
            if len(calls) == 3:
                raise OSError("disk full")
            real_save(*args, **kwargs)

        monkeypatch.setattr(np, "save", boom)
        with pytest.raises(OSError, match="disk full"):
            write(tmp_path, SAMPLE)
        monkeypatch.undo()
        assert load_verdicts(tmp_path).n_answers == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == [STORE_DIR]

    def test_add_after_close_fails(self, tmp_path: Path) -> None:
        """The writer refuses results after close."""
        writer = VerdictWriter(tmp_path)
        writer.close()
        with pytest.raises(RuntimeError):
            writer.add(SAMPLE[0])

    def test_empty_run_writes_an_empty_store(self, tmp_path: Path) -> None:
        """A run without answers still writes a readable store."""
        write(tmp_path, [])
        v = load_verdicts(tmp_path)
        assert v.n_answers == 0 and v.offsets.tolist() == [0] and v.counts.shape == (0, 5)


class TestLoadVerdicts:
    def test_missing_store_says_what_to_do(self, tmp_path: Path) -> None:
        """A run without a store raises InputError telling to run dahl score again."""
        with pytest.raises(InputError, match="run dahl score again"):
            load_verdicts(tmp_path)

    def test_other_version_is_refused(self, tmp_path: Path) -> None:
        """A store of another version raises InputError naming the version."""
        write(tmp_path, SAMPLE)
        meta = tmp_path / STORE_DIR / "meta.json"
        data = orjson.loads(meta.read_bytes())
        data["version"] = 0
        meta.write_bytes(orjson.dumps(data))
        with pytest.raises(InputError, match="version 0"):
            load_verdicts(tmp_path)

    def test_accepts_the_store_folder_itself(self, tmp_path: Path) -> None:
        """Passing OUTDIR/verdicts works like passing OUTDIR."""
        write(tmp_path, SAMPLE)
        assert load_verdicts(tmp_path / STORE_DIR).n_answers == 3


class TestScores:
    def test_precision_and_mask(self, tmp_path: Path) -> None:
        """precision = S/(S+U): 1/2 and 2/2; the abstained answer is outside the mask."""
        write(tmp_path, SAMPLE)
        values, mask = load_verdicts(tmp_path).scores("dahl_score")
        assert mask.tolist() == [True, False, True]
        assert values.tolist() == [0.5, 0.0, 1.0]

    def test_factscore_init_counts_irrelevant(self, tmp_path: Path) -> None:
        """factscore_init = S/(S+U+I): 1/2 and 2/3."""
        write(tmp_path, SAMPLE)
        values, _ = load_verdicts(tmp_path).scores("factscore_init")
        assert values[[0, 2]].tolist() == pytest.approx([0.5, 2 / 3])

    def test_n_claims(self, tmp_path: Path) -> None:
        """n_claims is the claim count of every answer that responded."""
        write(tmp_path, SAMPLE)
        values, mask = load_verdicts(tmp_path).scores("n_claims")
        assert values.tolist() == [2.0, 0.0, 3.0] and mask.tolist() == [True, False, True]

    def test_unknown_metric(self, tmp_path: Path) -> None:
        """An unknown metric name raises ConfigError."""
        write(tmp_path, SAMPLE)
        with pytest.raises(ConfigError, match="unknown metric"):
            load_verdicts(tmp_path).scores("recall")


class TestMerge:
    def test_questions_match_across_runs(self, tmp_path: Path) -> None:
        """Answers of two runs to the same question id get the same question code."""
        write(tmp_path / "r1", [result("a", "m1", [S], question_id="qX"), result("b", "m1", [S], question_id="qY")])
        write(tmp_path / "r2", [result("c", "m2", [U], question_id="qY")])
        v = merge_verdicts([load_verdicts(tmp_path / "r1"), load_verdicts(tmp_path / "r2")])
        assert v.question_ids == ["qX", "qY"] and v.question.tolist() == [0, 1, 1]
        assert v.models == ["m1", "m2"] and v.source is not None and v.source.tolist() == [0, 0, 1]
        assert v.offsets.tolist() == [0, 1, 2, 3] and v.ids == ["a", "b", "c"]

    def test_same_model_in_two_runs_is_an_error(self, tmp_path: Path) -> None:
        """A model present in two runs raises ConfigError naming it."""
        write(tmp_path / "r1", [result("a", "m1", [S])])
        write(tmp_path / "r2", [result("b", "m1", [S])])
        with pytest.raises(ConfigError, match="'m1' is in two runs"):
            merge_verdicts([load_verdicts(tmp_path / "r1"), load_verdicts(tmp_path / "r2")])


class TestRebuild:
    def test_rebuild_from_answers_jsonl(self, tmp_path: Path) -> None:
        """rebuild() writes the same columns as the writer, from answers.jsonl."""
        enc = msgspec.json.Encoder()
        (tmp_path / "answers.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in SAMPLE))
        rebuild(tmp_path)
        v = load_verdicts(tmp_path)
        assert v.counts.tolist() == [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0], [2, 0, 1, 0, 0]]
        assert v.labels.tolist() == [0, 1, 0, 0, 2] and v.ids == ["a1", "a2", "a3"]

    def test_bad_line_is_named(self, tmp_path: Path) -> None:
        """An undecodable line raises InputError with its line number."""
        (tmp_path / "answers.jsonl").write_bytes(b'{"id": 1}\n')
        with pytest.raises(InputError, match="answers.jsonl:1"):
            rebuild(tmp_path)
