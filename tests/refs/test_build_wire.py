"""dahl refs build from documents against the loopback mock: facts, importances, cache, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.exit_status import ExitStatus

CURIE = ("Marie Curie was a Polish-born physicist. She won the Nobel Prize in Physics in 1903. "
         "Marie Curie discovered polonium and radium.")
METFORMIN = "Metformin is a drug for type 2 diabetes. Metformin lowers glucose production in the liver."


def _files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"id": "curie", "title": "Marie Curie", "text": CURIE}) + "\n"
        + json.dumps({"id": "metformin", "title": "Metformin", "text": METFORMIN}) + "\n"
    )
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        json.dumps({"question_id": "q1", "question": "Who was Marie Curie?"}) + "\n"
        + json.dumps({"question_id": "q2", "question": "What did Marie Curie discover?", "doc_ids": ["curie"]}) + "\n"
        + json.dumps({"question_id": "q3", "question": "What is metformin used for?"}) + "\n"
    )
    return corpus, questions


def _build(url: str, questions: Path, out: Path, corpus: Path | None, *extra: str) -> tuple[int, str]:
    args = ["refs", "build", str(questions), "-o", str(out), "--docs-per-question", "1",
            "--extractor", "openai", "--rater", "openai", "--base-url", url, "--model", "mock",
            "--api-key-env", "", "--no-progress", *extra]
    if corpus is not None:
        args += ["--evidence", str(corpus)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def _sets(path: Path) -> dict[str, dict[str, Any]]:
    return {s["question_id"]: s for s in map(json.loads, path.read_text().splitlines())}


def _facts(ref_set: dict[str, Any]) -> list[tuple[str, int, int, float]]:
    return [(f["text"], f["relevance"], f["salience"], f["importance"]) for f in ref_set["facts"]]


# Hand-computed from the mock's rule (bench/mock_refs.py): relevance = 1 + shared words of
# >= 4 characters with the question, salience = 1 + words // 4, imp = (r-1)/8 + (s-1)/8.
CURIE_FACTS = [
    ("Marie Curie was a Polish-born physicist.", 3, 2, 0.375),  # marie, curie; 7 words
    ("She won the Nobel Prize in Physics in 1903.", 1, 3, 0.25),  # none; 9 words
    ("Marie Curie discovered polonium and radium.", 3, 2, 0.375),  # marie, curie; 6 words
]
METFORMIN_FACTS = [
    ("Metformin is a drug for type 2 diabetes.", 2, 3, 0.375),  # metformin; 8 words
    ("Metformin lowers glucose production in the liver.", 2, 2, 0.25),  # metformin; 7 words
]


class TestBuildWire:
    def test_facts_importances_and_one_extraction_per_document(self, mocks: Any, tmp_path: Path) -> None:
        """Three questions, two sharing a document: 2 extraction calls, 3 rating calls, exact importances."""
        url = mocks.start()
        corpus, questions = _files(tmp_path)
        out = tmp_path / "refs.jsonl"
        code, text = _build(url, questions, out, corpus)
        assert code == ExitStatus.OK, text
        assert "3 reference sets written" in text
        sets = _sets(out)
        assert _facts(sets["q1"]) == CURIE_FACTS
        assert _facts(sets["q2"]) == CURIE_FACTS  # "discover" is not "discovered": the same ratings
        assert _facts(sets["q3"]) == METFORMIN_FACTS
        assert sets["q1"]["facts"][0]["source"] == {"doc_id": "curie", "span": [0, len(CURIE)]}
        assert sets["q3"]["meta"]["documents"] == ["metformin"]
        assert (sets["q1"]["meta"]["alpha"], sets["q1"]["meta"]["beta"]) == (0.5, 0.5)
        assert mocks.stats(url)["kinds"] == {"extract": 2, "rate": 3}

    def test_unchanged_rerun_sends_no_request(self, mocks: Any, tmp_path: Path) -> None:
        """A second build of the same questions into a new file is served wholly from the cache."""
        url = mocks.start()
        corpus, questions = _files(tmp_path)
        assert _build(url, questions, tmp_path / "a.jsonl", corpus)[0] == ExitStatus.OK
        before = mocks.stats(url)["requests"]
        code, text = _build(url, questions, tmp_path / "b.jsonl", corpus)
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["requests"] == before == 5
        assert _sets(tmp_path / "a.jsonl") == _sets(tmp_path / "b.jsonl")  # lines in the order questions finish

    def test_resume_skips_written_questions(self, mocks: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A re-run keeps the sets written, drops a torn last line and builds only the rest."""
        url = mocks.start()
        corpus, questions = _files(tmp_path)
        full = tmp_path / "full.jsonl"
        assert _build(url, questions, full, corpus)[0] == ExitStatus.OK
        lines = full.read_text().splitlines(keepends=True)
        q1 = next(line for line in lines if '"q1"' in line)
        partial = tmp_path / "partial.jsonl"
        partial.write_text(q1 + '{"question_id":"q2","question":"What did')  # a kill mid-write
        monkeypatch.setenv("DAHL_CACHE_DIR", str(tmp_path / "fresh-cache"))  # no call comes from the cache
        mocks_before = mocks.stats(url)["kinds"]
        code, text = _build(url, questions, partial, corpus)
        assert code == ExitStatus.OK, text
        assert "2 reference sets written" in text and "1 already there" in text
        after = mocks.stats(url)["kinds"]
        assert (after["extract"] - mocks_before["extract"], after["rate"] - mocks_before["rate"]) == (2, 2)
        rebuilt = partial.read_text().splitlines(keepends=True)
        assert rebuilt[0] == q1 and len(rebuilt) == 3
        assert _sets(partial) == _sets(full)

    def test_count_mismatch_asks_each_fact_alone(self, mocks: Any, tmp_path: Path) -> None:
        """A batch reply missing a fact's rating: the three facts are re-asked one per call, none padded."""
        url = mocks.start()
        questions = tmp_path / "questions.jsonl"
        text = "Alpha binds beta receptors. The MOCKSKIP protein binds gamma. Delta inhibits epsilon kinase."
        questions.write_text(json.dumps({"question_id": "q", "question": "What binds beta receptors?",
                                         "documents": [{"id": "d", "text": text}]}) + "\n")
        out = tmp_path / "refs.jsonl"
        code, output = _build(url, questions, out, None)
        assert code == ExitStatus.OK, output
        assert mocks.stats(url)["kinds"] == {"extract": 1, "rate": 4}
        facts = _sets(out)["q"]["facts"]
        # "binds", "beta", "receptors" shared -> r = 4; 4 words -> s = 2; imp = 3/8 + 1/8
        assert [(f["relevance"], f["salience"], f["importance"]) for f in facts] == [
            (4, 2, 0.5), (2, 2, 0.25), (1, 2, 0.125)]

    def test_unparseable_replies_fail_the_question_only(self, mocks: Any, tmp_path: Path) -> None:
        """Replies that stay unparseable after the re-ask: the question is not written, exit status 6."""
        url = mocks.start("--fault", "offformat=1")
        corpus, questions = _files(tmp_path)
        lines = questions.read_text().splitlines(keepends=True)
        questions.write_text(lines[0] + lines[2])  # one question per document
        out = tmp_path / "refs.jsonl"
        code, text = _build(url, questions, out, corpus)
        assert code == ExitStatus.NOTHING_SCORED, text
        assert out.read_text() == ""
        assert mocks.stats(url)["kinds"] == {"extract": 4}  # 2 chunks x (ask + re-ask); nothing rated


class TestGranularity:
    def test_sentence_granularity_one_call_per_sentence(self, mocks: Any, tmp_path: Path) -> None:
        """--granularity sentence: the three sentences of the shared document are three calls; spans per sentence."""
        url = mocks.start()
        corpus, questions = _files(tmp_path)
        questions.write_text(questions.read_text().splitlines(keepends=True)[0])
        out = tmp_path / "refs.jsonl"
        code, text = _build(url, questions, out, corpus, "--granularity", "sentence")
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["kinds"] == {"extract": 3, "rate": 1}
        spans = [f["source"]["span"] for f in _sets(out)["q1"]["facts"]]
        assert spans == [[0, 40], [41, 84], [85, 128]]
        assert [CURIE[a:b] for a, b in spans] == [f[0] for f in CURIE_FACTS]


class TestInterrupt:
    def test_sigterm_keeps_written_sets_and_rerun_finishes(self, mocks: Any, tmp_path: Path) -> None:
        """Stopped mid-build: exit 130, every line written is a whole set; the re-run adds only the rest."""
        import signal
        import subprocess
        import sys
        import time

        from tests.conftest import REPO

        url = mocks.start("--latency-ms", "100")
        questions = tmp_path / "questions.jsonl"
        questions.write_text("".join(
            json.dumps({"question_id": f"q{n}", "question": f"What is compound {n}?",
                        "documents": [{"id": f"d{n}", "text": f"Compound {n} binds receptor {n}. It is stable."}]})
            + "\n" for n in range(40)))
        out = tmp_path / "refs.jsonl"
        args = [sys.executable, "-m", "dahl", "refs", "build", str(questions), "-o", str(out), "--extractor",
                "openai", "--base-url", url, "--model", "mock", "--api-key-env", "", "--max-in-flight", "2",
                "--no-progress"]
        proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60  # a guard against a hung child, not a measurement
        while not (out.exists() and out.stat().st_size > 0):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, err
        assert "interrupted." in err and "Traceback" not in err
        first = [json.loads(line)["question_id"] for line in out.read_text().splitlines()]
        assert 0 < len(first) < 40
        rerun = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == ExitStatus.OK, rerun.stderr
        assert f"{40 - len(first)} reference set" in rerun.stdout and "already there" in rerun.stdout
        ids = [json.loads(line)["question_id"] for line in out.read_text().splitlines()]
        assert sorted(ids) == sorted(f"q{n}" for n in range(40)) and ids[: len(first)] == first
