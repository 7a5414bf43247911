"""Several runs on one machine: a shared cache folder, ``--shard I/N``, ``dahl merge`` and ``--workers``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dahl.cache import CacheStore
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
SCORE = (str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"), "--no-progress")


def _dahl(*args: str) -> list[str]:
    return [sys.executable, "-m", "dahl", *args]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_dahl(*args), cwd=REPO, capture_output=True, text=True, timeout=300)


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
