"""The precision-recall figure: its points (board and summary.json) and the PNG that records them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dahl.errors import ConfigError
from dahl.analysis._leaderboard import build_leaderboard
from dahl.analysis._plots import POINTS_KEY, RecallPoint, board_points, plot_precision_recall, summary_points
from dahl.analysis._verdicts import load_runs
from tests.recall_runs import recall_run


def png_points(path: Path) -> list[dict[str, Any]]:
    """The points a PNG written by plot_precision_recall records (Pillow comes with matplotlib)."""
    image = pytest.importorskip("PIL.Image")
    with image.open(path) as im:
        return json.loads(im.text[POINTS_KEY])  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return recall_run(tmp_path / "run")


def contract_summary() -> dict[str, Any]:
    """summary.json models blocks with the recall keys of the R/P/J contract (values made up, hand-checkable)."""
    def block(score: float | None, rec: dict[str, Any] | None) -> dict[str, Any]:
        return {"dahl_score": score, **({"recall": rec} if rec is not None else {})}
    return {"models": {
        "m2": block(0.8, {"recall": 0.3, "recall_w": 0.35, "rho": 12.5}),
        "m1": block(0.6, {"recall": 0.5, "recall_w": 0.55, "rho": 30.0}),
        "plain": block(0.9, None),
        "empty": block(0.7, {"recall": None, "recall_w": None, "rho": 4.0}),
    }}


class TestPoints:
    def test_board_points_are_the_board_values(self, run_dir: Path) -> None:
        """A: (DAHL 8/9, Rec 2/3, ρ 2); B: (3/4, 1/2, 1.5); with recall_w: Rec^w 3/4 and 1/2."""
        board = build_leaderboard(load_runs([run_dir]))
        assert board_points(board) == [RecallPoint("A", 8 / 9, 2 / 3, 2.0), RecallPoint("B", 0.75, 0.5, 1.5)]
        assert [(p.recall, p.metric) for p in board_points(board, "recall_w")] == [(0.75, "recall_w"), (0.5, "recall_w")]

    def test_summary_points_read_the_contract_keys(self) -> None:
        """summary_points takes dahl_score, recall.<metric> and recall.rho; models without recall are left out."""
        assert summary_points(contract_summary()) == [RecallPoint("m1", 0.6, 0.5, 30.0), RecallPoint("m2", 0.8, 0.3, 12.5)]
        assert [p.recall for p in summary_points(contract_summary(), "recall_w")] == [0.55, 0.35]

    def test_other_metric_or_no_recall_is_an_error(self, tmp_path: Path) -> None:
        """Only recall and recall_w go on the x axis; a board without recall says to score with --refs."""
        with pytest.raises(ConfigError, match="recall or recall_w"):
            summary_points(contract_summary(), "f1")
        board = build_leaderboard(load_runs([recall_run(tmp_path / "plain", with_recall=False)]))
        with pytest.raises(ConfigError, match="--refs"):
            board_points(board)


class TestPlotPrecisionRecall:
    def test_png_records_the_plotted_points(self, run_dir: Path, tmp_path: Path) -> None:
        """The PNG is written and its dahl:points chunk holds the board's values."""
        pytest.importorskip("matplotlib")
        board = build_leaderboard(load_runs([run_dir]))
        out = tmp_path / "pr.png"
        plot_precision_recall(board_points(board), out)
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png_points(out) == [
            {"model": "A", "precision": 8 / 9, "recall": 2 / 3, "rho": 2.0, "metric": "recall"},
            {"model": "B", "precision": 0.75, "recall": 0.5, "rho": 1.5, "metric": "recall"},
        ]

    def test_summary_values_reach_the_file(self, tmp_path: Path) -> None:
        """Points read from a summary.json are drawn as they are."""
        pytest.importorskip("matplotlib")
        out = tmp_path / "pr.png"
        plot_precision_recall(summary_points(contract_summary()), out)
        assert [(p["model"], p["precision"], p["recall"], p["rho"]) for p in png_points(out)] == [
            ("m1", 0.6, 0.5, 30.0), ("m2", 0.8, 0.3, 12.5)]

    def test_no_points_is_an_error(self, tmp_path: Path) -> None:
        """Nothing to draw raises ConfigError and writes no file."""
        with pytest.raises(ConfigError, match="no model"):
            plot_precision_recall([], tmp_path / "pr.png")
        assert not (tmp_path / "pr.png").exists()
