"""The benchmark runner: each scenario in a fresh process, JSON per scenario, one table.

A scenario is a module ``bench.scenarios.<module>`` with an async ``run(size, workdir)``
returning a :class:`bench.scenarios.common.ScenarioResult` and a ``main()`` built on
``scenario_main``; adding one (B0, B5-B7) means writing that module and one
:class:`ScenarioSpec` line in :data:`SCENARIOS`.

Exit status of :func:`run_suite`: 0, or 1 when a scenario crashed (no JSON, non-zero exit)
or dahl lost claims (claims in != claims out). Throughput figures never fail the suite.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["SCENARIOS", "ScenarioSpec", "format_table", "run_suite"]

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


@dataclass(frozen=True)
class ScenarioSpec:
    """One registered scenario.

    Attributes:
        name: what the user types (``b1``).
        module: module under ``bench.scenarios``.
        summary: one line for ``--help``.
        quick_s: expected wall seconds of the quick size on a 2-core machine.
        full_s: expected wall seconds of the full size.
    """

    name: str
    module: str
    summary: str
    quick_s: float
    full_s: float


SCENARIOS: tuple[ScenarioSpec, ...] = (
    ScenarioSpec("b0", "b0_micro", "micro: µs per claim of preprocess, rule split, keys, encoding, cache put/get", 6, 40),
    ScenarioSpec("b1", "b1_overhead", "engine overhead vs a bare aiohttp loop (zero latency, C=64)", 20, 60),
    ScenarioSpec("b2", "b2_latency", "latency-bound: lognormal/fixed 1 s latency, C=200", 35, 200),
    ScenarioSpec("b3", "b3_rate", "rate-bound: 600 RPM / TPM windows, learning limits, bursts", 65, 1200),
    ScenarioSpec("b4", "b4_faults", "faults: 500/503/reset/malformed/off-format; claims in = out", 10, 60),
    ScenarioSpec("b5", "b5_crash", "crash/resume: kill -9 N times + Ctrl-C, output equal to an uninterrupted run", 17, 90),
    ScenarioSpec("b6", "b6_rescore", "re-score: 1M cached claims, 1 % edited; lookup claims/s; cache on vs off", 19, 540),
    ScenarioSpec("b7", "b7_soak", "soak: 5M claims through the fake Checker; RSS flat, loop lag p99", 24, 560),
    ScenarioSpec("b8", "b8_recall", "recall: N answers x 20 facts, LLM coverage judge at 1 s, C=200; 1 % re-score", 20, 70),
    ScenarioSpec("b9", "b9_shards", "4 shards, one 600 RPM account: --coord (Redis) vs static split, TPM; single flight", 45, 1100),
    ScenarioSpec("b10", "b10_cpu", "client CPU ms per request, dahl vs bare loop, mock and client pinned to a core each", 20, 60),
    ScenarioSpec("peers", "peers", "bare aiohttp, openai gather, sequential, LiteLLM, curator on B1-B3", 300, 900),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "**no**"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
    return str(value)


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """One markdown table over scenario results: scenario | figure | value | baseline | ratio | target | pass.

    A crashed scenario gets one row saying so; a scenario that lost claims gets a
    ``claims in / out`` row that fails.
    """
    lines = ["| scenario | figure | value | baseline | ratio | target | pass |", "|---|---|---|---|---|---|---|"]
    for result in results:
        name = result.get("name", "?")
        if result.get("crashed"):
            lines.append(f"| {name} | CRASHED: {result.get('error', '')} | - | - | - | - | **no** |")
            continue
        for fig in result.get("figures", []):
            lines.append(
                f"| {name} | {fig['figure']} | {_fmt(fig['value'])} | {_fmt(fig['baseline'])} | "
                f"{_fmt(fig['ratio'])} | {fig['target'] or '-'} | {_fmt(fig['pass'])} |"
            )
        lost = result.get("claims_in") != result.get("claims_out")
        lines.append(
            f"| {name} | dahl claims in / out | {result.get('claims_out')} | {result.get('claims_in')} | - | "
            f"equal | {_fmt(not lost)} |"
        )
    return "\n".join(lines)


async def _run_one(spec: ScenarioSpec, size: str, out: Path, timeout_s: float) -> dict[str, Any]:
    """Run one scenario module in a fresh process; its JSON, or a ``crashed`` record."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    path = out / f"{spec.module}.json"
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", f"bench.scenarios.{spec.module}", "--size", size, "--json", str(path),
        cwd=REPO, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return {"name": spec.module, "crashed": True, "error": f"timed out after {timeout_s:.0f} s"}
    if not path.exists():
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        record = {"name": spec.module, "crashed": True, "error": f"exit {proc.returncode}: {tail[0][:200]}"}
        path.write_text(json.dumps({**record, "stderr": err.decode(errors="replace")[-8000:]}, indent=2))
        return record
    result: dict[str, Any] = json.loads(path.read_text())
    log.info("%s finished in %.1f s", spec.module, time.monotonic() - start)
    return result


def run_suite(
    names: Sequence[str] = (), *, size: str = "full", results_root: Path = RESULTS, timeout_s: float = 3600.0
) -> tuple[int, str, Path]:
    """Run scenarios (all when ``names`` is empty) one after another.

    Args:
        names: scenario names (``b1``...) or module names; empty = all of :data:`SCENARIOS`.
        size: ``tiny`` / ``quick`` / ``full``.
        results_root: JSON goes to ``results_root/<UTC timestamp>/<module>.json``.
        timeout_s: a scenario running longer is killed and reported as crashed, seconds.

    Returns:
        (exit status, markdown table, results folder); the status is 1 when a scenario
        crashed or lost claims, else 0.

    Raises:
        ValueError: an unknown scenario name.
    """
    by_name = {s.name: s for s in SCENARIOS} | {s.module: s for s in SCENARIOS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(s.name for s in SCENARIOS)}")
    specs = [by_name[n] for n in names] if names else list(SCENARIOS)
    out = results_root / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)

    async def all_of() -> list[dict[str, Any]]:
        return [await _run_one(spec, size, out, timeout_s) for spec in specs]

    results = asyncio.run(all_of())
    table = format_table(results)
    (out / "table.md").write_text(table + "\n")
    peers = next((r for r in results if r.get("name") == "peers" and not r.get("crashed")), None)
    if peers is not None:
        from bench.scenarios.peers import markdown

        (out / "peers.md").write_text(markdown(peers["runs"]) + "\n")
    bad = any(r.get("crashed") or r.get("claims_in") != r.get("claims_out") for r in results)
    return (1 if bad else 0), table, out
