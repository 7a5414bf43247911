"""DPO preference pairs from stored verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from dahl.errors import ConfigError
from dahl.pairs import find_pairs, write_pairs
from dahl.records import AnswerResult, Label, Status
from dahl.verdicts import load_runs, load_verdicts, rebuild
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
