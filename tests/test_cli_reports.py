"""The report commands end to end: leaderboard, pairs, agree, sample."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.records import Label, Status
from dahl.analysis._verdicts import rebuild
from tests.recall_runs import recall_run
from tests.report_runs import MODELS, factscore_run, replay_runs
from tests.test_verdicts import result

S, U = Label.SUPPORTED, Label.UNSUPPORTED


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res.exit_code, res.output


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """A run folder (answers.jsonl + store): A 1.0 and B 0.5 on q1, B abstained on q2."""
    out = tmp_path / "run"
    out.mkdir()
    rows = [result("a1", "A", [S, S], question_id="q1"), result("b1", "B", [S, U], question_id="q1"),
            result("b2", "B", [], status=Status.ABSTAINED, question_id="q2")]
    enc = msgspec.json.Encoder()
    (out / "answers.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows))
    rebuild(out)
    return out


class TestLeaderboardCommand:
    def test_markdown_on_stdout(self, small: Path) -> None:
        """Without -o the markdown board is printed: A 100.0 above B 50.0."""
        code, out = run("leaderboard", str(small))
        assert code == 0
        assert "| 1 | A | 100.0 |" in out and "| B | 50.0 |" in out

    @pytest.mark.parametrize("suffix", [".json", ".csv", ".md"])
    def test_output_formats(self, small: Path, tmp_path: Path, suffix: str) -> None:
        """-o writes JSON, CSV or markdown by suffix."""
        target = tmp_path / f"board{suffix}"
        code, _ = run("leaderboard", str(small), "-o", str(target), "--by", "category")
        assert code == 0
        text = target.read_text()
        if suffix == ".json":
            assert [m["model"] for m in json.loads(text)["models"]] == ["A", "B"]
        elif suffix == ".csv":
            assert text.startswith("rank,model,dahl_score")
        else:
            assert text.startswith("## Leaderboard")

    def test_bad_suffix_is_a_usage_error(self, small: Path, tmp_path: Path) -> None:
        """-o board.txt exits 2."""
        code, out = run("leaderboard", str(small), "-o", str(tmp_path / "board.txt"))
        assert code == 2 and ".md, .csv or .json" in out

    def test_missing_store_is_a_usage_error(self, tmp_path: Path) -> None:
        """A folder without a verdict store exits 2 with the hint to re-run dahl score."""
        code, out = run("leaderboard", str(tmp_path))
        assert code == 2 and "run dahl score again" in out

    @pytest.mark.data
    def test_factscore_board_json(self, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> None:
        """board.json of the three replay runs: PerplexityAI, ChatGPT, InstructGPT with the issue's fields; PNG written."""
        runs = replay_runs(tmp_path_factory)
        board, png = tmp_path / "board.json", tmp_path / "board.png"
        args = ["leaderboard", *(str(runs[m]) for m in MODELS), "-o", str(board), "--by", "category"]
        if pytest.importorskip("matplotlib"):
            args += ["--plot", str(png)]
        code, _ = run(*args)
        assert code == 0
        doc = json.loads(board.read_text())
        assert [m["model"] for m in doc["models"]] == ["PerplexityAI", "ChatGPT", "InstructGPT"]
        assert [round(100 * m["dahl_score"], 1) for m in doc["models"]] == [82.6, 61.8, 47.5]
        assert all(c["p_value"] < 0.01 for c in doc["comparisons"])
        assert png.stat().st_size > 10_000


class TestPairsCommand:
    def test_writes_pairs(self, small: Path, tmp_path: Path) -> None:
        """One pair (A 1.0 over B 0.5) is written and counted."""
        code, out = run("pairs", str(small), "-o", str(tmp_path / "p.jsonl"))
        assert code == 0 and out.startswith("1 pairs written")
        line = json.loads((tmp_path / "p.jsonl").read_text())
        assert (line["chosen_id"], line["rejected_id"], line["margin"]) == ("a1", "b1", 0.5)


class TestAgreeCommand:
    def test_files(self, tmp_path: Path) -> None:
        """Two score files: r = √(25/37) = 0.8220 and paired t p = 0.704 are printed."""
        (tmp_path / "a.jsonl").write_text("".join(f'{{"id": "{i}", "score": {v}}}\n' for i, v in enumerate([1, 2, 3, 4, 5])))
        (tmp_path / "b.csv").write_text("id,score\n" + "".join(f"{i},{v}\n" for i, v in enumerate([2, 1, 4, 3, 6])))
        code, out = run("agree", str(tmp_path / "a.jsonl"), str(tmp_path / "b.csv"))
        assert code == 0
        assert "Pearson r = 0.822" in out and "p = 0.704" in out

    @pytest.mark.data
    def test_claim_counts_human_vs_rules(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        """dahl agree --metric n_claims on human vs rule splits reports r and the paired t-test (JSON)."""
        base = tmp_path_factory.getbasetemp() / "factscore-runs"
        base.mkdir(exist_ok=True)
        human = factscore_run(base, "InstructGPT")
        rules = factscore_run(base, "InstructGPT", "rules", "fake")
        code, out = run("agree", str(human), str(rules), "--metric", "n_claims", "--json")
        assert code == 0
        doc = json.loads(out)
        assert doc["n"] == 127 and doc["pearson_r"] > 0.3 and doc["t_p"] is not None and doc["t_df"] == 126


class TestSampleCommand:
    def test_csv_sample(self, tmp_path: Path) -> None:
        """A CSV of 10 + 10 questions sampled at 0.3 keeps 3 per category."""
        (tmp_path / "q.csv").write_text("question,category\n" + "".join(f"q{i},{'ab'[i % 2]}\n" for i in range(20)))
        code, out = run("sample", str(tmp_path / "q.csv"), "--fraction", "0.3", "-o", str(tmp_path / "s.csv"))
        assert code == 0 and out.startswith("6 of 20 rows")
        assert len((tmp_path / "s.csv").read_text().splitlines()) == 7

    def test_repeats_needs_a_run(self, tmp_path: Path) -> None:
        """--repeats on a file exits 2."""
        (tmp_path / "q.csv").write_text("question,category\nq,a\n")
        code, _ = run("sample", str(tmp_path / "q.csv"), "--repeats", "3")
        assert code == 2

    def test_repeats_on_a_run(self, small: Path) -> None:
        """--repeats on a run folder prints the pairwise table and the smallest p-values."""
        code, out = run("sample", str(small), "--repeats", "2", "--fraction", "1", "--model", "B")
        assert code == 0 and "smallest p" in out


class TestRecallReports:
    def test_leaderboard_by_recall_w_with_plot(self, tmp_path: Path) -> None:
        """dahl leaderboard --metric recall_w --plot-recall: ranked by Rec^w (A 75.0), the PNG written."""
        run_dir = recall_run(tmp_path / "run")
        png = tmp_path / "pr.png"
        args = ["leaderboard", str(run_dir), "--metric", "recall_w"]
        if pytest.importorskip("matplotlib"):
            args += ["--plot-recall", str(png)]
        code, out = run(*args)
        assert code == 0, out
        assert "ranked by recall_w" in out and "| 1 | A | 88.9 |" in out and "| 66.7 | 75.0 | 72.2 | 76.2 | 78.6 | 2.0 |" in out
        assert "Rank uses recall_w; its 95% CIs: A 50.0–100.0" in out
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in out

    def test_recall_metric_without_refs_names_the_folder(self, tmp_path: Path) -> None:
        """--metric recall on a run scored without refs exits 2 with a message naming the run folder."""
        run_dir = recall_run(tmp_path / "no-refs-run", with_recall=False)
        code, out = run("leaderboard", str(run_dir), "--metric", "recall")
        assert code == 2
        assert out.startswith("error: recall needs recall, and ") and f"{run_dir} has none" in out

    def test_plot_recall_without_refs_is_refused_before_output(self, tmp_path: Path) -> None:
        """--plot-recall on a run without recall exits 2 and prints no board."""
        run_dir = recall_run(tmp_path / "plain", with_recall=False)
        code, out = run("leaderboard", str(run_dir), "--plot-recall", str(tmp_path / "pr.png"))
        assert code == 2 and "## Leaderboard" not in out and "plain has none" in out

    def test_pairs_by_f1_w(self, tmp_path: Path) -> None:
        """dahl pairs --metric f1_w writes 2 pairs: B1 over A1 on q1, A2 over the abstained B2 on q2."""
        run_dir = recall_run(tmp_path / "run")
        code, out = run("pairs", str(run_dir), "--metric", "f1_w", "-o", str(tmp_path / "p.jsonl"))
        assert code == 0 and out.startswith("2 pairs written")
        lines = [json.loads(x) for x in (tmp_path / "p.jsonl").read_text().splitlines()]
        assert sorted((x["chosen_id"], x["rejected_id"]) for x in lines) == [("A2", "B2"), ("B1", "A1")]
        assert {x["metric"] for x in lines} == {"f1_w"}
