"""Several runs on one machine: a shared cache folder, ``--shard I/N``, ``dahl merge`` and ``--workers``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from dahl import ScoreConfig, score
from dahl.cache import CacheStore
from dahl.cli._merge import shard_command
from dahl.errors import ConfigError
from dahl.locking import FolderLock
from dahl.results._manifest import Shard
from dahl.run._merge import merge_runs
from dahl.run._plan import AdapterSettings
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
SCORE = (str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"), "--no-progress")


def _dahl(*args: str) -> list[str]:
    return [sys.executable, "-m", "dahl", *args]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_dahl(*args), check=False, cwd=REPO, capture_output=True, text=True, timeout=300)


def _run_block(out: Path) -> dict[str, object]:
    block: dict[str, object] = json.loads((out / "summary.json").read_text())["run"]
    return block


class TestSharedCacheFolder:
    def test_two_runs_at_once_on_one_cache_folder_both_finish_and_share_verdicts(self, tmp_path: Path) -> None:
        cache = tmp_path / "cache"
        holder = CacheStore(cache)  # a run of this process holds the cache folder open throughout
        try:
            self._share(tmp_path, cache)
        finally:
            holder.close()

    def _share(self, tmp_path: Path, cache: Path) -> None:
        seed = tmp_path / "seed.jsonl"  # the first half of the answers, scored first
        lines = (EXAMPLES / "answers.jsonl").read_text().splitlines(keepends=True)
        seed.write_text("".join(lines[:4]))
        first = _run(tmp_path, "score", str(seed), *SCORE[1:], "-o", str(tmp_path / "seed"), "--cache-dir", str(cache))
        assert first.returncode == 0, first.stderr
        seeded = _run_block(tmp_path / "seed")["claims_checked"]
        assert isinstance(seeded, int) and seeded > 0
        both = [subprocess.Popen(_dahl("score", *SCORE, "-o", str(tmp_path / name), "--cache-dir", str(cache)),
                                 cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                for name in ("one", "two")]
        errors = [proc.communicate(timeout=300)[1] for proc in both]
        assert [proc.returncode for proc in both] == [0, 0], errors
        assert not any("in use" in e or "cache write" in e or "cache read" in e for e in errors), errors
        for name in ("one", "two"):
            run = _run_block(tmp_path / name)
            # every claim of the seeded half comes from the cache the first run wrote
            assert run["claims_cached"] >= seeded  # type: ignore[operator]
            assert run["claims_cached"] + run["claims_checked"] == run["claims_done"] == 42  # type: ignore[operator]


def _ids(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]


class TestShard:
    def test_an_id_hashes_to_one_shard_the_same_everywhere(self) -> None:
        ids = [f"q{i}-{m}" for i in range(50) for m in "ab"]
        owners = [[i for i in range(3) if Shard(index=i, count=3).owns(answer_id)] for answer_id in ids]
        assert all(len(o) == 1 for o in owners)
        digest = hashlib.blake2b(b"q1-a", digest_size=8).digest()
        assert Shard(index=int.from_bytes(digest, "big") % 3, count=3).owns("q1-a")

    @pytest.mark.parametrize("text", ["2/2", "-1/2", "0/0", "1", "a/b", "1/"])
    def test_bad_shard_is_a_clear_error(self, text: str) -> None:
        with pytest.raises(ConfigError, match=r"--shard must be I/N with 0 <= I < N"):
            Shard.parse(text)

    def test_bad_shard_on_the_command_line_exits_2(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / "out"), "--shard", "2/2")
        assert proc.returncode == 2
        assert "--shard must be I/N with 0 <= I < N (e.g. 0/4), got '2/2'" in proc.stderr
        assert not (tmp_path / "out").exists()

    def test_the_shards_of_a_run_score_each_answer_once_and_record_their_shard(self, tmp_path: Path) -> None:
        for i in range(2):
            proc = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / f"s{i}"), "--shard", f"{i}/2")
            assert proc.returncode == 0, proc.stderr
            assert _run_block(tmp_path / f"s{i}")["shard"] == {"index": i, "count": 2}
            manifest = json.loads((tmp_path / f"s{i}" / "manifest.json").read_text())
            assert manifest["shard"] == {"index": i, "count": 2}
        shards = [_ids(tmp_path / f"s{i}") for i in range(2)]
        everything = [json.loads(line)["id"] for line in (EXAMPLES / "answers.jsonl").read_text().splitlines()]
        assert sorted(shards[0] + shards[1]) == sorted(everything)
        assert all(Shard(index=i, count=2).owns(answer_id) for i in range(2) for answer_id in shards[i])


def _many_answers(path: Path, copies: int = 6) -> Path:
    """The example answers ``copies`` times over, each copy with its own ids (so shards interleave)."""
    records = [json.loads(line) for line in (EXAMPLES / "answers.jsonl").read_text().splitlines()]
    path.write_text("".join(json.dumps({**r, "id": f"{r['id']}-{n}"}) + "\n" for n in range(copies) for r in records))
    return path


def _config(inputs: Path, out: Path, shard: Shard | None = None, gamma: float = 10.0) -> ScoreConfig:
    return ScoreConfig(inputs=(inputs,), out_dir=out, adapters=AdapterSettings(checker="fake"), shard=shard,
                       gamma=gamma)


def _without_run(out: Path) -> dict[str, object]:
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    del summary["run"]
    return summary


class TestMerge:
    def test_merged_shards_are_the_run_one_process_writes(self, tmp_path: Path) -> None:
        inputs = _many_answers(tmp_path / "answers.jsonl")
        whole = score(_config(inputs, tmp_path / "whole"))
        shards = [tmp_path / f"s{i}" for i in range(3)]
        for i, folder in enumerate(shards):
            score(_config(inputs, folder, Shard(index=i, count=3)))
        assert all(_ids(folder) for folder in shards)  # every shard holds answers: the lines interleave
        report = anyio.run(merge_runs, shards[::-1], tmp_path / "merged")
        merged = tmp_path / "merged"
        assert (merged / "answers.jsonl").read_bytes() == (tmp_path / "whole" / "answers.jsonl").read_bytes()
        assert _without_run(merged) == _without_run(tmp_path / "whole")
        for name in sorted(p.name for p in (tmp_path / "whole" / "verdicts").iterdir()):
            assert (merged / "verdicts" / name).read_bytes() == (tmp_path / "whole" / "verdicts" / name).read_bytes()
        run = report.summary["run"]
        assert (run["answers_done"], run["claims_done"]) == (48, whole.summary["run"]["claims_done"])
        assert "shard" not in run
        assert json.loads((merged / "manifest.json").read_text())["state"] == "complete"

    def test_shards_of_different_runs_are_refused(self, tmp_path: Path) -> None:
        inputs = _many_answers(tmp_path / "answers.jsonl")
        score(_config(inputs, tmp_path / "s0", Shard(index=0, count=2)))
        score(_config(inputs, tmp_path / "s1", Shard(index=1, count=2), gamma=5.0))
        with pytest.raises(ConfigError, match=r"s1 and .*s0 are shards of different runs: scored with other settings"):
            anyio.run(merge_runs, [tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
        assert not (tmp_path / "merged" / "answers.jsonl").exists()

    def test_an_incomplete_set_is_refused(self, tmp_path: Path) -> None:
        inputs = _many_answers(tmp_path / "answers.jsonl")
        score(_config(inputs, tmp_path / "s1", Shard(index=1, count=3)))
        with pytest.raises(ConfigError, match=r"incomplete set of shards: 0/3, 2/3 missing"):
            anyio.run(merge_runs, [tmp_path / "s1"], tmp_path / "merged")
        with pytest.raises(ConfigError, match=r"shard 1/3 is given twice"):
            anyio.run(merge_runs, [tmp_path / "s1", tmp_path / "s1"], tmp_path / "merged")

    def test_a_whole_run_is_no_shard(self, tmp_path: Path) -> None:
        inputs = _many_answers(tmp_path / "answers.jsonl")
        score(_config(inputs, tmp_path / "whole"))
        proc = _run(tmp_path, "merge", str(tmp_path / "whole"), "-o", str(tmp_path / "merged"))
        assert proc.returncode == 2
        assert "was scored without --shard: it is a whole run, not a shard" in proc.stderr


class TestWorkers:
    def test_two_workers_write_what_one_writes(self, tmp_path: Path) -> None:
        one = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / "one"))
        assert one.returncode == 0, one.stderr
        two = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / "two"), "--workers", "2")
        assert two.returncode == 0, two.stderr
        assert (tmp_path / "two" / "answers.jsonl").read_bytes() == (tmp_path / "one" / "answers.jsonl").read_bytes()
        assert _without_run(tmp_path / "two") == _without_run(tmp_path / "one")
        assert sorted(p.name for p in (tmp_path / "two" / "shards").iterdir()) == ["0", "1"]
        assert "2 shards merged: 8 answers, 42 claims" in two.stderr

    def test_workers_and_shard_together_are_refused(self, tmp_path: Path) -> None:
        proc = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / "out"), "--workers", "2", "--shard", "0/2")
        assert proc.returncode == 2
        assert "give --shard or --workers, not both" in proc.stderr

    def test_each_worker_gets_the_limits_as_given(self, tmp_path: Path) -> None:
        """The worker divides the limits itself (see TestStaticShare), so its command carries them unchanged."""
        args = ["in.jsonl", "-o", "out", "--workers", "4", "--rpm", "600", "--max-cost", "2"]
        command = shard_command(args, {"rpm": 600.0, "max_cost_usd": 2.0}, 1, tmp_path / "s", Shard(index=3, count=4))
        assert command[1:] == ["-m", "dahl", "-v", "score", *args, "-o", str(tmp_path / "s"), "--shard", "3/4",
                               "--workers", "1", "--no-progress"]

    def test_with_coord_every_worker_shares_the_whole_limits_under_one_run_name(self, tmp_path: Path) -> None:
        """--coord: no 1/N shares (Redis paces the shards together); the workers' URL names their run."""
        params = {"rpm": 600.0, "tpm": None, "max_cost_usd": 2.0, "coord": "redis://127.0.0.1:6379/0"}
        args = ["in.jsonl", "--coord", "redis://127.0.0.1:6379/0"]
        command = shard_command(args, params, 0, tmp_path / "s", Shard(index=1, count=4), "r1")
        assert command[4:] == [*args, "--coord", "redis://127.0.0.1:6379/0?run=r1", "-o", str(tmp_path / "s"),
                               "--shard", "1/4", "--workers", "1", "--no-progress"]

    def test_a_shard_that_stops_stops_the_command_before_the_merge(self, tmp_path: Path) -> None:
        busy = tmp_path / "out" / "shards" / "1"
        busy.mkdir(parents=True)
        lock = FolderLock(busy, name=".dahl.lock", what="output folder", hint="wait", error=ConfigError)
        try:
            proc = _run(tmp_path, "score", *SCORE, "-o", str(tmp_path / "out"), "--workers", "2")
        finally:
            lock.release()
        assert proc.returncode == 2
        assert f"stopped: shard 1/2 ({busy}) exited with status 2" in " ".join(proc.stderr.split())
        assert (tmp_path / "out" / "shards" / "0" / "answers.jsonl").exists()
        assert not (tmp_path / "out" / "answers.jsonl").exists()


class TestKilledShard:
    def test_a_shard_killed_mid_run_resumes_and_the_merge_is_the_single_run(self, tmp_path: Path,
                                                                              mocks: Any) -> None:
        """kill -9 of shard 0/2 mid-run, then its re-run: only the claims of answers missing from its
        answers.jsonl are checked again, and the merged run is byte for byte the one-process run."""
        import os
        import signal
        import time

        inputs = _many_answers(tmp_path / "answers.jsonl", copies=15)  # 120 answers
        url = mocks.start("--latency-ms", "20")  # one server for both: its URL is in every input hash

        def args(base_url: str, out: Path, *extra: str) -> list[str]:
            return _dahl("score", str(inputs), "--checker", "openai", "--base-url", base_url, "--model", "mock",
                         "--api-key-env", "", "--max-in-flight", "2", "--no-cache", "--no-progress", "-o", str(out),
                         *extra)

        single = subprocess.run(args(url, tmp_path / "single"), capture_output=True, text=True, timeout=300)
        assert single.returncode == 0, single.stderr
        shards = [tmp_path / f"s{i}" for i in range(2)]
        proc = subprocess.Popen(args(url, shards[0], "--shard", "0/2"), cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            log = shards[0] / "answers.jsonl"
            for _ in range(3000):  # poll the output, not the clock: kill once a few answers are written
                if log.is_file() and log.read_bytes().count(b"\n") >= 5:
                    break
                time.sleep(0.01)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        assert not (shards[0] / "summary.json").exists()  # killed before it finished
        whole_lines = log.read_bytes().split(b"\n")[:-1]  # a line the kill cut short is made again
        written = {json.loads(line)["id"] for line in whole_lines}
        claims = {line["id"]: len(line["claims"]) for line in map(json.loads,
                  (tmp_path / "single" / "answers.jsonl").read_text().splitlines())}
        owned = [answer_id for answer_id in claims if Shard(index=0, count=2).owns(answer_id)]
        checked_before = mocks.stats(url)["check"]
        again = subprocess.run(args(url, shards[0], "--shard", "0/2"), capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        # nothing finished is sent again: the re-run checks exactly the claims of the answers not written
        assert mocks.stats(url)["check"] - checked_before == sum(claims[a] for a in owned if a not in written)
        other = subprocess.run(args(url, shards[1], "--shard", "1/2"), capture_output=True, text=True, timeout=300)
        assert other.returncode == 0, other.stderr
        merge = subprocess.run(_dahl("merge", *map(str, shards), "-o", str(tmp_path / "merged")),
                               capture_output=True, text=True, timeout=300)
        assert merge.returncode == 0, merge.stderr
        # the resumed shard's claims count too
        assert f"2 shards merged: 120 answers, {sum(claims.values())} claims" in " ".join(merge.stderr.split())
        assert ((tmp_path / "merged" / "answers.jsonl").read_bytes()
                == (tmp_path / "single" / "answers.jsonl").read_bytes())
        merged, alone = _without_run(tmp_path / "merged"), _without_run(tmp_path / "single")
        # `changes` tells what this run did to its folder: the resumed shard reused its 5+ answers
        assert merged.pop("changes")["answers_reused"] == len(written) > 0  # type: ignore[index]
        alone.pop("changes")
        assert merged == alone


class TestSharedSpendCap:
    def test_four_shards_stay_under_one_cap_plus_a_request_bound_each(self, tmp_path: Path, mocks: Any,
                                                                     redis_server: Any) -> None:
        """--max-cost $0.002 over 4 shards on one --coord: the mock's tokens x the prices stay within the
        cap plus one request's upper bound per shard (each shard's stop names its bound)."""
        import re

        url = mocks.start()
        with (tmp_path / "a.jsonl").open("w") as f:
            for i in range(80):
                f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i} do?", "response":
                        f"Drug {i} lowers blood pressure. It was approved in {1900 + i}. It is taken {i} times."})
                        + "\n")
        coord = f"{redis_server.url}?run=cap"
        procs = [subprocess.Popen(_dahl("score", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / f"s{i}"),
                                        "--shard", f"{i}/4", "--coord", coord, "--checker", "openai", "--base-url",
                                        url, "--model", "gpt-4o-mini", "--api-key-env", "", "--max-in-flight",
                                        "4", "--no-cache", "--no-progress", "--max-cost", "0.002"),
                                  cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i in range(4)]
        errors = [proc.communicate(timeout=300)[1] for proc in procs]
        codes = [proc.returncode for proc in procs]
        assert set(codes) <= {0, 3} and 3 in codes, errors
        bounds = [float(m.group(1)) for e in errors
                  if (m := re.search(r"could cost up to \$(\d+\.\d+)", e.replace("\n", "")))]
        assert len(bounds) == codes.count(3)
        tokens = mocks.stats(url)["tokens"]
        spent = (tokens["prompt"] * 0.15 + tokens["completion"] * 0.60) / 1e6  # gpt-4o-mini's shipped prices
        assert 0.001 < spent <= 0.002 + 4 * max(bounds)


def _limits_config(path: Path, url: str) -> Path:
    """A --config file giving the Splitter and the Checker their own model (so their own lane) and limits."""
    path.write_text(f"""[split]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\napi_key_env = ""\nrpm = 6000\n\n"""
                    f"""[check]\nbase_url = "{url}"\nmodel = "gpt-4o"\napi_key_env = ""\nrpm = 3000\ntpm = 900000\n""")
    return path


def _paces(out: Path) -> dict[str, tuple[float | None, float | None]]:
    """model -> (rpm, tpm) each lane of the run in ``out`` paced at, from its summary.json."""
    lanes: dict[str, Any] = _run_block(out)["lanes"]  # type: ignore[assignment]
    return {key.rsplit("|", 1)[1]: (lane["rpm"], lane["tpm"]) for key, lane in lanes.items()}


class TestStaticShare:
    """Without --coord, shard I of N paces at 1/N of the limits wherever they are set, and caps at 1/N of the money."""

    def test_a_shard_takes_half_of_the_limits_of_a_config_file_and_of_max_cost(self, tmp_path: Path, mocks: Any) -> None:
        config = _limits_config(tmp_path / "dahl.toml", mocks.start())
        proc = _run(tmp_path, "score", str(EXAMPLES / "answers.jsonl"), "--splitter", "openai", "--checker", "openai",
                    "--config", str(config), "--max-cost", "1", "--shard", "1/2", "--no-progress",
                    "-o", str(tmp_path / "out"))
        assert proc.returncode == 0, proc.stderr
        assert _paces(tmp_path / "out") == {"gpt-4o-mini": (3000.0, None), "gpt-4o": (1500.0, 450000.0)}
        assert _run_block(tmp_path / "out")["cost"]["max_cost_usd"] == 0.5  # type: ignore[index]

    def test_every_worker_takes_its_share_and_the_merged_cap_is_the_whole(self, tmp_path: Path, mocks: Any) -> None:
        config = _limits_config(tmp_path / "dahl.toml", mocks.start())
        proc = _run(tmp_path, "score", str(EXAMPLES / "answers.jsonl"), "--splitter", "openai", "--checker", "openai",
                    "--config", str(config), "--rpm", "800", "--max-cost", "1", "--workers", "2", "--no-progress",
                    "-o", str(tmp_path / "out"))
        assert proc.returncode == 0, proc.stderr
        for shard in ("0", "1"):  # --rpm overrides both tables' rpm; the tpm stays the file's
            assert _paces(tmp_path / "out" / "shards" / shard) == {"gpt-4o-mini": (400.0, None),
                                                                    "gpt-4o": (400.0, 450000.0)}
            assert _run_block(tmp_path / "out" / "shards" / shard)["cost"]["max_cost_usd"] == 0.5  # type: ignore[index]
        assert _run_block(tmp_path / "out")["cost"]["max_cost_usd"] == 1.0  # type: ignore[index]

    def test_a_whole_run_keeps_the_whole_limits(self, tmp_path: Path, mocks: Any) -> None:
        config = _limits_config(tmp_path / "dahl.toml", mocks.start())
        proc = _run(tmp_path, "score", str(EXAMPLES / "answers.jsonl"), "--splitter", "openai", "--checker", "openai",
                    "--config", str(config), "--max-cost", "1", "--no-progress", "-o", str(tmp_path / "out"))
        assert proc.returncode == 0, proc.stderr
        assert _paces(tmp_path / "out") == {"gpt-4o-mini": (6000.0, None), "gpt-4o": (3000.0, 900000.0)}
        assert _run_block(tmp_path / "out")["cost"]["max_cost_usd"] == 1.0  # type: ignore[index]

