"""What ``dahl score`` shows: progress with a total, percent and ETA, plain log lines, 80 columns, counts.

``mocks`` is tests/conftest.py's MockServers fixture.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from dahl.cli import main
from dahl.cli._progress import Meter, ProgressLine, Snapshot, count, count_records, duration
from dahl.cli._summary import result_table
from dahl.results._counters import RunCounters
from dahl.lanes._lane import LaneStatistics
from dahl.exit_status import ExitStatus
from dahl.formats import Records

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def write_answers(path: Path, n: int, *, claims: int = 3, extra: list[str] | None = None) -> None:
    with path.open("w") as f:
        for i in range(n):
            cs = [{"text": f"Drug {i} lowers marker {j}."} for j in range(claims)]
            f.write(json.dumps({"id": f"a{i}", "model": "m", "question": f"What does drug {i} do?",
                                "response": " ".join(c["text"] for c in cs), "claims": cs}) + "\n")
        for line in extra or []:
            f.write(line + "\n")


def render(renderable: object, width: int = 80) -> str:
    console = Console(width=width, record=True, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
    console.print(renderable)
    text = console.export_text()
    console.file.close()
    return text


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestCount:
    @pytest.mark.parametrize(
        ("n", "noun", "plural", "expected"),
        [
            (0, "answer", None, "0 answers"),
            (1, "answer", None, "1 answer"),
            (2, "claim", None, "2 claims"),
            (1_234_567, "request", None, "1,234,567 requests"),
            (1, "retry", "retries", "1 retry"),
            (3, "retry", "retries", "3 retries"),
        ],
        ids=["zero", "one", "two", "millions", "irregular-one", "irregular-many"],
    )
    def test_plural_and_separators(self, n: int, noun: str, plural: str | None, expected: str) -> None:
        """Counts take thousands separators and the noun agrees with the number."""
        assert count(n, noun, plural) == expected

    @pytest.mark.parametrize(
        ("seconds", "expected"), [(0, "0s"), (44.2, "45s"), (190, "3m10s"), (7500, "2h05m")],
        ids=["zero", "rounded-up", "minutes", "hours"],
    )
    def test_duration(self, seconds: float, expected: str) -> None:
        """Durations are short and round up (an ETA never says 0s while work is left)."""
        assert duration(seconds) == expected


class TestCountRecords:
    def test_jsonl_skips_blank_lines(self, tmp_path: Path) -> None:
        """JSON Lines count non-blank lines, bad ones included (the reader rejects, and counts, them)."""
        path = tmp_path / "a.jsonl"
        write_answers(path, 3, extra=["", "   ", '{"question": "q", "response": ""}'])
        assert count_records([path], "auto") == 4

    def test_csv_counts_rows_not_lines(self, tmp_path: Path) -> None:
        """A CSV row with a quoted newline is one record; the header is not one."""
        path = tmp_path / "a.csv"
        path.write_text('question,category,response\nq1,c,"two\nlines"\nq2,c,one\n\n')
        assert count_records([path], "csv") == 2

    def test_several_files_add_up(self, tmp_path: Path) -> None:
        """The total is over every input."""
        for name, n in (("a.jsonl", 2), ("b.jsonl", 5)):
            write_answers(tmp_path / name, n)
        assert count_records([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], "jsonl") == 7

    def test_stops_when_asked(self, tmp_path: Path) -> None:
        """A set stop flag (the run ended first) gives None instead of reading on."""
        write_answers(tmp_path / "a.jsonl", 2)
        stop = threading.Event()
        stop.set()
        assert count_records([tmp_path / "a.jsonl"], "jsonl", stop) is None

    def test_compressed_files_are_counted_decompressed(self, tmp_path: Path) -> None:
        """A .jsonl.gz counts its decompressed lines (its compressed bytes hold no such lines)."""
        write_answers(tmp_path / "a.jsonl", 3)
        (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress((tmp_path / "a.jsonl").read_bytes()))
        assert count_records([tmp_path / "a.jsonl.gz"], "auto") == 3

    def test_a_json_array_leaves_the_total_unknown(self, tmp_path: Path) -> None:
        """A JSON array of 3 records on one line is not 1 record: the total is unknown, not wrong."""
        path = tmp_path / "a.json"
        path.write_text(json.dumps([{"question": f"q{i}?", "response": "r."} for i in range(3)]))
        assert count_records([path], "auto") is None

    def test_a_stream_is_not_counted(self, tmp_path: Path) -> None:
        """A FIFO (or ``-``) can be read once, by the run: the counter leaves it alone and the total is unknown."""
        fifo = tmp_path / "in.fifo"
        os.mkfifo(fifo)
        write_answers(tmp_path / "a.jsonl", 2)
        assert count_records([tmp_path / "a.jsonl", fifo], "jsonl") is None  # returns without opening the FIFO
        assert count_records([Path("-")], "auto") is None

    def test_records_count_by_length(self, tmp_path: Path) -> None:
        """In-memory records (the Python API) add their number of items, bad ones included."""
        write_answers(tmp_path / "a.jsonl", 2)
        records = Records([{"question": "q?", "response": "r."}, {"question": "q?"}, {"question": "p?", "response": "s."}])
        assert count_records([tmp_path / "a.jsonl", records], "auto") == 5


class TestMeter:
    def test_resumed_count_as_done_rate_from_this_run(self) -> None:
        """900 resumed + 10 scored in 10 s of 1,000: 91% done, 90 left at 1/s is an ETA of 1m30s."""
        clock = FakeClock(10.0)
        counters = RunCounters(started_at=0.0, answers_resumed=900, answers_done=10, claims_done=40)
        meter = Meter(counters, clock=clock)
        meter.total = 1000
        s = meter.snapshot()
        assert (s.done, s.fraction, s.eta_s, s.claims_per_s) == (910, 0.91, 90.0, 4.0)
        assert s.plain() == ("progress: 91% · 910/1,000 answers · 4 claims/s · ETA 1m30s · 0 in flight · "
                             "0 errors · 0:00:10")

    def test_rate_from_the_recent_window(self) -> None:
        """After a slow start (10 in 60 s), 50 answers in the last 30 s set the rate: 1.67/s."""
        clock = FakeClock(0.0)
        counters = RunCounters(started_at=0.0)
        meter = Meter(counters, clock=clock, window_s=30.0)
        meter.total = 1000
        for t, done in ((30.0, 5), (60.0, 10), (90.0, 60)):
            clock.now, counters.answers_done = t, done
            s = meter.snapshot()
        assert s.eta_s == pytest.approx((1000 - 60) / (50 / 30))

    def test_no_total_yet(self) -> None:
        """Until the input is counted there is no percent and no ETA, only the count."""
        meter = Meter(RunCounters(started_at=0.0, answers_done=3), clock=FakeClock(1.0))
        fields = [text for _, text in meter.snapshot().fields()]
        assert fields[0] == "3 answers" and not any("%" in f or "ETA" in f for f in fields)

    def test_bar_and_summary_count_the_same_errors(self) -> None:
        """A split error (too long) and a bad record are 2 errors on the bar, as in the summary's total."""
        counters = RunCounters(started_at=0.0, input_errors=1)
        counters.errors["ResponseTooLong"] += 1
        s = Meter(counters, clock=FakeClock(1.0)).snapshot()
        assert s.errors == counters.error_count() == 2

    def test_in_flight_from_the_lanes(self) -> None:
        """With lanes, the bar shows the lanes' sent requests and their queue, not the check workers."""
        stats = LaneStatistics(in_flight=29, waiting=35, requests=1000, successes=990, retries=3, rate_limited=12,
                               transient_errors=0, fatal_errors=0, tokens_reserved=0, tokens_used=1_234_567,
                               paused_until=None, rpm=None, tpm=None)
        counters = RunCounters(started_at=0.0, checks_in_flight=64)
        counters.lane_statistics = lambda: {"check": stats}
        line = Meter(counters, clock=FakeClock(100.0)).snapshot().plain()
        assert "29 in flight · 35 queued" in line and "64" not in line
        assert "10.0 req/s · 12 × 429 · 3 retries · 1,234,567 tokens" in line

    def test_cached_prompt_tokens_follow_the_tokens(self) -> None:
        """Prompt tokens the metered stages read from the provider's cache are shown after the tokens."""
        assert "1,234 × 429 · 56 retries · 12,345,678 tokens · 6,000 cached · " in busy_snapshot(
            cached_tokens=6_000).plain()
        assert "cached" not in busy_snapshot().plain()


def busy_snapshot(**kw: Any) -> Snapshot:
    values: dict[str, Any] = dict(done=12_345, total=27_000, claims_per_s=1_234.4, eta_s=190.0, in_flight=64, queued=35,
                                  errors=2, elapsed_s=3723.0, http=(175.1, 1_234, 56, 12_345_678))
    values.update(kw)
    return Snapshot(**values)


class TestProgressLine:
    def test_fits_80_columns_without_cutting(self) -> None:
        """At 80 columns the line keeps percent, counts, ETA, in flight and errors whole, and drops the rest."""
        text = render(ProgressLine(busy_snapshot()), 80)
        line = text.rstrip("\n")
        assert "\n" not in line and len(line) <= 80
        assert "…" not in text
        for value in ("45%", "12,345/27,000 answers", "ETA 3m10s", "64 in flight", "2 errors"):
            assert value in line
        fields = [t for t in line.removeprefix("scoring ").split(" · ")]
        assert all(f.strip() in {t for _, t in busy_snapshot().fields()} or "━" in f for f in fields)

    def test_wide_terminal_shows_everything_and_a_bar(self) -> None:
        """At 200 columns every field is shown, with a bar."""
        line = render(ProgressLine(busy_snapshot()), 200)
        for _, field in busy_snapshot().fields():
            assert field in line
        assert "━" in line

    @pytest.mark.parametrize("width", [40, 60, 80, 100, 120])
    def test_never_wider_than_the_console(self, width: int) -> None:
        """Whatever the width (down to 40), the line is one line and no field is cut."""
        text = render(ProgressLine(busy_snapshot()), width)
        line = text.rstrip("\n")
        assert "\n" not in line and len(line) <= width and "…" not in text


def wide_summary() -> dict[str, Any]:
    def model(n: int, score: float) -> dict[str, Any]:
        return {"n_answers": n, "n_scored": n - 12, "n_abstained": 7, "n_excluded": 5, "dahl_score": score,
                "dahl_score_ci": [score - 0.0123, score + 0.0111], "factscore": score - 0.1, "factscore_init": score - 0.02,
                "f1_at_k": 0.4567}
    return {"models": {"PerplexityAI-online": model(12_345, 0.826), "gpt-4o-mini": model(183, 0.618)}}


class TestResultTable:
    def test_80_columns_cut_nothing(self) -> None:
        """At 80 columns no header or number is cut: lower-priority columns go, named in a caption."""
        text = render(result_table(wide_summary(), 64, 80), 80)
        assert "…" not in text
        assert all(len(line) <= 80 for line in text.splitlines())
        for value in ("PerplexityAI-online", "gpt-4o-mini", "12,345", "12,333", "82.6", "72.6", "61.8", "51.8",
                      "DAHL Score", "FActScore", "F1@64", "45.7"):
            assert value in text, value
        assert "not shown at this width: no penalty, 95% CI" in text

    def test_wide_shows_every_column(self) -> None:
        """At 160 columns every column is there and nothing is hidden."""
        text = render(result_table(wide_summary(), 64, 160), 160)
        for header in ("answers", "scored", "abstained", "excluded", "DAHL Score", "95% CI", "FActScore",
                       "no penalty", "F1@64"):
            assert header in text
        assert "81.4–83.7" in text and "not shown" not in text

    def test_narrow_still_whole(self) -> None:
        """At 50 columns the essential columns remain whole; a long model name folds instead of being cut."""
        text = render(result_table(wide_summary(), 64, 50), 50)
        assert "…" not in text
        for value in ("DAHL Score", "FActScore", "82.6", "72.6"):
            assert value in text


class TestScoreOutput:
    def test_one_answer_is_singular(self, tmp_path: Path) -> None:
        """One answer with one claim: "1 answer scored now", "1 claim in"."""
        path = tmp_path / "one.jsonl"
        write_answers(path, 1, claims=1)
        code, text = run("score", str(path), "--splitter", "given", "--checker", "fake", "-o", str(tmp_path / "out"),
                         "--no-progress")
        assert code == 0, text
        assert "1 answer scored now, 0 resumed, 1 claim in " in text

    def test_thousands_have_separators(self, tmp_path: Path) -> None:
        """1,200 answers of 3 claims: the summary says 1,200 answers and 3,600 claims."""
        path = tmp_path / "many.jsonl"
        write_answers(path, 1200)
        code, text = run("score", str(path), "--splitter", "given", "--checker", "fake", "-o", str(tmp_path / "out"),
                         "--no-progress")
        assert code == 0, text
        assert "1,200 answers scored now, 0 resumed, 3,600 claims in " in text
        assert "claims: 3,600 checked now" in text
        assert "1,200" in text.split("dahl scores")[1]  # the table's answers column

    def test_errors_agree_between_progress_and_summary(self, tmp_path: Path) -> None:
        """A too-long response and a bad record: the last progress line and the summary both say 2 errors."""
        path = tmp_path / "bad.jsonl"
        long = json.dumps({"id": "long", "question": "q?", "response": "word " * 11_000})
        write_answers(path, 2, extra=[long, '{"id": "e", "question": "q?", "response": ""}'])
        code, text = run("score", str(path), "--checker", "fake", "-o", str(tmp_path / "out"))
        assert code == ExitStatus.PARTIAL, text
        progress = [line for line in text.splitlines() if line.startswith("progress: ")]
        assert progress and "· 2 errors ·" in progress[-1] and "4/4 answers" in progress[-1]
        assert "2 errors by class: InputError 1, ResponseTooLong 1" in text
        assert "1 input record skipped" in text


    def test_uncountable_input_leaves_the_total_unknown(self, tmp_path: Path) -> None:
        """A csv field over the csv module's limit stops the count, not the run: no percent, the rest is scored."""
        path = tmp_path / "big.csv"
        path.write_text('question,category,response\nq1,c,"' + "x" * 140_000 + '"\nq2,c,Metformin lowers glucose.\n')
        code, text = run("score", str(path), "--checker", "fake", "-o", str(tmp_path / "out"))
        assert code == ExitStatus.PARTIAL, text
        progress = [line for line in text.splitlines() if line.startswith("progress: ")]
        assert progress[-1].startswith("progress: 2 answers · ") and "%" not in progress[-1]
        assert "1 answer scored now" in text and "1 input record skipped" in text


class TestLogLines:
    @pytest.mark.timeout(120)
    def test_plain_lines_every_interval_when_not_a_terminal(self, tmp_path: Path, mocks: Any) -> None:
        """stderr to a file: plain "progress:" lines at the interval (no bar, no escapes), the last at 100%."""
        url = mocks.start("--latency-ms", "300")
        path = tmp_path / "answers.jsonl"
        write_answers(path, 8)  # 24 claims, 2 at a time at 0.3 s: ~3.6 s
        log = tmp_path / "stderr.log"
        with log.open("w") as err:
            proc = subprocess.run(
                [sys.executable, "-m", "dahl.cli", "score", str(path), "-o", str(tmp_path / "out"), "--splitter", "given",
                 "--checker", "openai", "--base-url", url, "--model", "mock", "--api-key-env", "",
                 "--max-in-flight", "2", "--progress-every", "0.5"],
                cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, timeout=100,
            )
        assert proc.returncode == 0, log.read_text()
        text = log.read_text()
        lines = [line for line in text.splitlines() if line.startswith("progress: ")]
        assert len(lines) >= 3, text
        assert "\r" not in text and "\x1b" not in text and "━" not in text
        assert lines[-1].startswith("progress: 100% · 8/8 answers · ")
        assert "· 0 in flight ·" in lines[-1] and "· 0 errors ·" in lines[-1]
        assert all(re.search(r"· \d+ in flight · ", line) for line in lines)
        assert "24 requests" in text
