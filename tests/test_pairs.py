"""DPO preference pairs from stored verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from dahl.errors import ConfigError
from dahl.analysis._pairs import find_pairs, write_pairs
from dahl.records import AnswerResult, Label, Status
from dahl.analysis._verdicts import load_runs, load_verdicts, rebuild
from tests.recall_runs import recall_run
from tests.report_runs import MODELS, replay_runs
from tests.test_verdicts import result

S, U, N = Label.SUPPORTED, Label.UNSUPPORTED, Label.UNKNOWN


def answers() -> list[AnswerResult]:
    """q1: A1 0.8, B1 0.5, A1b 0.25 (same model as A1), D1 0.0, C1 excluded; q2 only A; q3 a tie."""
    rows = [
        result("A1", "A", [S, S, S, S, U], question_id="q1"),
        result("B1", "B", [S, U], question_id="q1"),
        result("A1b", "A", [S, U, U, U], question_id="q1"),
        result("D1", "D", [U], question_id="q1"),
        result("C1", "C", [S, N], status=Status.EXCLUDED, question_id="q1"),
        result("A2", "A", [S], question_id="q2"),
        result("C2", "C", [], status=Status.ABSTAINED, question_id="q2"),
        result("A3", "A", [S, U], question_id="q3"),
        result("B3", "B", [S, U], question_id="q3"),
    ]
    return [msgspec.structs.replace(r, question=f"question {r.question_id}", response=f"response {r.id}") for r in rows]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    enc = msgspec.json.Encoder()
    (tmp_path / "answers.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in answers()))
    rebuild(tmp_path)
    return tmp_path


def named(run_dir: Path, **kwargs: object) -> list[tuple[str, str, float]]:
    store = load_verdicts(run_dir)
    return [(store.ids[p.chosen], store.ids[p.rejected], round(p.margin, 6))
            for p in find_pairs(store, **kwargs)]  # type: ignore[arg-type]


class TestFindPairs:
    def test_all_pairs_between_different_models(self, run_dir: Path) -> None:
        """q1 gives 5 pairs (A1 vs A1b is the same model); q2 has one model; q3 is a tie."""
        assert named(run_dir) == [("A1", "B1", 0.3), ("A1", "D1", 0.8), ("B1", "A1b", 0.25),
                                  ("B1", "D1", 0.5), ("A1b", "D1", 0.25)]

    def test_min_margin(self, run_dir: Path) -> None:
        """--min-margin 0.3 keeps the three pairs with margin ≥ 0.3."""
        assert named(run_dir, min_margin=0.3) == [("A1", "B1", 0.3), ("A1", "D1", 0.8), ("B1", "D1", 0.5)]

    def test_best_vs_worst(self, run_dir: Path) -> None:
        """best_vs_worst keeps only the best (A1) vs the worst (D1) answer of q1."""
        assert named(run_dir, best_vs_worst=True) == [("A1", "D1", 0.8)]

    def test_excluded_answers_never_pair(self, run_dir: Path) -> None:
        """The excluded C1 and abstained C2 are in no pair."""
        ids = {x for pair in named(run_dir) for x in pair[:2]}
        assert not ids & {"C1", "C2"}

    def test_n_claims_is_refused(self, run_dir: Path) -> None:
        """Claim counts are not a quality score: ConfigError."""
        with pytest.raises(ConfigError):
            list(find_pairs(load_verdicts(run_dir), metric="n_claims"))


class TestWritePairs:
    def test_trl_layout(self, run_dir: Path, tmp_path: Path) -> None:
        """Lines hold prompt/chosen/rejected texts plus scores, ids, models and margin."""
        out = tmp_path / "pairs.jsonl"
        assert write_pairs([run_dir], out, min_margin=0.5) == 2
        first = json.loads(out.read_text().splitlines()[0])
        assert first == {
            "prompt": "question q1", "chosen": "response A1", "rejected": "response D1",
            "chosen_score": 0.8, "rejected_score": 0.0, "margin": 0.8, "chosen_id": "A1", "rejected_id": "D1",
            "chosen_model": "A", "rejected_model": "D", "question_id": "q1", "metric": "precision",
        }


@pytest.mark.data
class TestFActScorePairs:
    def test_no_excluded_answer_in_any_pair(self, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
        """Across the three replay runs every chosen/rejected answer is inside the DAHL mask."""
        runs = replay_runs(tmp_path_factory)
        dirs = [runs[m] for m in MODELS]
        out = tmp_path / "pairs.jsonl"
        n = write_pairs(dirs, out, min_margin=0.1)
        store = load_runs(dirs)
        _, mask = store.scores("precision")
        included = {store.ids[i] for i in np.flatnonzero(mask).tolist()}
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        assert n == len(lines) > 0
        assert all(x["chosen_id"] in included and x["rejected_id"] in included for x in lines)
        assert all(x["margin"] >= 0.1 - 1e-9 and x["chosen_model"] != x["rejected_model"] for x in lines)
        assert all(x["prompt"].startswith("Question: Tell me a bio of") for x in lines)


@pytest.fixture
def recall_dir(tmp_path: Path) -> Path:
    """The two-model recall fixture of tests/recall_runs.py as a real run folder."""
    return recall_run(tmp_path / "run")


class TestRecallPairs:
    def test_f1_w_reverses_the_precision_choice(self, recall_dir: Path) -> None:
        """q1: precision prefers A1 (2/3 > 1/2), F1^w prefers B1 (2/3 > 4/7); q2: A2 1 over abstained B2 0."""
        assert named(recall_dir, metric="precision") == [("A1", "B1", round(1 / 6, 6))]
        assert sorted(named(recall_dir, metric="f1_w")) == [("A2", "B2", 1.0), ("B1", "A1", round(2 / 3 - 4 / 7, 6))]

    def test_questions_with_empty_fstar_give_no_pair(self, recall_dir: Path) -> None:
        """q3 has no reference facts (recall null for A3 and B3): the recall pairs are q1's and q2's only."""
        store = load_verdicts(recall_dir)
        pairs = [(store.ids[p.chosen], store.ids[p.rejected]) for p in find_pairs(store, metric="recall")]
        assert pairs == [("B1", "A1"), ("A2", "B2")]

    def test_write_pairs_records_the_metric(self, recall_dir: Path, tmp_path: Path) -> None:
        """write_pairs --metric recall_w: lines carry the Rec^w scores and metric 'recall_w'."""
        out = tmp_path / "pairs.jsonl"
        assert write_pairs([recall_dir], out, metric="recall_w") == 2
        lines = [json.loads(x) for x in out.read_text().splitlines()]
        by_chosen = {x["chosen_id"]: x for x in lines}
        assert by_chosen["B1"]["rejected_id"] == "A1" and by_chosen["B1"]["chosen_score"] == 1.0
        assert by_chosen["B1"]["rejected_score"] == 0.5 and {x["metric"] for x in lines} == {"recall_w"}
        assert by_chosen["B1"]["prompt"] == "Question q1?" and by_chosen["B1"]["chosen"] == "B1 claim 0. B1 claim 1."

    def test_recall_metric_without_recall_names_the_run(self, tmp_path: Path) -> None:
        """Pairs by f1 from a run scored without refs: a ConfigError naming its folder."""
        run = recall_run(tmp_path / "norefs", with_recall=False)
        with pytest.raises(ConfigError, match=r"f1 needs recall, and .*norefs has none"):
            write_pairs([run], tmp_path / "p.jsonl", metric="f1")
