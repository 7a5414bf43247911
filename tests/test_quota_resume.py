"""Quota exhaustion stops the run cleanly; a re-run continues without redoing finished answers.

``mocks`` is tests/conftest.py's MockServers fixture.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dahl.cli import EXIT_QUOTA, main


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_answers(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            claims = [{"text": f"Drug {i} lowers marker {j}."} for j in range(3)]
            f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i} do?",
                                "response": " ".join(c["text"] for c in claims), "claims": claims}) + "\n")


def score(answers: Path, out: Path, url: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [
        "score", str(answers), "-o", str(out), "--splitter", "given", "--checker", "openai",
        "--base-url", url, "--model", "mock", "--api-key-env", "", "--max-in-flight", "4", "--no-progress",
    ])
    return result.exit_code, result.output


class TestQuotaExhausted:
    def test_quota_stops_cleanly_and_rerun_continues(self, tmp_path: Path, mocks: Any) -> None:
        """insufficient_quota: exit 3 with a clear message; finished answers kept; a re-run checks only the rest."""
        answers = tmp_path / "answers.jsonl"
        out = tmp_path / "out"
        write_answers(answers, 200)
        port = free_port()
        # The endpoint URL is part of the Checker's identity, so both servers share one port.
        failing = mocks.start("--fault", "quota=0.003", "--seed", "3", port=port)
        code, text = score(answers, out, failing)
        assert code == EXIT_QUOTA, text
        assert "quota" in text.lower() and "re-run" in text
        assert "Traceback" not in text
        done_first = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert 0 < len(done_first) < 200
        # Answers on disk are complete: three verdicts each, none an error (the mock also says "unknown").
        assert [r["id"] for r in done_first if len(r["claims"]) != 3] == []
        assert [c for r in done_first for c in r["claims"] if c["label"] == "error"] == []

        mocks.stop_all()
        healthy = mocks.start(port=port)
        code, text = score(answers, out, healthy)
        assert code == 0, text
        final = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in final) == sorted(f"a{i}" for i in range(200))
        # Only the claims of answers not finished before the stop are checked again, less
        # those whose verdicts reached the cache before the stop (at most a few answers' worth
        # with 4 requests in flight).
        unfinished = 3 * (200 - len(done_first))
        checks = mocks.stats(healthy)["check"]
        assert unfinished - 24 <= checks <= unfinished
        run = json.loads((out / "summary.json").read_text())["run"]
        assert run["claims_checked"] == checks
        assert run["claims_checked"] + run["claims_cached"] + run["claims_deduped"] == unfinished


class TestErrorsAreRetried:
    def test_rerun_checks_claims_that_failed_again(self, tmp_path: Path, mocks: Any) -> None:
        """Claims labelled error (every reply off-format) are checked again by a re-run against a healthy server."""
        answers = tmp_path / "answers.jsonl"
        out = tmp_path / "out"
        write_answers(answers, 20)
        port = free_port()
        broken = mocks.start("--fault", "offformat=1", port=port)
        code, text = score(answers, out, broken)
        assert code == 0, text
        first = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert len(first) == 20 and all(r["counts"]["error"] == 3 for r in first)

        mocks.stop_all()
        healthy = mocks.start(port=port)
        code, text = score(answers, out, healthy)
        assert code == 0, text
        assert mocks.stats(healthy)["requests"] == 60  # 20 answers x 3 claims, none reused
        second = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in second) == sorted(f"a{i}" for i in range(20))
        assert all(r["counts"]["error"] == 0 for r in second)
