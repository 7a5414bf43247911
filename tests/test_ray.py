"""``dahl score --ray``: the shards of a run as Ray tasks on a local Ray instance (two CPUs, started once)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.cli._ray import score_shard
from dahl.errors import ConfigError
from dahl.exit_status import ExitStatus
from dahl.locking import FolderLock
from dahl.results._manifest import Shard
from dahl.run._plan import AdapterSettings
from dahl.run._score import ScoreConfig
from dahl.run._score import score_async
from tests.cache.test_redis_store import config as redis_config
from tests.test_shards import SCORE, _without_run

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="ray is not installed (pip install 'dahl[ray]')")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance of two CPUs for the module's tests; ``dahl score --ray`` joins it."""
    import ray

    ray.init(num_cpus=2, log_to_driver=False, include_dashboard=False)
    yield
    ray.shutdown()


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


@needs_ray
@pytest.mark.usefixtures("local_ray")
class TestRay:
    def test_two_ray_shards_write_what_one_process_writes(self, tmp_path: Path) -> None:
        code, text = _run("score", *SCORE, "-o", str(tmp_path / "one"))
        assert code == 0, text
        code, text = _run("score", *SCORE, "-o", str(tmp_path / "ray"), "--ray", "--workers", "2")
        assert code == 0, text
        assert (tmp_path / "ray" / "answers.jsonl").read_bytes() == (tmp_path / "one" / "answers.jsonl").read_bytes()
        assert _without_run(tmp_path / "ray") == _without_run(tmp_path / "one")
        assert sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir()) == ["0", "1"]
        assert "scoring in 2 Ray tasks" in text
        assert "2 shards merged: 8 answers, 42 claims" in " ".join(text.split())

    def test_without_workers_the_shards_are_the_cluster_cpus(self, tmp_path: Path) -> None:
        code, text = _run("score", *SCORE, "-o", str(tmp_path / "ray"), "--ray")
        assert code == 0, text
        assert sorted(p.name for p in (tmp_path / "ray" / "shards").iterdir()) == ["0", "1"]

    def test_a_failed_shard_is_a_row_and_stops_the_command_before_the_merge(self, tmp_path: Path) -> None:
        busy = tmp_path / "out" / "shards" / "1"
        busy.mkdir(parents=True)
        lock = FolderLock(busy, name=".dahl.lock", what="output folder", hint="wait", error=ConfigError)
        try:
            code, text = _run("score", *SCORE, "-o", str(tmp_path / "out"), "--ray", "--workers", "2")
        finally:
            lock.release()
        assert code == ExitStatus.USAGE
        flat = " ".join(text.split())
        assert f"stopped: shard 1/2 ({busy}) exited with status 2:" in flat
        assert "in use by another dahl run" in flat
        assert (tmp_path / "out" / "shards" / "0" / "answers.jsonl").exists()
        assert not (busy / "answers.jsonl").exists()
        assert not (tmp_path / "out" / "answers.jsonl").exists()

    def test_with_coord_the_ray_shards_make_the_calls_of_one_process(self, tmp_path: Path, mocks: Any,
                                                                      redis_server: Any) -> None:
        """--ray --workers 2 --coord: the two tasks run on the Redis store and limiter; the merged answers are
        one process's, and the splits (no claim shared across answers) are one process's calls.
        The check calls are not asserted here: one CI run saw 21 (a run without --coord) against 18; the
        cross-shard single flight is asserted on processes in tests/cache/test_redis_store.py."""
        alone_url, url = mocks.start("--latency-ms", "20"), mocks.start("--latency-ms", "20")
        anyio.run(score_async, redis_config(tmp_path, alone_url, "alone", None))
        code, text = _run("score", str(tmp_path / "a.jsonl"), "--splitter", "openai", "--checker", "openai",
                          "--base-url", url, "--model", "mock", "--api-key-env", "", "--max-in-flight", "4",
                          "--rpm", "6000", "--cache-dir", str(tmp_path / "ray" / "cache"), "--no-progress",
                          "-o", str(tmp_path / "ray" / "out"), "--ray", "--workers", "2", "--coord", redis_server.url)
        assert code == 0, text
        one, two = mocks.stats(alone_url), mocks.stats(url)
        assert two["split"] == one["split"], text
        assert one["check"] <= two["check"], text
        merged, alone = ([{k: v for k, v in json.loads(line).items() if k != "input_hash"}
                          for line in (tmp_path / name / "out" / "answers.jsonl").read_text().splitlines()]
                         for name in ("ray", "alone"))
        assert merged == alone

    def test_ray_reproduces_the_factscore_replay_figures(self, tmp_path: Path, shared_data: Path) -> None:
        """Given claims + replayed human labels, in two Ray shards: FActScore 41.9/57.5/69.3."""
        files = [shared_data / f"factscore/labeled/{m}.jsonl" for m in ("InstructGPT", "ChatGPT", "PerplexityAI")]
        if not all(f.exists() for f in files):
            pytest.skip("the FActScore labeled files are not in the shared data")
        out = tmp_path / "fs"
        code, text = _run("score", *map(str, files), "--format", "factscore", "--splitter", "given",
                          "--checker", "replay", "-o", str(out), "--no-progress", "--ray", "--workers", "2")
        assert code == 0, text
        models = json.loads((out / "summary.json").read_text())["models"]
        for model, (fs, n_fs) in {"InstructGPT": (41.9, 127), "ChatGPT": (57.5, 110), "PerplexityAI": (69.3, 115)}.items():
            assert 100 * models[model]["factscore_init"] == pytest.approx(fs, abs=0.05), model
            assert models[model]["n_factscore"] == n_fs, model


class TestShardTask:
    def test_a_shard_that_raises_returns_an_error_row(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Nothing is raised out of the task (Ray would re-run it): a bug is a row with status 1."""
        def broken(config: ScoreConfig) -> None:
            raise RuntimeError("boom")

        monkeypatch.setattr("dahl.cli._ray.score", broken)
        config = ScoreConfig(inputs=SCORE[0], out_dir=tmp_path / "s", adapters=AdapterSettings(checker="fake"),
                             shard=Shard(index=1, count=2))
        assert score_shard(config) == {"shard": 1, "status": "error", "exit_status": ExitStatus.INTERNAL,
                                       "message": "boom"}

    def test_without_the_extra_the_error_names_it(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
        code, text = _run("score", *SCORE, "-o", str(tmp_path / "out"), "--ray")
        assert code == ExitStatus.USAGE
        assert "--ray needs Ray; install it with: pip install 'dahl[ray]'" in text

    def test_an_input_file_after_a_bare_ray_is_refused_as_its_address(self, tmp_path: Path) -> None:
        """``--ray answers.jsonl``: the file is read as the address; the error says so, before any Ray import."""
        code, text = _run("score", "--ray", SCORE[0], *SCORE[1:], "-o", str(tmp_path / "out"))
        assert code == ExitStatus.USAGE
        assert f"'{SCORE[0]}' is a path, not a Ray address" in " ".join(text.split())
        assert not (tmp_path / "out").exists()
