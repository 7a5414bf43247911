"""The temperature study on hand-made runs (given claims, replayed labels): cells, tests, outputs."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from scipy import stats  # type: ignore[import-untyped]

from dahl.cli import main
from dahl.cli._generate import parse_temperatures
from dahl.errors import ConfigError, InputError
from dahl.analysis._study import read_temperatures, temperature_study, to_markdown

S, U, N = "supported", "unsupported", "unknown"

# Per-answer labels of questions 0-3 at each temperature (one sample each). Precisions: 0.2 -> 1, 1,
# 0.5, 1 (mean 0.875, s² = 0.1875 / 3 = 0.0625); 0.6 -> 0.5, 0, 1, 0.5 (mean 0.5, s² = 0.5 / 3 = 1/6).
LABELS: dict[float, list[list[str]]] = {
    0.2: [[S, S], [S], [S, U], [S, S]],
    0.6: [[S, U], [U], [S], [U, S]],
}
# Paired t over the 4 questions: d = .5, 1, −.5, .5, mean .375, s²_d = 1.1875 / 3, se = sqrt(s²_d / 4).
T_HAND = 0.375 / math.sqrt(1.1875 / 3 / 4)


def _line(n: int, model: str, labels: list[str], temperature: float | None, question: int | None = None) -> dict[str, Any]:
    claims = [f"Claim {n}.{i} of {model}." for i in range(len(labels))]
    meta = {} if temperature is None else {"sampling": {"mode": "completion", "temperature": temperature}}
    return {"id": f"{model}-{n}", "model": model, "question": f"Question {n if question is None else question}?",
            "response": " ".join(claims), "claims": claims, "claim_labels": labels, "meta": meta}


def _run(tmp_path: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    """Score the LABELS answers of model 'm' (plus ``extra`` lines) with given claims and replayed labels."""
    lines = [_line(10 * int(10 * t) + i, "m", labels, t, question=i)
             for t, rows in LABELS.items() for i, labels in enumerate(rows)]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines + (extra or [])), encoding="utf-8")
    run = tmp_path / "run"
    result = CliRunner().invoke(main, ["score", str(answers), "--splitter", "given", "--checker", "replay",
                                       "-o", str(run), "--no-progress"])
    assert result.exit_code == 0, result.output
    return run


class TestTemperatureStudy:
    def test_cells_hold_the_hand_computed_means(self, tmp_path: Path) -> None:
        """Per temperature: n, the mean DAHL Score and sd are the hand-computed ones."""
        study = temperature_study(_run(tmp_path))
        got = [(c.model, c.temperature, c.n, c.excluded, c.questions, c.mean) for c in study.cells]
        assert got == [("m", 0.2, 4, 0, 4, 0.875), ("m", 0.6, 4, 0, 4, 0.5)]
        assert study.cells[0].sd == pytest.approx(0.25)
        assert study.cells[1].sd == pytest.approx(math.sqrt(1 / 6))
        assert study.best("m") is study.cells[0]

    def test_paired_t_against_the_reference(self, tmp_path: Path) -> None:
        """0.2 against 0.6 over the 4 shared questions: paired t = .375 / sqrt(1.1875 / 12), 3 degrees of freedom."""
        (test,) = temperature_study(_run(tmp_path)).tests
        assert (test.model, test.a, test.b, test.n_a, test.n_b, test.n_questions) == ("m", 0.2, 0.6, 4, 4, 4)
        assert test.mean_diff == pytest.approx(0.375)
        assert test.t_test == "paired t-test over questions"
        assert test.t_stat == pytest.approx(T_HAND)
        assert test.t_p == pytest.approx(2 * stats.t.sf(T_HAND, 3))

    def test_samples_of_a_question_count_once(self, tmp_path: Path) -> None:
        """5 samples of each of 3 questions: the test pairs the 3 question means (d = .5, .5, 0: t = 2, df 2,
        p 0.18), not 15 answers against 15 (Student's t 5.3 on 28 degrees of freedom, p ≈ 1e-5); the cell has 15 answers, 3 questions."""
        labels = {0.2: [[S], [S], [S, U]], 0.6: [[S, U], [S, U], [S, U]]}
        lines = [_line(100 * int(10 * t) + 10 * q + k, "m", labels[t][q], t, question=q)
                 for t in labels for q in range(3) for k in range(5)]
        answers = tmp_path / "samples.jsonl"
        answers.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        run = tmp_path / "run"
        assert CliRunner().invoke(main, ["score", str(answers), "--splitter", "given", "--checker", "replay",
                                         "-o", str(run), "--no-progress"]).exit_code == 0
        study = temperature_study(run)
        assert [(c.n, c.questions) for c in study.cells] == [(15, 3), (15, 3)]
        (test,) = study.tests
        assert (test.n_a, test.n_b, test.n_questions) == (15, 15, 3)
        assert test.t_stat == pytest.approx(2.0) and test.t_p == pytest.approx(2 * stats.t.sf(2.0, 2))
        assert test.t_p > 0.05
        text = to_markdown(study)
        assert "mean of the question means; 95% bootstrap CI over questions" in text
        assert "## Paired t-test over questions" in text and "| m | 0.2 | 0.6 | 15 | 15 | 3 | +33.3 | 2 | 0.184 |" in text

    def test_excluded_and_untagged_answers(self, tmp_path: Path) -> None:
        """An answer with an unknown claim is excluded from its cell; one with no temperature is left out."""
        run = _run(tmp_path, [_line(90, "m", [S, N], 0.2), _line(91, "m", [S], None)])
        study = temperature_study(run)
        assert (study.cells[0].n, study.cells[0].excluded, study.cells[0].mean) == (4, 1, 0.875)
        assert study.without_temperature == 1
        assert "1 answers without meta.sampling.temperature were left out." in to_markdown(study)

    def test_zero_variance_gives_no_test_values(self, tmp_path: Path) -> None:
        """A model whose answers all score 1: its F and t are undefined (None), not NaN."""
        extra = [_line(80 + 3 * int(10 * t) + i, "flat", [S], t, question=i) for t in (0.2, 0.6) for i in range(3)]
        study = temperature_study(_run(tmp_path, extra))
        flat = [t for t in study.tests if t.model == "flat"]
        assert [(t.n_questions, t.t_test, t.t_stat) for t in flat] == [(3, None, None)]
        assert [c.mean for c in study.cells if c.model == "flat"] == [1.0, 1.0]

    def test_missing_reference_is_refused(self, tmp_path: Path) -> None:
        """--compare reference with a temperature the run lacks: a ConfigError naming both."""
        with pytest.raises(ConfigError, match=r"reference temperature 0.4 is not among m's \(0.2, 0.6\)"):
            temperature_study(_run(tmp_path), reference=0.4)

    def test_run_without_temperatures_is_refused(self, tmp_path: Path) -> None:
        """Answers that were not generated with a temperature: a ConfigError saying how to make them."""
        answers = tmp_path / "a.jsonl"
        answers.write_text(json.dumps(_line(1, "m", [S], None)) + "\n")
        run = tmp_path / "run"
        assert CliRunner().invoke(main, ["score", str(answers), "--splitter", "given", "--checker", "replay",
                                         "-o", str(run), "--no-progress"]).exit_code == 0
        with pytest.raises(ConfigError, match="dahl generate --temperatures"):
            temperature_study(run)


class TestReadTemperatures:
    def test_bad_temperature_names_file_line_and_field(self, tmp_path: Path) -> None:
        """A temperature that is not a number: InputError with the file, the line and the JSON path."""
        path = tmp_path / "answers.jsonl"
        path.write_text('{"id": "a", "meta": {"sampling": {"temperature": 0.2}}}\n{"id": "b", "meta": {}}\n'
                        '{"id": "c", "meta": {"sampling": {"temperature": "hot"}}}\n')
        with pytest.raises(InputError) as info:
            read_temperatures(path)
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 3, "$.meta.sampling.temperature")

    def test_answers_without_temperature_are_left_out(self, tmp_path: Path) -> None:
        """Only answers recording meta.sampling.temperature are mapped."""
        path = tmp_path / "answers.jsonl"
        path.write_text('{"id": "a", "meta": {"sampling": {"temperature": 0.2}}}\n\n{"id": "b"}\n')
        assert read_temperatures(path) == {"a": 0.2}


class TestStudyCommand:
    def test_writes_tables_json_and_plot(self, tmp_path: Path) -> None:
        """dahl study temperature: Markdown printed and written, 2 cell rows, 1 test row, JSON, a PNG."""
        out = tmp_path / "study"
        result = CliRunner().invoke(main, ["study", "temperature", str(_run(tmp_path)), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert "| m | 0.2 | 87.5 |" in result.output and "| m | 0.6 | 50.0 |" in result.output
        cells = list(csv.DictReader(io.StringIO((out / "temperature.csv").read_text())))
        assert [(r["temperature"], r["n"], r["questions"], r["mean"]) for r in cells] == [("0.2", "4", "4", "0.875"),
                                                                                         ("0.6", "4", "4", "0.5")]
        tests = list(csv.DictReader(io.StringIO((out / "temperature_tests.csv").read_text())))
        assert [(r["a"], r["b"], r["n_questions"], r["mean_diff"], r["t_test"]) for r in tests] == [
            ("0.2", "0.6", "4", "0.375", "paired t-test over questions")]
        data = json.loads((out / "temperature.json").read_text())
        assert data["best"] == {"m": 0.2} and data["compare"] == "reference" and data["reference"] == 0.6
        assert (out / "temperature.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def test_adjacent_pairs_and_no_plot(self, tmp_path: Path) -> None:
        """--compare adjacent tests neighbours (no reference needed); --no-plot writes no PNG."""
        out = tmp_path / "study"
        result = CliRunner().invoke(main, ["study", "temperature", str(_run(tmp_path)), "-o", str(out),
                                           "--compare", "adjacent", "--reference", "0.4", "--no-plot"])
        assert result.exit_code == 0, result.output
        assert json.loads((out / "temperature.json").read_text())["reference"] is None
        assert not (out / "temperature.png").exists()

    def test_missing_reference_exits_2(self, tmp_path: Path) -> None:
        """A reference the run lacks: one error line, exit status 2, nothing written."""
        out = tmp_path / "study"
        result = CliRunner().invoke(main, ["study", "temperature", str(_run(tmp_path)), "-o", str(out),
                                           "--reference", "0.4"])
        assert result.exit_code == 2
        assert "error: reference temperature 0.4 is not among" in result.output
        assert not out.exists()


class TestTemperaturesOption:
    def test_parse_keeps_the_order(self) -> None:
        """The comma list becomes floats in the order given."""
        assert parse_temperatures("0.6,0.1, 1") == (0.6, 0.1, 1.0)

    @pytest.mark.parametrize(("text", "message"), [
        ("0.2,x", "'x' is not a number"),
        ("0.2,0.20", "0.2 is given twice"),
        ("0.2,nan", "'nan' is not a finite number"),
    ], ids=["not-a-number", "twice", "nan"])
    def test_parse_refuses(self, text: str, message: str) -> None:
        """A bad item is a ConfigError naming it."""
        with pytest.raises(ConfigError, match=message):
            parse_temperatures(text)

    def test_temperature_and_temperatures_exclude_each_other(self, tmp_path: Path) -> None:
        """--temperature with --temperatures: a usage error (exit 2), before any request."""
        questions = tmp_path / "q.csv"
        questions.write_text("question,category\nWhat is X?,a\n")
        result = CliRunner().invoke(main, ["generate", str(questions), "--model", "m", "--base-url",
                                           "http://127.0.0.1:9/v1", "-o", str(tmp_path / "a.jsonl"),
                                           "--temperature", "0.3", "--temperatures", "0.2,0.6"])
        assert result.exit_code == 2
        assert "give --temperature or --temperatures, not both" in result.output
        assert not (tmp_path / "a.jsonl").exists()
