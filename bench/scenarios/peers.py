"""Peers: the same check work as B1-B3 done by other clients, next to dahl.

Workloads (each client in a fresh worker process against a fresh mock process):

- ``b1``: zero latency, C = 64 in flight;
- ``b2``: lognormal latency (median 1 s, sigma 0.5), C = 200, no limit;
- ``b3``: 600 RPM in 1-second windows, 200 ms latency, C = 64; clients that take limits
  (dahl, LiteLLM Router, curator) are given rpm = 600.

Clients (``bench/scenarios/clients.py``): dahl; (a) ``bare`` aiohttp worker loop;
(b) ``openai``: ``asyncio.gather`` over all claims with a semaphore and the official
``AsyncOpenAI`` client (default retries); (c) ``sequential``: one request at a time with the
synchronous ``OpenAI`` client, as the published DAHL and FActScore code does; it runs only the
first claims (see ``SEQUENTIAL_LIMIT``) and its time for the whole set is extrapolated;
(d) ``litellm``: ``Router.acompletion`` + gather + semaphore; (e) ``curator``:
bespokelabs-curator ``LLM`` with its openai backend. (b)-(e) run in the peers' virtualenv
(``python -m bench peers-setup``, :mod:`bench.peers_env`) when it exists, because LiteLLM
and curator pin aiohttp and click versions that differ from dahl's; their workers import no
dahl module. A client that is not installed says how to install it, one that cannot run
says why: never a crash.

Reported per client: claims/s (ratio to dahl's), 429 share, peak RSS (MiB), CPU seconds per
1,000 claims, failed claims.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from bench.peers_env import SETUP_HINT
from bench.scenarios.common import (
    Figure,
    ScenarioResult,
    measured_run,
    peers_python,
    rounded,
    scenario_main,
    write_answers,
)

NAME = "peers"
CLIENTS = ("dahl", "bare", "openai", "sequential", "litellm", "curator")
WORKLOADS: dict[str, dict[str, Any]] = {
    "b1": {"mock": [], "concurrency": 64, "rpm": None},
    "b2": {"mock": ["--latency", "lognormal:1000:0.5", "--seed", "2"], "concurrency": 200, "rpm": None},
    "b3": {"mock": ["--rpm", "600", "--window-s", "1", "--latency-ms", "200"], "concurrency": 64, "rpm": 600},
}
# Quick sizes keep each run well past start-up (the slowest peer, LiteLLM at ~200 req/s,
# takes ~25 s of b1) while the whole scenario stays a few minutes.
CLAIMS = {
    "b1": {"tiny": 100, "quick": 5000, "full": 10000},
    "b2": {"tiny": 100, "quick": 2000, "full": 4000},
    "b3": {"tiny": 20, "quick": 120, "full": 600},
}
SEQUENTIAL_LIMIT = {
    "b1": {"tiny": 50, "quick": 300, "full": 1000},
    "b2": {"tiny": 2, "quick": 5, "full": 30},
    "b3": {"tiny": 5, "quick": 30, "full": 100},
}
_TAKES_LIMITS = ("dahl", "litellm", "curator")


_MODULES = {"openai": "openai", "sequential": "openai", "litellm": "litellm", "curator": "bespokelabs"}


def _python_for(client: str) -> tuple[str | None, str | None]:
    """(interpreter, reason it cannot run) for ``client``.

    dahl and the bare loop run here. The other peers run in the peers' virtualenv when
    ``python -m bench peers-setup`` made it (or ``$DAHL_BENCH_PEERS_PYTHON`` names one),
    else here when their module is importable, else they are reported with
    :data:`~bench.peers_env.SETUP_HINT`.
    """
    module = _MODULES.get(client)
    if module is None:
        return sys.executable, None
    python = peers_python()
    if python is not None:
        return python, None
    if importlib.util.find_spec(module) is None:
        return None, SETUP_HINT
    return sys.executable, None


def _why_failed(run: dict[str, Any]) -> str:
    stderr = str(run.get("stderr", ""))
    if "ModuleNotFoundError" in stderr:
        return SETUP_HINT
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"failed: {lines[-1][:120]}" if lines else "failed"


def _row(run: dict[str, Any]) -> dict[str, Any]:
    claims = int(run.get("claims_in") or 0)
    cpu = run.get("cpu_s")
    return {
        "claims_per_s": run.get("claims_per_s"),
        "share_429": run.get("share_429"),
        "peak_rss_mb": run.get("peak_rss_mb"),
        "cpu_s_per_1k": 1000.0 * float(cpu) / claims if claims and isinstance(cpu, float) else None,
        "claims_in": claims,
        "failed": int(claims - int(run.get("claims_out") or 0)),
        "latency_p50_ms": run.get("latency_p50_ms"),
        "latency_p99_ms": run.get("latency_p99_ms"),
    }


async def run(size: str, workdir: Path, clients: tuple[str, ...] = CLIENTS) -> ScenarioResult:
    """Run every client on every workload at ``size``; see the module docstring."""
    result = ScenarioResult(NAME, size)
    table: dict[str, dict[str, Any]] = {}
    for workload, setup in WORKLOADS.items():
        answers = workdir / f"{workload}.jsonl"
        n = write_answers(answers, CLAIMS[workload][size], seed=10)
        table[workload] = {}
        for client in clients:
            python, reason = _python_for(client)
            if reason is not None:
                table[workload][client] = {"status": reason}
                continue
            limit = SEQUENTIAL_LIMIT[workload][size] if client == "sequential" else None
            rpm = setup["rpm"] if client in _TAKES_LIMITS else None
            report = await measured_run(
                client, answers, setup["mock"], concurrency=setup["concurrency"], rpm=rpm,
                limit=limit, python=python, workdir=workdir,
            )
            if report.get("crashed"):
                table[workload][client] = {"status": _why_failed(report), "stderr": str(report.get("stderr"))[-1500:]}
                continue
            if client == "dahl":
                result.add_dahl_run(report)
            row = _row(report)
            row["status"] = "ok"
            if client == "sequential" and row["claims_per_s"]:
                row["extrapolated_s_for_all"] = n / row["claims_per_s"]
                result.notes.append(
                    f"{workload}: sequential ran the first {limit} of {n} claims; all {n} would take "
                    f"~{row['extrapolated_s_for_all']:.0f} s (extrapolated at its measured rate)."
                )
            table[workload][client] = row
    for workload, rows in table.items():
        dahl_rate = rows.get("dahl", {}).get("claims_per_s")
        for client in clients:
            row = rows.get(client, {})
            if row.get("status") != "ok":  # a row of the printed table too: it says what to do
                result.notes.append(f"{workload} {client}: {row.get('status')}")
                result.figures.append(Figure.make(f"{workload} {client} claims/s: {row.get('status')}", None))
                continue
            base = None if client == "dahl" else dahl_rate
            result.figures.append(Figure.make(f"{workload} {client} claims/s (vs dahl)", row["claims_per_s"], base))
            if WORKLOADS[workload]["rpm"] is not None:
                result.figures.append(Figure.make(f"{workload} {client} 429 share", row["share_429"]))
    result.runs = rounded(table)
    return result


def markdown(table: dict[str, dict[str, Any]]) -> str:
    """The peers' table: workload | client | claims/s | 429 share | peak RSS | CPU s/1k | failed."""
    lines = [
        "| workload | client | claims/s | 429 share | peak RSS MiB | CPU s / 1k claims | failed / claims |",
        "|---|---|---|---|---|---|---|",
    ]

    def fmt(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for workload, rows in table.items():
        for client, row in rows.items():
            if row.get("status") != "ok":
                lines.append(f"| {workload} | {client} | {row.get('status')} | | | | |")
                continue
            lines.append(
                f"| {workload} | {client} | {fmt(row['claims_per_s'], '.1f')} | {fmt(row['share_429'], '.3f')} | "
                f"{fmt(row['peak_rss_mb'], '.0f')} | {fmt(row['cpu_s_per_1k'], '.2f')} | {row['failed']} / {row['claims_in']} |"
            )
    return "\n".join(lines)


def main() -> int:
    """``python -m bench.scenarios.peers --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
