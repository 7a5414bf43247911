"""The columnar verdict store: writer, reader, merge, rebuild."""

from __future__ import annotations

import gc
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import orjson
import pytest

from dahl.errors import ConfigError, InputError
from dahl.records import AnswerMetrics, AnswerResult, ClaimLabel, ClaimResult, Label, Status
from dahl.analysis import _verdicts as verdicts_module
from dahl.analysis._verdicts import STORE_DIR, VerdictWriter, load_runs, load_verdicts, merge_verdicts, rebuild
from tests.recall_runs import FACTS, TWO_MODELS, add_recall, recall_run

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
        real_copy = shutil.copyfileobj
        calls = []

        def boom(*args: Any, **kwargs: Any) -> None:  # the third column's .npy cannot be written
            calls.append(1)
            if len(calls) == 3:
                raise OSError("disk full")
            real_copy(*args, **kwargs)

        monkeypatch.setattr(shutil, "copyfileobj", boom)
        with pytest.raises(OSError, match="disk full"):
            write(tmp_path, SAMPLE)
        monkeypatch.undo()
        assert len(calls) == 3
        assert load_verdicts(tmp_path).n_answers == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == [STORE_DIR]

    def test_a_store_spooled_in_parts_is_the_store_written_at_once(self, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """Spooling every 2 answers writes the same files, byte for byte, as one spool at close."""
        results = [result(f"a{i}", f"m{i % 3}", [S, U, I, N][: i % 4 + 1], question_id=f"q{i % 5}",
                          category=f"c{i % 2}") for i in range(11)]
        write(tmp_path / "once", results)
        monkeypatch.setattr(verdicts_module, "SPOOL_ANSWERS", 2)
        write(tmp_path / "parts", results)
        once, parts = tmp_path / "once" / STORE_DIR, tmp_path / "parts" / STORE_DIR
        assert sorted(p.name for p in parts.iterdir()) == sorted(p.name for p in once.iterdir())
        for path in once.iterdir():
            assert (parts / path.name).read_bytes() == path.read_bytes(), path.name
        v = load_verdicts(tmp_path / "parts")
        assert v.offsets.tolist() == [0, 1, 3, 6, 10, 11, 13, 16, 20, 21, 23, 26]
        assert v.ids == [f"a{i}" for i in range(11)]

    def test_memory_holds_one_spool_not_the_run(self, tmp_path: Path) -> None:
        """100,000 answers of 10 claims grow the traced memory by one spool (16,384 answers), not by
        the 5.7 MB its columns took held in memory."""
        one = result("a", "m", [S] * 10)
        writer = VerdictWriter(tmp_path)
        for i in range(1000):  # the name tables and the first buffers exist
            writer.add(one)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(100_000):
                writer.add(one)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        writer.close()
        assert grown < 2_000_000
        assert load_verdicts(tmp_path).n_answers == 101_000

    def test_a_writer_dropped_unclosed_leaves_no_folder(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """An interrupted run's writer (finalize stopped) removes its spool when it goes."""
        monkeypatch.setattr(verdicts_module, "SPOOL_ANSWERS", 2)
        writer = VerdictWriter(tmp_path)
        for r in SAMPLE:
            writer.add(r)
        assert [p.name.startswith(f".{STORE_DIR}.tmp-") for p in tmp_path.iterdir()] == [True]
        del writer
        gc.collect()
        assert list(tmp_path.iterdir()) == []

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
            load_verdicts(tmp_path).scores("bleu")


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


class _FactLabel(msgspec.Struct):
    label: str


class _RecallDigest(msgspec.Struct):
    """What a digest of answers.jsonl needs of ``recall`` for the verdict store: metrics and fact labels."""

    recall: float | None = None
    recall_w: float | None = None
    f1: float | None = None
    f1_w: float | None = None
    recall_at_5: float | None = None
    recall_at_10: float | None = None
    recall_at_20: float | None = None
    reason: str | None = None
    facts: tuple[_FactLabel, ...] = ()


class _Digest(msgspec.Struct):
    id: str
    model: str
    category: str
    status: Status
    claims: tuple[ClaimLabel, ...]
    counts: dict[str, int]
    question: str = ""
    question_id: str = ""
    recall: _RecallDigest | None = None


@pytest.fixture
def recall_dir(tmp_path: Path) -> Path:
    """A replay run of the two-model fixture (tests/recall_runs.py) with recall on its lines."""
    return recall_run(tmp_path / "run")


class TestRecallColumns:
    def test_per_answer_values(self, recall_dir: Path) -> None:
        """recall.npy holds Rec, Rec^w, F1, F1^w, R@5/10/20 per answer: hand-computed, NaN where null."""
        v = load_verdicts(recall_dir)
        assert v.ids == ["A1", "A2", "A3", "B1", "B2", "B3"] and v.recall is not None
        expected = [
            [1 / 3, 1 / 2, 4 / 9, 4 / 7, 1 / 3, 1 / 3, 1 / 3],
            [1.0] * 7,
            [np.nan] * 7,  # empty F*
            [1.0, 1.0, 2 / 3, 2 / 3, 1.0, 1.0, 1.0],
            [0.0] * 7,  # abstained: covers nothing, counted
            [np.nan] * 7,
        ]
        np.testing.assert_allclose(np.asarray(v.recall), expected, rtol=0, atol=1e-12)

    def test_fact_counts(self, recall_dir: Path) -> None:
        """recall_facts.npy: |F*|, covered and partial facts per answer."""
        v = load_verdicts(recall_dir)
        assert v.recall_facts is not None
        assert v.recall_facts.tolist() == [[3, 1, 0], [2, 2, 0], [0, 0, 0], [3, 3, 0], [2, 0, 0], [0, 0, 0]]

    def test_scores_mask_is_where_defined(self, recall_dir: Path) -> None:
        """scores('f1_w') counts the abstained answer (0) and leaves out the null ones."""
        values, mask = load_verdicts(recall_dir).scores("f1_w")
        assert mask.tolist() == [True, True, False, True, True, False]
        assert values.tolist() == pytest.approx([4 / 7, 1.0, 0.0, 2 / 3, 0.0, 0.0])

    def test_meta_names_the_columns(self, recall_dir: Path) -> None:
        """meta.json lists the recall columns; the store version stays 1."""
        meta = orjson.loads((recall_dir / STORE_DIR / "meta.json").read_bytes())
        assert meta["version"] == 1
        assert meta["recall_columns"] == ["recall", "recall_w", "f1", "f1_w", "recall_at_5", "recall_at_10",
                                          "recall_at_20"]
        assert meta["recall_fact_columns"] == ["facts", "covered", "partial"]

    def test_run_without_refs_writes_no_recall_files(self, tmp_path: Path) -> None:
        """Without recall on any line the store has exactly the files it had before, and no recall key."""
        recall_run(tmp_path / "run", with_recall=False)
        folder = tmp_path / "run" / STORE_DIR
        assert sorted(p.name for p in folder.iterdir()) == sorted(
            [f"{n}.npy" for n in ("model", "category", "question", "status", "counts", "offsets", "labels")]
            + [f"{n}.json" for n in ("models", "categories", "question_ids", "ids", "meta")])
        assert "recall_columns" not in orjson.loads((folder / "meta.json").read_bytes())
        assert load_verdicts(tmp_path / "run").recall is None

    def test_recall_metric_without_recall_names_the_folder(self, tmp_path: Path) -> None:
        """A recall metric on a run scored without refs is a ConfigError naming the run folder."""
        recall_run(tmp_path / "plain", with_recall=False)
        with pytest.raises(ConfigError, match=r"recall_w needs recall, and .*plain has none") as info:
            load_verdicts(tmp_path / "plain").scores("recall_w")
        assert "dahl score --refs" in str(info.value)

    def test_answers_before_the_first_recall_get_null_rows(self, tmp_path: Path) -> None:
        """An answer without recall (no reference set) before one with it is a null row, facts -1."""
        rows = [(*TWO_MODELS[3][:5], []), TWO_MODELS[0]]  # B1 without facts given, then A1
        recall_run(tmp_path / "run", rows, with_recall=False)
        add_recall(tmp_path / "run", {"A1": TWO_MODELS[0][5]}, FACTS, {"A1": "q1"})
        v = load_verdicts(tmp_path / "run")
        assert v.ids == ["B1", "A1"] and v.recall is not None and v.recall_facts is not None
        assert np.isnan(v.recall[0]).all() and v.recall[1, 0] == pytest.approx(1 / 3)
        assert v.recall_facts.tolist() == [[-1, -1, -1], [3, 1, 0]]

    def test_merge_with_a_run_without_recall(self, tmp_path: Path) -> None:
        """Merging a recall run with a plain one keeps the columns (null rows) and names the plain run."""
        recall_run(tmp_path / "with", TWO_MODELS[:3])
        recall_run(tmp_path / "plain", TWO_MODELS[3:], with_recall=False)
        v = load_runs([tmp_path / "with", tmp_path / "plain"])
        assert v.recall is not None and v.recall.shape == (6, 7)
        assert np.isnan(v.recall[3:]).all() and v.recall[0, 0] == pytest.approx(1 / 3)
        assert v.without_recall == (tmp_path / "plain",)
        with pytest.raises(ConfigError, match=r"plain has none"):
            v.scores("recall")
        assert load_runs([tmp_path / "with"]).scores("recall")[1].tolist() == [True, True, False]

    def test_damaged_recall_column_is_named(self, recall_dir: Path) -> None:
        """A recall column of the wrong shape is an InputError telling to re-run."""
        np.save(recall_dir / STORE_DIR / "recall.npy", np.zeros((2, 7)))
        with pytest.raises(InputError, match="column recall disagrees"):
            load_verdicts(recall_dir)

    def test_a_digest_with_fact_labels_gives_the_same_columns(self, recall_dir: Path, tmp_path: Path) -> None:
        """A digest decoding recall's metrics and only the facts' labels (as the end of a run reads lines) writes
        the same recall columns as the full AnswerResult."""
        decoder = msgspec.json.Decoder(_Digest)
        writer = VerdictWriter(tmp_path / "digest")
        for raw in (recall_dir / "answers.jsonl").read_bytes().splitlines():
            writer.add(decoder.decode(raw))  # type: ignore[arg-type]
        writer.close()
        full, via_digest = load_verdicts(recall_dir), load_verdicts(tmp_path / "digest")
        np.testing.assert_array_equal(np.asarray(full.recall), np.asarray(via_digest.recall))
        assert np.asarray(via_digest.recall_facts).tolist() == np.asarray(full.recall_facts).tolist()
