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
from dahl.exit_status import ExitStatus


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


class _FaultThenHealthy:
    """``n`` answers scored against a mock with ``fault_args``, then again against a healthy one.

    The endpoint URL is part of the Checker's identity, so both servers share one port.
    """

    def __init__(self, tmp_path: Path, mocks: Any, n: int, *fault_args: str) -> None:
        self.answers = tmp_path / "answers.jsonl"
        self.out = tmp_path / "out"
        write_answers(self.answers, n)
        self.mocks = mocks
        self.port = free_port()
        self.fault_args = fault_args
        self.url = ""

    def faulty(self) -> tuple[int, str]:
        self.url = self.mocks.start(*self.fault_args, port=self.port)
        return score(self.answers, self.out, self.url)

    def healthy(self) -> tuple[int, str]:
        self.mocks.stop_all()
        self.url = self.mocks.start(port=self.port)
        return score(self.answers, self.out, self.url)

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in (self.out / "answers.jsonl").read_text().splitlines()]


class TestQuotaExhausted:
    def test_quota_stops_cleanly_and_rerun_continues(self, tmp_path: Path, mocks: Any) -> None:
        """insufficient_quota: exit 3 with a clear message; finished answers kept; a re-run checks only the rest."""
        run = _FaultThenHealthy(tmp_path, mocks, 200, "--fault", "quota=0.003", "--seed", "3")
        code, text = run.faulty()
        assert code == EXIT_QUOTA, text
        assert "quota" in text.lower() and "re-run" in text
        assert "Traceback" not in text
        done_first = run.lines()
        assert 0 < len(done_first) < 200
        # Answers on disk are complete: three verdicts each, none an error (the mock also says "unknown").
        assert [r["id"] for r in done_first if len(r["claims"]) != 3] == []
        assert [c for r in done_first for c in r["claims"] if c["label"] == "error"] == []

        code, text = run.healthy()
        assert code == 0, text
        final = run.lines()
        assert sorted(r["id"] for r in final) == sorted(f"a{i}" for i in range(200))
        # Only the claims of answers not finished before the stop are checked again, less
        # those whose verdicts reached the cache before the stop (at most a few answers' worth
        # with 4 requests in flight).
        unfinished = 3 * (200 - len(done_first))
        checks = mocks.stats(run.url)["check"]
        assert unfinished - 24 <= checks <= unfinished
        counted = json.loads((run.out / "summary.json").read_text())["run"]
        assert counted["claims_checked"] == checks
        assert counted["claims_checked"] + counted["claims_cached"] + counted["claims_deduped"] == unfinished


class TestErrorsAreRetried:
    def test_rerun_checks_claims_that_failed_again(self, tmp_path: Path, mocks: Any) -> None:
        """Claims labelled error (every reply off-format) are checked again by a re-run against a healthy server."""
        run = _FaultThenHealthy(tmp_path, mocks, 20, "--fault", "offformat=1")
        code, text = run.faulty()
        assert code == ExitStatus.PARTIAL, text
        first = run.lines()
        assert len(first) == 20 and all(r["counts"]["error"] == 3 for r in first)

        code, text = run.healthy()
        assert code == 0, text
        assert mocks.stats(run.url)["requests"] == 60  # 20 answers x 3 claims, none reused
        second = run.lines()
        assert sorted(r["id"] for r in second) == sorted(f"a{i}" for i in range(20))
        assert all(r["counts"]["error"] == 0 for r in second)
