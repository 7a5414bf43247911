"""What dahl score prints at the end of a run with recall: the Rec / Rec^w / F1 columns and the recall lines."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dahl.run._plan import AdapterSettings
from dahl.cli._summary import partial_message, print_summary, recall_lines, result_table
from dahl.run._score import ScoreConfig, ScoreReport, score
from tests.recall_runs import TWO_MODELS, answer_lines
from tests.test_cli_progress import render, wide_summary

#: The 80-column table of wide_summary() as the code before recall printed it.
BEFORE_80 = (
    "dahl scores (percent)                                                      \n"
    "┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━┓\n"
    "┃ model               ┃ answers ┃ scored ┃ DAHL Score ┃ FActScore ┃ F1@64 ┃\n"
    "┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━┩\n"
    "│ PerplexityAI-online │  12,345 │ 12,333 │       82.6 │      72.6 │  45.7 │\n"
    "│ gpt-4o-mini         │     183 │    171 │       61.8 │      51.8 │  45.7 │\n"
    "└─────────────────────┴─────────┴────────┴────────────┴───────────┴───────┘\n"
    "not shown at this width: no penalty, 95% CI, abstained, excluded (see      \n"
    "summary.json)                                                              \n"
)


def recall_block(rec: float | None, rec_w: float | None, f1: float | None, **extra: Any) -> dict[str, Any]:
    """A model's summary.json recall block (R/P/J contract keys), the rest of it zero."""
    return {"n": 120, "n_abstained": 9, "recall": rec, "recall_w": rec_w, "f1": f1, "rho": 25.0, "facts": 40.0,
            "null_by_reason": {"empty_fstar": 0, "zero_weight": 0, "coverage_error": 0, "split_error": 0, "no_refs": 0},
            **extra}


def with_recall() -> dict[str, Any]:
    summary = wide_summary()
    summary["models"]["PerplexityAI-online"]["recall"] = recall_block(0.492, 0.5134, 0.6126, f1_of_means=0.6099)
    summary["models"]["gpt-4o-mini"]["recall"] = recall_block(0.35, None, 0.4511)
    return summary


class TestRecallColumns:
    def test_wide_shows_rec_rec_w_f1(self) -> None:
        """At 170 columns Rec, Rec^w, mean F1 (of the per-answer F1) and F1 of means follow F1@64; a null is a dash."""
        text = render(result_table(with_recall(), 64, 170), 170)
        header = next(line for line in text.splitlines() if "model" in line)
        assert header.split("┃")[-6:-1] == [" F1@64 ", "  Rec ", " Rec^w ", " mean F1 ", " F1 of means "]
        assert "│  45.7 │ 49.2 │  51.3 │    61.3 │        61.0 │" in text
        assert "│  45.7 │ 35.0 │     — │    45.1 │           — │" in text
        assert "not shown" not in text

    def test_80_columns_keep_recall_and_name_what_went(self) -> None:
        """At 80 columns nothing is cut: recall stays, counts and F1@K go, named in the caption."""
        text = render(result_table(with_recall(), 64, 80), 80)
        assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
        for value in ("Rec", "Rec^w", "F1", "49.2", "51.3", "61.3", "82.6"):
            assert value in text, value
        assert "not shown at this width: no penalty, 95% CI, F1 of means, abstained, excluded," in text
        assert "answers, F1@64 (see summary.json)" in text

    def test_50_columns_drop_f1_then_rec_w(self) -> None:
        """At 50 columns F1 and Rec^w go after F1@K; Rec remains whole."""
        text = render(result_table(with_recall(), 64, 50), 50)
        assert "…" not in text and "Rec^w" not in text.split("not shown")[0] and "49.2" in text
        assert "F1@64, mean F1, Rec^w" in " ".join(text.split())

    def test_without_recall_the_table_is_as_before(self) -> None:
        """A run without recall prints exactly the table it printed before recall existed."""
        assert render(result_table(wide_summary(), 64, 80), 80) == BEFORE_80


class TestRecallLines:
    def test_recall_and_reason_lines(self) -> None:
        """Totals over models: 240 answers with recall, 18 abstained; nulls and unsupported reasons counted."""
        summary = with_recall()
        summary["models"]["gpt-4o-mini"]["recall"]["null_by_reason"].update(empty_fstar=3, no_refs=2)
        summary["models"]["gpt-4o-mini"]["unsupported_by_reason"] = {"contradicted": 4, "no_evidence": 1_200,
                                                                    "unstated": 0}
        assert recall_lines(summary) == [
            "recall: 240 answers with recall (18 abstained, counted 0); null: 3 empty F*, 2 no reference set",
            "unsupported claims by reason: 4 contradicted, 1,200 no evidence, 0 unstated",
        ]

    def test_refs_matching_no_answer_are_named(self) -> None:
        """When no answer found a reference set, a line says so and how sets are matched."""
        summary = with_recall()
        for block in summary["models"].values():
            block["recall"].update(n=0, n_abstained=0)
            block["recall"]["null_by_reason"]["no_refs"] = 5
        lines = recall_lines(summary)
        assert lines[0] == "recall: 0 answers with recall (0 abstained, counted 0); null: 10 no reference set"
        assert lines[1].startswith("warning: no answer's question matches a set of the reference facts")

    def test_no_lines_without_recall(self) -> None:
        """A summary without recall or reasons adds no line."""
        assert recall_lines(wide_summary()) == []


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> ScoreReport:
    """A real replay run of the two-model fixture."""
    base = tmp_path_factory.mktemp("summary")
    src = base / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in answer_lines(TWO_MODELS)))
    return score(ScoreConfig(inputs=(src,), out_dir=base / "out", fmt="jsonl", use_cache=False,
                             adapters=AdapterSettings(splitter="given", checker="replay")))


def printed(report: ScoreReport, out_dir: Path) -> str:
    console = Console(width=120, record=True, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
    print_summary(console, report, out_dir)
    console.file.close()
    return console.export_text()


class TestPrintSummary:
    def test_run_without_recall_prints_no_recall_line(self, report: ScoreReport, tmp_path: Path) -> None:
        """The replay run's summary lines have no recall line."""
        text = printed(report, tmp_path)
        assert "6 answers scored now" in text and "recall" not in text

    def test_run_with_recall_blocks_prints_the_line(self, report: ScoreReport, tmp_path: Path) -> None:
        """With the recall blocks the coverage stage adds, print_summary says how many answers have recall."""
        with_blocks = copy.deepcopy(report)
        with_blocks.summary["models"]["A"]["recall"] = recall_block(2 / 3, 3 / 4, 13 / 18, n=2, n_abstained=0)
        with_blocks.summary["models"]["B"]["recall"] = recall_block(1 / 2, 1 / 2, 1 / 3, n=2, n_abstained=1)
        with_blocks.summary["models"]["A"]["recall"]["null_by_reason"]["empty_fstar"] = 1
        with_blocks.summary["models"]["B"]["recall"]["null_by_reason"]["empty_fstar"] = 1
        text = printed(with_blocks, tmp_path)
        assert "recall: 4 answers with recall (1 abstained, counted 0); null: 2 empty F*" in text
        table = render(result_table(with_blocks.summary, 64, 120), 120)
        assert "│ 66.7 │  75.0 │    72.2 │" in table and "│ 50.0 │  50.0 │    33.3 │" in table


class TestPartialMessage:
    def test_coverage_errors_are_named_not_split_failures(self) -> None:
        """A run partial only because coverage judgements failed says so, not 'failed to split'."""
        summary = with_recall()
        summary["models"]["gpt-4o-mini"]["recall"]["null_by_reason"]["coverage_error"] = 6
        text = partial_message(summary, skipped=0)
        assert text == "coverage failed for 6 answers (exit status 6; re-running retries the errors)"

    def test_skipped_records_and_claim_errors(self) -> None:
        """Skipped records and claims in error are counted; only errors are retried."""
        summary = wide_summary()
        assert partial_message(summary, skipped=2) == "2 input records skipped (exit status 6)"
        summary["models"]["gpt-4o-mini"]["labels"] = {"error": 3}
        assert partial_message(summary, skipped=0) == "3 claims ended in error (exit status 6; re-running retries the errors)"
