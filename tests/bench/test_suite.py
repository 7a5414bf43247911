"""The benchmark suite: helpers, the runner's table and exit status, and every scenario at tiny size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import suite
from bench.scenarios import (
    b0_micro,
    b1_overhead,
    b2_latency,
    b3_rate,
    b4_faults,
    b5_crash,
    b6_rescore,
    b7_soak,
    b9_shards,
    b10_cpu,
    peers,
)
from bench.scenarios.common import (
    Figure,
    ScenarioResult,
    max_window_count,
    percentiles,
    steady_rate,
    write_answers,
)

FIGURE_KEYS = {"figure", "value", "baseline", "ratio", "target", "pass"}


def _check_result(result: ScenarioResult, name: str) -> dict[str, Any]:
    """Assert the documented JSON shape and that dahl lost no claim; return the JSON."""
    data = json.loads(json.dumps(result.as_dict(1.0)))
    assert data["name"] == name
    assert data["figures"], "a scenario reports at least one figure"
    for fig in data["figures"]:
        assert set(fig) == FIGURE_KEYS
    assert data["claims_in"] > 0
    assert data["claims_out"] == data["claims_in"]
    return data


class TestFigure:
    def test_ratio_and_pass_against_baseline(self) -> None:
        """A figure with a baseline is judged on value / baseline."""
        fig = Figure.make("x", 90.0, 100.0, ">= 0.85")
        assert fig.ratio == pytest.approx(0.9)
        assert fig.passed is True

    def test_upper_target_on_value_without_baseline(self) -> None:
        """Without a baseline, a <= target is applied to the value itself."""
        assert Figure.make("429 share", 0.02, None, "<= 0.01").passed is False

    def test_no_target_is_informational(self) -> None:
        """No target: pass is None (neither pass nor fail)."""
        assert Figure.make("lag", 3.0).passed is None


class TestSeries:
    def test_max_window_count(self) -> None:
        """Largest increase within 1 s of a cumulative series: 10 -> 25 between t=1.0 and 2.0."""
        series = [(0.0, 0), (0.5, 10), (1.0, 10), (1.5, 20), (2.0, 25), (3.5, 30)]
        assert max_window_count(series, 1.0) == 15

    def test_steady_rate_skips_warmup_and_drain(self) -> None:
        """Rate between the 10 % and 90 % marks: (90 - 10) / (9 - 1) = 10 per second."""
        series = [(float(t), 10 * t) for t in range(11)]
        assert steady_rate(series, 100) == pytest.approx(10.0)

    def test_percentiles_interpolate(self) -> None:
        """p50 of 1..4 is 2.5 (linear interpolation); empty input gives None."""
        assert percentiles([4.0, 1.0, 3.0, 2.0], (50,)) == [2.5]
        assert percentiles([], (50, 99)) == [None, None]


class TestWriteAnswers:
    def test_counts_and_unique_claims(self, tmp_path: Path) -> None:
        """25 claims at 10 per answer make 3 answers (10, 10, 5), all claim texts distinct."""
        path = tmp_path / "a.jsonl"
        assert write_answers(path, 25) == 25
        answers = [json.loads(line) for line in path.read_text().splitlines()]
        assert [len(a["claims"]) for a in answers] == [10, 10, 5]
        texts = [c["text"] for a in answers for c in a["claims"]]
        assert len(set(texts)) == 25

    def test_seeded(self, tmp_path: Path) -> None:
        """The same seed writes the same bytes."""
        write_answers(tmp_path / "a", 30, seed=3)
        write_answers(tmp_path / "b", 30, seed=3)
        assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()


class TestTable:
    def test_rows_and_lost_claims(self) -> None:
        """Each figure is a row; lost claims and crashes are rows that fail."""
        ok = {"name": "b9", "figures": [Figure.make("r", 9.0, 10.0, ">= 0.85").as_dict()], "claims_in": 5, "claims_out": 4}
        crashed = {"name": "b8", "crashed": True, "error": "exit 1: boom"}
        lines = suite.format_table([ok, crashed]).splitlines()
        assert lines[0] == "| scenario | figure | value | baseline | ratio | target | pass |"
        assert lines[2] == "| b9 | r | 9 | 10 | 0.9 | >= 0.85 | yes |"
        assert lines[3] == "| b9 | dahl claims in / out | 4 | 5 | - | equal | **no** |"
        assert lines[4].startswith("| b8 | CRASHED: exit 1: boom")


class TestRunSuite:
    def test_unknown_scenario(self, tmp_path: Path) -> None:
        """An unknown name is refused before anything runs."""
        with pytest.raises(ValueError, match="unknown scenario"):
            suite.run_suite(["b99"], size="tiny", results_root=tmp_path)

    def test_crash_gives_nonzero_status(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A scenario process that fails to run makes the suite exit 1 and is tabled as crashed."""
        broken = suite.ScenarioSpec("bx", "does_not_exist", "broken", 1, 1)
        monkeypatch.setattr(suite, "SCENARIOS", (broken,))
        status, table, out = suite.run_suite([], size="tiny", results_root=tmp_path)
        assert status == 1
        assert "CRASHED" in table
        assert (out / "does_not_exist.json").exists()

    def test_b4_end_to_end(self, tmp_path: Path) -> None:
        """`run b4` at tiny size exits 0 and writes its JSON and the table under a timestamped folder."""
        status, table, out = suite.run_suite(["b4"], size="tiny", results_root=tmp_path)
        assert status == 0, table
        data = json.loads((out / "b4_faults.json").read_text())
        assert data["claims_in"] == data["claims_out"] == 300
        assert (out / "table.md").read_text().startswith("| scenario |")


class TestScenarios:
    async def test_b1(self, tmp_path: Path) -> None:
        """B1 reports dahl vs bare req/s with the 0.85 target and loses no claim."""
        data = _check_result(await b1_overhead.run("tiny", tmp_path), "b1_overhead")
        first = data["figures"][0]
        assert first["target"] == ">= 0.85" and first["baseline"] > 0
        rss = next(f for f in data["figures"] if f["figure"].startswith("peak RSS"))
        # Each worker's own peak: not the one high-water mark of the process that started both.
        assert rss["value"] != rss["baseline"] and 10 < rss["baseline"] < 500 and 10 < rss["value"] < 500

    async def test_b10(self, tmp_path: Path) -> None:
        """B10 reports dahl's CPU ms per request against the bare loop's with the 1.3 target, both
        measured over every claim's request (300 each), and loses no claim."""
        data = _check_result(await b10_cpu.run("tiny", tmp_path), "b10_cpu")
        first = data["figures"][0]
        assert first["target"] == "<= 1.3" and first["value"] > 0 and first["baseline"] > 0
        assert data["runs"]["dahl"]["mock"]["requests"] == data["runs"]["bare"]["mock"]["requests"] == 300

    async def test_b2(self, tmp_path: Path) -> None:
        """B2 compares the lognormal run with C / mean latency = 200 / 1.1331 s = 176.5/s."""
        data = _check_result(await b2_latency.run("tiny", tmp_path), "b2_latency")
        assert data["figures"][0]["baseline"] == pytest.approx(176.50, abs=0.01)

    async def test_b3(self, tmp_path: Path) -> None:
        """B3 reports achieved RPM against 600 and the 429 shares of its three runs."""
        data = _check_result(await b3_rate.run("tiny", tmp_path), "b3_rate")
        assert data["figures"][0]["baseline"] == 600.0
        assert data["claims_in"] == 30 + 30 + 30

    async def test_b4(self, tmp_path: Path) -> None:
        """B4 injects faults and still gets every claim back labelled."""
        data = _check_result(await b4_faults.run("tiny", tmp_path), "b4_faults")
        assert sum(data["runs"]["dahl"]["mock"]["faults"].values()) > 0

    async def test_peers(self, tmp_path: Path) -> None:
        """Peers put each client's claims/s next to dahl's (bare only here, for time)."""
        result = await peers.run("tiny", tmp_path, clients=("dahl", "bare"))
        data = _check_result(result, "peers")
        assert data["runs"]["b1"]["bare"]["status"] == "ok"
        assert "| b1 | dahl |" in peers.markdown(data["runs"])


class TestScenarioHelpers:
    def test_b0_generated_answers_seeded(self) -> None:
        """B0's generated biomedical answers are reproducible and hold 3-8 sentences each."""
        a, b = b0_micro.generated_answers(5, seed=2), b0_micro.generated_answers(5, seed=2)
        assert a == b and len(a) == 5
        assert all(3 <= r.count(". ") + 1 <= 12 for _, r in a)

    def test_b6_edits_every_hundredth_claim(self, tmp_path: Path) -> None:
        """Editing every 10th of 25 claims changes claims 5 and 15: 2 edits, texts otherwise equal."""
        write_answers(tmp_path / "a.jsonl", 25, seed=1)
        assert b6_rescore.edit_answers(tmp_path / "a.jsonl", tmp_path / "b.jsonl", 10) == 2
        before = [c["text"] for line in (tmp_path / "a.jsonl").read_text().splitlines() for c in json.loads(line)["claims"]]
        after = [c["text"] for line in (tmp_path / "b.jsonl").read_text().splitlines() for c in json.loads(line)["claims"]]
        assert [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if x != y] == [5, 15]

    def test_b7_stream_writes_unique_claims(self, tmp_path: Path) -> None:
        """The soak file holds 23 unique claims in answers of 10, 10 and 3."""
        assert b7_soak.write_stream(tmp_path / "s.jsonl", 23) == 23
        rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
        assert [len(r["claims"]) for r in rows] == [10, 10, 3]
        assert len({c["text"] for r in rows for c in r["claims"]}) == 23

    def test_b7_reads_own_rss(self) -> None:
        """VmRSS of this process is a positive MiB figure; a missing pid gives None."""
        import os

        rss = b7_soak.vm_rss_mb(os.getpid())
        assert rss is not None and rss > 1.0
        assert b7_soak.vm_rss_mb(2**22 + 12345) is None


class TestStateScenarios:
    async def test_b0(self, tmp_path: Path) -> None:
        """B0 reads every cached claim back and judges the hit path against 20 µs (50,000 claims/s)."""
        data = _check_result(await b0_micro.run("tiny", tmp_path), "b0_micro")
        assert data["figures"][-1]["baseline"] == pytest.approx(20.0)
        assert data["runs"]["cache"]["misses"] == 0

    async def test_b5(self, tmp_path: Path) -> None:
        """B5 kills a run, Ctrl-Cs one (exit 130), and the resumed output equals an uninterrupted run."""
        data = _check_result(await b5_crash.run("tiny", tmp_path), "b5_crash")
        figures = {f["figure"]: f for f in data["figures"]}
        assert figures["answers.jsonl byte-identical to an uninterrupted run (1 = yes)"]["value"] == 1.0
        assert figures["summary.json equal except run/changes/config.inputs (1 = yes)"]["value"] == 1.0
        assert data["runs"]["ctrl_c"]["returncode"] == 130
        assert data["runs"]["reference"]["sent"] == 2500

    async def test_b6(self, tmp_path: Path) -> None:
        """B6 re-scores 3,000 cached claims: unchanged, 0 requests and 300 answers whole; 30 edited, exactly 30 requests;
        the same with --workers 2."""
        data = _check_result(await b6_rescore.run("tiny", tmp_path), "b6_rescore")
        rescore = data["runs"]["rescore"]
        assert rescore["requests"] == 30
        assert (rescore["run"]["claims_cached"], rescore["run"]["answers_cached"]) == (2970, 270)
        every_whole = data["runs"]["every_whole"]
        assert every_whole["requests"] == 0
        assert (every_whole["run"]["answers_cached"], every_whole["run"]["claims_cached"]) == (300, 3000)
        assert data["runs"]["verify"]["requests"] == 0
        workers = data["runs"]["rescore_workers2"]
        assert (workers["requests"], workers["run"]["claims_cached"], workers["run"]["answers_cached"]) == (30, 2970, 270)
        assert data["runs"]["every_whole_workers2"]["requests"] == 0
        assert data["runs"]["every_whole_workers2"]["run"]["answers_cached"] == 300
        assert all(r["cpu_s"] > 0 for r in data["runs"]["cache_on"] + data["runs"]["cache_off"])

    async def test_b7(self, tmp_path: Path) -> None:
        """B7 streams 20,000 claims through the fake Checker and reports RSS and loop lag."""
        data = _check_result(await b7_soak.run("tiny", tmp_path), "b7_soak")
        assert data["claims_out"] == 20000
        assert data["runs"]["worker"]["lag_p99_ms"] is not None


class TestShardScenario:
    async def test_b9(self, tmp_path: Path) -> None:
        """B9 at tiny size: every rate-bound run of 4 shards checks each of its 40 claims once (40 answered 200), and
        4 shards over 8 identical answers of 5 claims send 5 check calls, one per distinct claim."""
        if b9_shards.redis_missing() is not None:
            pytest.skip(b9_shards.redis_missing())
        data = _check_result(await b9_shards.run("tiny", tmp_path), "b9_shards")
        for name in ("coord", "static", "tpm"):
            run = data["runs"][name]
            assert run["mock"]["status"]["200"] == 40
            assert set(run["returncodes"]) <= {0, 5}  # 5: a shard that no answer hashed to
        flight = data["runs"]["single_flight"]
        assert flight["mock"]["requests"] == 5 and flight["returncodes"] == [0, 0, 0, 0]
        assert data["figures"][-1]["value"] == 5.0 and data["figures"][-1]["baseline"] == 5.0

    async def test_b9_without_redis_server_is_one_skipped_row(self, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """No redis-server binary: B9 reports one row naming why, and no claim."""
        from bench import redis_server

        monkeypatch.setattr(redis_server.shutil, "which", lambda name: None)
        data = json.loads(json.dumps((await b9_shards.run("tiny", tmp_path)).as_dict(1.0)))
        assert [f["figure"] for f in data["figures"]] == [
            "skipped: redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)"]
        assert (data["claims_in"], data["claims_out"]) == (0, 0)
