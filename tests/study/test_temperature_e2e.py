"""The temperature study end to end against the loopback mock: dahl sample -> dahl generate
--temperatures -> dahl score (evidence Checker over the mock's fact corpus) -> dahl study temperature."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.mock_generate import FACTS, fact_corpus, false_probability, generated_text
from dahl.cli import main
from dahl.analysis._plots import POINTS_KEY
from tests.conftest import MockServers, require_data

TEMPERATURES = (0.2, 0.6, 1.0)
SAMPLES = 5


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class TestMockTemperature:
    def test_false_probability_rises_with_temperature(self) -> None:
        """p(false sentence) = 0.05 + 0.45 T + the model's offset: 0.45 more from T 0 to T 1."""
        assert false_probability(1.0, "m") - false_probability(0.0, "m") == pytest.approx(0.45)
        assert 0.05 <= false_probability(0.0, "m") <= 0.13

    def test_answer_is_three_chosen_facts_said_truly_or_falsely(self) -> None:
        """Same request, same text; the 3 facts are chosen by (model, question), temperature and
        seed only decide which are said falsely."""
        assert generated_text("Why?", "m", None, temperature=0.6, seed=3) == \
            generated_text("Why?", "m", None, temperature=0.6, seed=3)
        texts = {generated_text("Why?", "m", None, temperature=t, seed=s) for t in (0.0, 2.0) for s in range(20)}
        said = {sentence + "." for text in texts for sentence in text.rstrip(".").split(". ")}
        chosen = [pair for pair in FACTS if set(pair) & said]
        assert len(chosen) == 3 and said <= {s for pair in chosen for s in pair}

    def test_share_of_false_sentences_follows_the_temperature(self) -> None:
        """Over 200 questions x 3 sentences, the false share is near p(T): 0.45 apart from T 0 to T 1."""
        false = {f for _, f in FACTS}

        def share(t: float) -> float:
            said = [s + "." for n in range(200)
                    for s in generated_text(f"Question {n}?", "m", None, temperature=t, seed=0).rstrip(".").split(". ")]
            return sum(s in false for s in said) / len(said)

        low, high = share(0.0), share(1.0)
        assert abs(low - false_probability(0.0, "m")) < 0.05 and abs(high - false_probability(1.0, "m")) < 0.07

    def test_corpus_holds_the_true_sentences(self) -> None:
        """The evidence corpus is one document per true sentence."""
        assert [doc["text"] for doc in fact_corpus()] == [true for true, _ in FACTS]


class TestTemperatureStudyEndToEnd:
    def test_sample_generate_score_study(self, mocks: MockServers, tmp_path: Path) -> None:
        """A 10 % category sample at 3 temperatures x 5 samples: one request per answer, the
        table's rows, the question-level paired t statistics scipy recomputes from answers.jsonl, and the PNG."""
        from scipy import stats  # type: ignore[import-untyped]

        source = require_data("dahl/questions.csv")
        head = tmp_path / "questions.csv"
        head.write_text("".join(source.read_text(encoding="utf-8").splitlines(keepends=True)[:301]), encoding="utf-8")
        sample = tmp_path / "sample.csv"
        result = _invoke("sample", str(head), "--fraction", "0.1", "--stratify", "category", "-o", str(sample))
        assert "30 of 300 rows written" in result.output
        with sample.open(encoding="utf-8", newline="") as handle:
            unique = {row["question"] for row in csv.DictReader(handle)}
        assert len(unique) == 29  # the first 300 rows repeat one of the sampled questions

        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        _invoke("generate", str(sample), "--model", "base", "--base-url", url, "-o", str(answers),
                "--api-key-env", "", "--no-progress", "--samples", str(SAMPLES), "--seed", "0",
                "--temperatures", ",".join(map(str, TEMPERATURES)))
        stats_ = mocks.stats(url)
        assert (stats_["requests"], stats_["kinds"]) == (435, {"generate": 435})  # 29 x 3 x 5
        generated = _lines(answers)
        assert len({a["id"] for a in generated}) == 435
        assert sorted({a["meta"]["sampling"]["temperature"] for a in generated}) == list(TEMPERATURES)

        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(doc) + "\n" for doc in fact_corpus()), encoding="utf-8")
        run = tmp_path / "run"
        _invoke("score", str(answers), "--splitter", "rules", "--checker", "evidence", "--evidence", str(corpus),
                "-o", str(run), "--no-progress")
        out = tmp_path / "study"
        printed = _invoke("study", "temperature", str(run), "-o", str(out)).output

        # Recompute every figure from the scored answers: each question's mean over its samples per temperature.
        scores: dict[float, dict[str, list[float]]] = {t: {} for t in TEMPERATURES}
        for line in _lines(run / "answers.jsonl"):
            counts = line["counts"]
            if line["status"] == "scored" and counts["unknown"] + counts["error"] == 0 \
                    and counts["supported"] + counts["unsupported"] > 0:
                temperature = line["meta"]["sampling"]["temperature"]
                scores[temperature].setdefault(line["question_id"], []).append(line["metrics"]["precision"])
        q_means = {t: {q: sum(v) / len(v) for q, v in by_q.items()} for t, by_q in scores.items()}
        data = json.loads((out / "temperature.json").read_text())
        cells = {c["temperature"]: c for c in data["cells"]}
        assert [cells[t]["n"] + cells[t]["excluded"] for t in TEMPERATURES] == [145, 145, 145]
        for t in TEMPERATURES:
            assert cells[t]["n"] == sum(map(len, scores[t].values()))
            assert cells[t]["questions"] == len(q_means[t])
            assert cells[t]["mean"] == pytest.approx(sum(q_means[t].values()) / len(q_means[t]), rel=1e-12)
        means = [cells[t]["mean"] for t in TEMPERATURES]
        assert means == sorted(means, reverse=True) and means[0] - means[2] > 0.2  # more false sentences
        assert [(t["a"], t["b"]) for t in data["tests"]] == [(0.2, 0.6), (1.0, 0.6)]
        assert data["unit"].startswith("question: each question's mean over its samples")
        for test in data["tests"]:
            shared = sorted(q_means[test["a"]].keys() & q_means[test["b"]].keys())
            a = [q_means[test["a"]][q] for q in shared]
            b = [q_means[test["b"]][q] for q in shared]
            t_res = stats.ttest_rel(a, b)
            assert (test["n_questions"], test["t_test"]) == (len(shared), "paired t-test over questions")
            assert len(shared) <= 29  # the questions, not the 145 answers
            assert test["t_stat"] == pytest.approx(float(t_res.statistic), rel=1e-9)
            assert test["t_p"] == pytest.approx(float(t_res.pvalue), rel=1e-9)

        rows = list(csv.DictReader(io.StringIO((out / "temperature.csv").read_text())))
        assert [(r["model"], r["temperature"]) for r in rows] == [("base", "0.2"), ("base", "0.6"), ("base", "1.0")]
        assert printed.count("\n| base | ") == 3 + 2  # 3 score rows, 2 test rows
        png = out / "temperature.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        image = pytest.importorskip("PIL.Image")
        with image.open(png) as im:
            points = json.loads(im.text[POINTS_KEY])
        assert [(p["temperature"], p["mean"]) for p in points] == [(t, cells[t]["mean"]) for t in TEMPERATURES]
