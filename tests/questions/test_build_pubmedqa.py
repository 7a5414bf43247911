"""dahl questions build on the 1,000 PubMedQA abstracts against the mock: resume after SIGKILL, determinism."""

from __future__ import annotations

import collections
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.request import Request, urlopen

from click.testing import CliRunner

from dahl.cli import main
from dahl.exit_status import ExitStatus
from tests.conftest import REPO, require_data


def _articles(tmp_path: Path) -> Path:
    data = json.loads(require_data("pubmedqa/ori_pqal.json").read_text())
    path = tmp_path / "articles.jsonl"
    with path.open("w") as handle:
        for pmid, record in data.items():
            handle.write(json.dumps({"id": pmid, "title": record["QUESTION"], "text": " ".join(record["CONTEXTS"])})
                         + "\n")
    return path


def _args(url: str, articles: Path, out: Path, *extra: str) -> list[str]:
    return ["questions", "build", str(articles), "-o", str(out), "--per-article", "3", "--base-url", url,
            "--model", "mock", "--api-key-env", "", "--no-progress", "--max-in-flight", "8", *extra]


def _reset(url: str) -> None:
    urlopen(Request(url.removesuffix("/v1") + "/stats/reset", method="POST")).close()


def _complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


class TestPubMedQA:
    def test_sigkill_resume_determinism_and_flag_report(self, mocks: Any, tmp_path: Path) -> None:
        """Killed mid-build, a re-run sends only the unfinished articles; the CSV equals an uninterrupted build's."""
        url = mocks.start()
        articles = _articles(tmp_path)
        out = tmp_path / "killed" / "questions.csv"
        out.parent.mkdir()
        journal = out.with_name("questions.csv.journal.jsonl")
        proc = subprocess.Popen([sys.executable, "-m", "dahl", *_args(url, articles, out, "--no-cache")], cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        while _complete_lines(journal) < 200 and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done = _complete_lines(journal)
        assert 200 <= done < 1000 and not out.exists()
        _reset(url)
        result = CliRunner().invoke(main, _args(url, articles, out, "--no-cache"), catch_exceptions=False)
        assert result.exit_code == ExitStatus.OK, result.output
        assert mocks.stats(url)["kinds"]["questions"] == 1000 - done  # no finished article sent again
        assert f"{done:,} articles already done" in result.output

        _reset(url)
        again = tmp_path / "again.csv"
        result = CliRunner().invoke(main, _args(url, articles, again), catch_exceptions=False)
        assert result.exit_code == ExitStatus.OK, result.output
        assert again.read_bytes() == out.read_bytes()  # deterministic, whatever order calls finished in
        assert mocks.stats(url)["kinds"]["questions"] == 1000

        _reset(url)
        kept = tmp_path / "kept.csv"
        result = CliRunner().invoke(main, _args(url, articles, kept, "--keep-flagged"), catch_exceptions=False)
        assert mocks.stats(url)["requests"] == 0  # every call from the cache
        with kept.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) == 3000
        tally = collections.Counter(f for row in rows for f in row["flags"].split(";") if f)
        # every flag counted in the report, as the rows carry it; the judge's come from the mock's rule
        for flag, n in tally.items():
            assert f"  {flag}: {n:,}\n" in result.output
        assert (tally["needs_article"], tally["ambiguous"]) == (262, 103)
        unflagged = [row["question"] for row in rows if not row["flags"]]
        with again.open(newline="") as handle:
            assert [row["question"] for row in csv.DictReader(handle)] == unflagged  # dropped by default
