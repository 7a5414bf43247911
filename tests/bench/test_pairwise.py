"""Tests for bench.pairwise: MedHallu pairwise accuracy from a dahl answers.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.pairwise import main, pairwise


def _line(qid: int, model: str, status: str, precision: float | None) -> str:
    return json.dumps({"id": f"{qid}-{model}", "model": model, "status": status,
                       "metrics": {"precision": precision}, "meta": {"qid": qid}})


def _write(path: Path, rows: list[tuple[int, str, str, float | None]]) -> Path:
    path.write_text("".join(_line(*r) + "\n" for r in rows))
    return path


class TestPairwise:
    def test_wins_ties_losses(self, tmp_path: Path) -> None:
        """q0 win (1.0 > 0.5), q1 tie (0.5 = 0.5), q2 loss (0 < 1), q3 win (scored vs excluded)."""
        path = _write(tmp_path / "a.jsonl", [
            (0, "ground-truth", "scored", 1.0), (0, "hallucinated", "scored", 0.5),
            (1, "ground-truth", "scored", 0.5), (1, "hallucinated", "scored", 0.5),
            (2, "ground-truth", "scored", 0.0), (2, "hallucinated", "scored", 1.0),
            (3, "ground-truth", "scored", 0.0), (3, "hallucinated", "excluded", None),
        ])
        out = pairwise(path)
        assert out["all"] == {"questions": 4, "wins": 2, "ties": 1, "losses": 1, "pairwise_accuracy": 0.5}
        assert (out["even"]["wins"], out["even"]["losses"]) == (1, 1)  # q0, q2
        assert (out["odd"]["wins"], out["odd"]["ties"]) == (1, 1)  # q3, q1

    def test_missing_partner_named(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A question with one answer only is an error naming the question; exit status 2."""
        path = _write(tmp_path / "a.jsonl", [(7, "ground-truth", "scored", 1.0)])
        assert main([str(path)]) == 2
        assert "question 7" in capsys.readouterr().err
