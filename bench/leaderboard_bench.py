"""Leaderboard recompute benchmark: synthetic verdict stores, ``dahl leaderboard`` in fresh processes.

Builds seeded synthetic stores directly with numpy (no scoring run):

* ``1M``:  20 models × 2,500 answers × 20 claims = 1,000,000 claims;
* ``20M``: 20 models × 50,000 answers × 20 claims = 20,000,000 claims.

Every model answers every question (so paired comparisons use all of them);
claim labels are drawn per model (supported rate 0.45–0.90), with 8% irrelevant,
0.5% unknown claims and 2% of answers marked abstained (their claims kept). Each timing runs
``python -m dahl.cli leaderboard STORE -o board.json`` in a fresh process and
reads wall time and the child's peak RSS (``os.wait4``); a baseline process
(``python -m dahl.cli --help``) measures interpreter + import cost in the same
run. Prints JSON. Targets: ≤ 1 s (1M) and ≤ 15 s (20M) on a 2-core machine.

Usage: ``python -m bench.leaderboard_bench [--quick] [--repeats N] [--keep DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dahl.records import LABELS, Status
from dahl.analysis._verdicts import STATUSES, Verdicts, save_verdicts

N_MODELS = 20
N_CLAIMS = 20
N_CATEGORIES = 29


def build_store(out_dir: Path, answers_per_model: int, seed: int = 0) -> dict[str, Any]:
    """Write a synthetic store of N_MODELS × answers_per_model answers × N_CLAIMS claims; return its size and build time."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = N_MODELS * answers_per_model
    model = np.repeat(np.arange(N_MODELS, dtype=np.int32), answers_per_model)
    question = np.tile(np.arange(answers_per_model, dtype=np.int32), N_MODELS)
    category = (question % N_CATEGORIES).astype(np.int32)
    p_sup = np.linspace(0.45, 0.90, N_MODELS)
    labels = np.empty((n, N_CLAIMS), dtype=np.int8)
    counts = np.empty((n, len(LABELS)), dtype=np.int32)
    for m in range(N_MODELS):
        rows = slice(m * answers_per_model, (m + 1) * answers_per_model)
        p = np.array([p_sup[m] * 0.915, (1 - p_sup[m]) * 0.915, 0.08, 0.005, 0.0])
        lab = rng.choice(len(LABELS), size=(answers_per_model, N_CLAIMS), p=p / p.sum()).astype(np.int8)
        labels[rows] = lab
        counts[rows] = np.stack([(lab == j).sum(axis=1) for j in range(len(LABELS))], axis=1)
    abstained = rng.random(n) < 0.02
    offsets = np.arange(n + 1, dtype=np.int64) * N_CLAIMS
    clean = (counts[:, 3] + counts[:, 4] == 0) & (counts[:, 0] + counts[:, 1] > 0)
    status = np.where(clean, STATUSES.index(Status.SCORED), STATUSES.index(Status.EXCLUDED)).astype(np.int8)
    status[abstained] = STATUSES.index(Status.ABSTAINED)
    store = Verdicts(
        model=model,
        category=category,
        question=question,
        status=status,
        counts=counts,
        offsets=offsets,
        labels=labels.reshape(-1),
        models=[f"model-{m:02d}" for m in range(N_MODELS)],
        categories=[f"category-{c:02d}" for c in range(N_CATEGORIES)],
        question_ids=[f"q{q:07d}" for q in range(answers_per_model)],
        gamma=10.0,
        k=64,
        _ids=[f"a{i:08d}" for i in range(n)],
    )
    save_verdicts(store, out_dir)
    return {"answers": n, "claims": int(offsets[-1]), "build_s": round(time.perf_counter() - t0, 2)}


def run_child(args: list[str]) -> dict[str, float]:
    """Run ``python -m dahl.cli ARGS`` in a fresh process: wall seconds and peak RSS (MiB)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "dahl.cli", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"dahl {' '.join(args)} failed ({proc.returncode}): {err}")
    # ru_maxrss is in KiB on Linux.
    return {"wall_s": round(wall, 3), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def in_process(run_dir: Path) -> float:
    """Seconds to load the store and build the leaderboard inside this process (no interpreter start)."""
    from dahl.analysis._leaderboard import build_leaderboard
    from dahl.analysis._verdicts import load_verdicts

    t0 = time.perf_counter()
    build_leaderboard(load_verdicts(run_dir))
    return round(time.perf_counter() - t0, 3)


def main() -> None:
    """Build the stores, time the leaderboard, print JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 1M-claim store")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per store")
    parser.add_argument("--keep", type=Path, default=None, help="build the stores here and keep them")
    opts = parser.parse_args()
    root = opts.keep or Path(tempfile.mkdtemp(prefix="dahl-leaderboard-bench-"))
    scenarios = {"1M": 2_500} if opts.quick else {"1M": 2_500, "20M": 50_000}
    targets = {"1M": 1.0, "20M": 15.0}
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}}
    try:
        report["baseline_help"] = min((run_child(["--help"]) for _ in range(3)), key=lambda r: r["wall_s"])
        for name, per_model in scenarios.items():
            run_dir = root / name
            size = build_store(run_dir, per_model)
            runs = [run_child(["leaderboard", str(run_dir), "-o", str(root / f"board-{name}.json")])
                    for _ in range(opts.repeats)]
            walls = sorted(r["wall_s"] for r in runs)
            board = json.loads((root / f"board-{name}.json").read_text())
            report[name] = {
                **size,
                "wall_s": walls,
                "wall_s_median": walls[len(walls) // 2],
                "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
                "in_process_s": in_process(run_dir),
                "target_s": targets[name],
                "meets_target": walls[len(walls) // 2] <= targets[name],
                "ratio_to_baseline": round(walls[len(walls) // 2] / report["baseline_help"]["wall_s"], 2),
                "top_model": board["models"][0]["model"],
                "comparisons": len(board["comparisons"]),
            }
    finally:
        if opts.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
