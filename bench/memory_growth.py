"""What grows with the number of claims: tracemalloc snapshots of one in-process fake-Checker run.

Run by hand: ``python -m bench.memory_growth --claims 1000000 [--top 25] [--frames 1]``.
Writes a B7-style seeded claims file (:func:`bench.scenarios.b7_soak.write_stream`, 10 claims
per answer) to a temporary directory, scores it with :func:`dahl.score_async`
(``splitter="given"``, ``checker="fake"``, cache off) with tracemalloc on, takes snapshots
when 10 %, 50 % and 100 % of the claims are done and once ``score_async`` has returned, and prints the allocation sites that grew
from the 10 % snapshot to each later one (``Snapshot.compare_to``, grouped by ``lineno`` or,
with ``--frames`` > 1, by ``traceback``), then the peak RSS (``VmHWM`` of /proc/self/status,
MiB; tracemalloc's own bookkeeping is included in it, so compare runs with equal settings).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import tracemalloc
from pathlib import Path

from bench.scenarios.b7_soak import write_stream


def vm_mb(field: str = "VmHWM") -> float:
    """``field`` of /proc/self/status in MiB (``VmHWM``: peak resident set size; ``VmRSS``: now;
    ``RssAnon`` / ``RssFile``: its heap and its mapped files)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"{field} not found in /proc/self/status")


def _short(filename: str) -> str:
    """``filename`` from its package directory on (``dahl/...``, ``asyncio/...``)."""
    parts = Path(filename).parts
    for anchor in ("dahl", "bench", "site-packages"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + (anchor == "site-packages"):])
    return "/".join(parts[-2:])


def _print_growth(label: str, new: tracemalloc.Snapshot, old: tracemalloc.Snapshot, key: str, top: int, n: int) -> None:
    """Print the ``top`` sites whose traced size grew most from ``old`` to ``new``."""
    stats = new.compare_to(old, key)
    grown = sum(s.size_diff for s in stats)
    print(f"\n== {label}: traced memory grew {grown / 2**20:.1f} MiB ({grown / n:.1f} B per claim of the run)")
    for s in stats[:top]:
        where = " <- ".join(f"{_short(f.filename)}:{f.lineno}" for f in reversed(s.traceback))
        print(f"{s.size_diff / 2**20:+9.2f} MiB {s.count_diff:+10d} blocks  {s.size_diff / n:7.1f} B/claim  {where}")


async def _run(answers: Path, out_dir: Path, n: int) -> dict[str, tracemalloc.Snapshot | None]:
    """Score ``answers`` with tracemalloc on; snapshots at 10 %, 50 % and 100 % of ``n`` claims."""
    from dahl import AdapterSettings, RunCounters, ScoreConfig, score_async

    config = ScoreConfig(
        inputs=(answers,), out_dir=out_dir, n_boot=10, use_cache=False,
        adapters=AdapterSettings(splitter="given", checker="fake"),
    )
    counters = RunCounters()
    snaps: dict[str, tracemalloc.Snapshot | None] = {}

    def snap(label: str) -> None:
        snaps[label] = tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None
        print(f"{label:>4} of claims: VmRSS {vm_mb('VmRSS'):.1f} MiB (RssAnon {vm_mb('RssAnon'):.1f}, "
              f"RssFile {vm_mb('RssFile'):.1f}), VmHWM {vm_mb():.1f} MiB", flush=True)

    async def watch() -> None:
        for pct in (10, 50, 100):
            while counters.claims_done < n * pct // 100:
                await asyncio.sleep(0.05)
            snap(f"{pct}%")

    watcher = asyncio.create_task(watch())
    await score_async(config, counters=counters)
    watcher.cancel()
    snap("end")
    return snaps


def main() -> int:
    """Parse the arguments, run, print the growth tables and the peak RSS."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=100_000)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--frames", type=int, default=1, help="traceback depth; > 1 groups by traceback")
    ap.add_argument("--no-trace", action="store_true", help="tracemalloc off: RSS figures only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dahl-memgrowth-") as tmp:
        answers = Path(tmp) / "answers.jsonl"
        write_stream(answers, args.claims)
        if not args.no_trace:
            tracemalloc.start(args.frames)
        snaps = asyncio.run(_run(answers, Path(tmp) / "out", args.claims))
        peak_traced = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    if args.no_trace:
        print(f"\n{args.claims:,} claims; peak RSS (VmHWM) {vm_mb():.1f} MiB")
        return 0
    key = "traceback" if args.frames > 1 else "lineno"
    filt = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    s = {k: v.filter_traces(filt) for k, v in snaps.items() if v is not None}
    if "10%" in s:
        _print_growth("10 % -> 50 %", s["50%"], s["10%"], key, args.top, args.claims)
        _print_growth("10 % -> 100 %", s["100%"], s["10%"], key, args.top, args.claims)
        _print_growth("100 % -> end of score_async (finalize)", s["end"], s["100%"], key, args.top, args.claims)
    print(f"\n{args.claims:,} claims; tracemalloc peak {peak_traced / 2**20:.1f} MiB; peak RSS (VmHWM) {vm_mb():.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
