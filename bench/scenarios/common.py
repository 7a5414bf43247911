"""What every scenario shares: generated data, the mock server process, worker processes,
meters (CPU, peak RSS, event-loop lag, progress) and the result record written as JSON.

A scenario process (``python -m bench.scenarios.bN_...``) orchestrates: it writes seeded
input, starts a fresh mock server process per measured run, and runs each client in a
fresh worker process (``python -m bench.scenarios.clients``), so CPU seconds and peak RSS
belong to one client alone and nothing leaks between runs. On a 2-core machine the mock
and the client each get a core; the orchestrator only waits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import os
import platform
import random
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from bench.peers_env import peers_python, tiktoken_cache_dir

__all__ = [
    "REPO",
    "SIZES",
    "Figure",
    "LoopLag",
    "MockProcess",
    "ProgressSampler",
    "ScenarioResult",
    "machine_info",
    "max_window_count",
    "measured_run",
    "peak_rss_mb",
    "peers_python",
    "percentiles",
    "rounded",
    "run_worker",
    "scenario_main",
    "share_429",
    "write_answers",
]

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
#: Scenario sizes: ``tiny`` (test suite, seconds), ``quick`` (CI smoke), ``full`` (figures).
SIZES = ("tiny", "quick", "full")

_WORDS = (
    "river mountain archive council harbor library orchestra treaty railway observatory "
    "festival cathedral laboratory province museum dynasty expedition canal fortress academy"
).split()
_CITIES = "Lyon Porto Kraków Turin Ghent Bergen Leipzig Sevilla Utrecht Tartu Aarhus Graz".split()


# ----------------------------------------------------------------------------- results


def _passes(value: float, target: str) -> bool:
    op, _, bound = target.partition(" ")
    limit = float(bound)
    return value >= limit if op == ">=" else value <= limit


@dataclass
class Figure:
    """One measured figure of a scenario (one row of the suite's table).

    Attributes:
        figure: name, with its unit, e.g. ``"dahl req/s"``.
        value: the measured value.
        baseline: what ``value`` is compared with (a peer's figure or a physical bound), or None.
        ratio: ``value / baseline`` when there is a baseline.
        target: ``">= 0.85"`` or ``"<= 0.01"`` applied to ``ratio`` (or to ``value`` when
            there is no baseline); None for an informational figure.
        passed: the target verdict, None when there is no target.
    """

    figure: str
    value: float | None
    baseline: float | None = None
    ratio: float | None = None
    target: str | None = None
    passed: bool | None = None

    @classmethod
    def make(
        cls, figure: str, value: float | None, baseline: float | None = None, target: str | None = None
    ) -> Figure:
        """Build a figure, computing ``ratio`` and ``passed`` (target as ``">= X"`` / ``"<= X"``)."""
        ratio = value / baseline if value is not None and baseline else None
        checked = ratio if baseline is not None else value
        passed = None if target is None or checked is None else _passes(checked, target)
        return cls(figure, value, baseline, ratio, target, passed)

    def as_dict(self) -> dict[str, Any]:
        """JSON view: ``{"figure", "value", "baseline", "ratio", "target", "pass"}``."""
        return {
            "figure": self.figure,
            "value": self.value,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "target": self.target,
            "pass": self.passed,
        }


@dataclass
class ScenarioResult:
    """Everything one scenario reports; written as JSON by :func:`scenario_main`.

    Attributes:
        name: scenario name (``b1_overhead``...).
        size: ``tiny`` / ``quick`` / ``full``.
        figures: the table rows.
        claims_in: claims given to dahl over all its runs in this scenario.
        claims_out: claims that came back with a label (``error`` included) in ``answers.jsonl``.
        runs: raw measurements per run (worker reports and mock stats).
        notes: caveats stated next to the figures (extrapolation, bottlenecks).
    """

    name: str
    size: str
    figures: list[Figure] = field(default_factory=list)
    claims_in: int = 0
    claims_out: int = 0
    runs: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add_dahl_run(self, report: dict[str, Any]) -> None:
        """Count a dahl worker report's claims into ``claims_in`` / ``claims_out``."""
        self.claims_in += int(report.get("claims_in", 0))
        self.claims_out += int(report.get("claims_out", 0))

    def as_dict(self, duration_s: float) -> dict[str, Any]:
        """JSON view with the machine and the scenario's wall time in seconds."""
        return {
            "name": self.name,
            "size": self.size,
            "figures": [f.as_dict() for f in self.figures],
            "claims_in": self.claims_in,
            "claims_out": self.claims_out,
            "runs": self.runs,
            "notes": self.notes,
            "duration_s": round(duration_s, 2),
            "machine": machine_info(),
        }


def machine_info() -> dict[str, Any]:
    """nproc, CPU model (from /proc/cpuinfo), Python version and platform."""
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"nproc": os.cpu_count(), "cpu": model, "python": platform.python_version(), "os": platform.platform()}


# ----------------------------------------------------------------------------- data


def write_answers(path: Path, n_claims: int, *, per_answer: int = 10, seed: int = 0) -> int:
    """Write a dahl JSONL file of answers with pre-split, unique claims.

    Args:
        path: output file.
        n_claims: claims in total (the last answer may hold fewer than ``per_answer``).
        per_answer: claims per answer.
        seed: seeds the wording; equal seeds give byte-identical files.

    Returns:
        The number of claims written (= ``n_claims``).
    """
    rng = random.Random(seed)
    lines = []
    for a in range(math.ceil(n_claims / per_answer)):
        subject = f"The {rng.choice(_WORDS)} of {rng.choice(_CITIES)} no. {a}"
        count = min(per_answer, n_claims - a * per_answer)
        claims = [
            # The claim number makes every text unique, so no claim is deduplicated or cached.
            f"{subject} was founded in {1500 + rng.randrange(500)} by a {rng.choice(_WORDS)} guild (fact {a}.{i})."
            for i in range(count)
        ]
        lines.append(
            json.dumps(
                {
                    "id": f"a{a}",
                    "question": f"Tell me about {subject}.",
                    "response": " ".join(claims),
                    "model": "bench",
                    "claims": [{"text": c} for c in claims],
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return n_claims


# ----------------------------------------------------------------------------- meters


def peak_rss_mb() -> float:
    """Peak resident set size of this process since it started its program, MiB.

    ``VmHWM`` of ``/proc/self/status`` (kB): the high-water mark of this process's own
    memory. ``getrusage``'s ``ru_maxrss`` (the fallback where /proc is missing) is no use in
    a worker: Linux carries the parent's high-water mark across fork and exec into it.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentiles(values: Sequence[float], qs: Sequence[float] = (50, 99)) -> list[float | None]:
    """Percentiles ``qs`` (0-100, linear interpolation) of ``values``; Nones when empty."""
    if not values:
        return [None for _ in qs]
    ordered = sorted(values)
    out: list[float | None] = []
    for q in qs:
        pos = (len(ordered) - 1) * q / 100.0
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        out.append(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
    return out


class LoopLag:
    """Event-loop lag probe: a task sleeping ``interval_s`` records how late it wakes.

    Use as ``async with LoopLag() as lag: ...``; then ``lag.p50_ms`` / ``lag.p99_ms``.
    A blocked loop shows as lateness of the probe's wake-ups (milliseconds).
    """

    def __init__(self, interval_s: float = 0.010) -> None:
        self.interval_s = interval_s
        self.samples_ms: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start = loop.time()
            await asyncio.sleep(self.interval_s)
            self.samples_ms.append(max(0.0, (loop.time() - start - self.interval_s) * 1000.0))

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def summary(self) -> dict[str, float | None]:
        """``{"lag_p50_ms", "lag_p99_ms", "lag_max_ms"}``."""
        p50, p99 = percentiles(self.samples_ms)
        return {"lag_p50_ms": p50, "lag_p99_ms": p99, "lag_max_ms": max(self.samples_ms, default=None)}


class ProgressSampler:
    """Samples a monotone "claims done" count every ``interval_s`` to measure steady throughput.

    Args:
        done: returns the count of finished claims now.
        interval_s: sampling period, seconds.
    """

    def __init__(self, done: Callable[[], int], interval_s: float = 0.1) -> None:
        self._done = done
        self.interval_s = interval_s
        self.series: list[tuple[float, int]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        t0 = time.monotonic()
        while True:
            self.series.append((time.monotonic() - t0, self._done()))
            await asyncio.sleep(self.interval_s)

    async def __aenter__(self) -> ProgressSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.series.append((self.series[-1][0] + self.interval_s if self.series else 0.0, self._done()))

    def steady_rate(self, total: int, lo: float = 0.1, hi: float = 0.9) -> float | None:
        """Claims per second between the moments ``lo`` and ``hi`` of ``total`` were done.

        Excludes the warm-up (pipeline filling, connections opening) and the drain (the
        last requests finish with fewer in flight). None when the run was too short.
        """
        return steady_rate(self.series, total, lo, hi)


def steady_rate(series: Sequence[tuple[float, int]], total: int, lo: float = 0.1, hi: float = 0.9) -> float | None:
    """Rate (count per second) between the first samples reaching ``lo·total`` and ``hi·total``."""
    start = next(((t, n) for t, n in series if n >= lo * total), None)
    end = next(((t, n) for t, n in series if n >= hi * total), None)
    if start is None or end is None or end[0] <= start[0]:
        return None
    return (end[1] - start[1]) / (end[0] - start[0])


def max_window_count(series: Sequence[tuple[float, int]], window_s: float) -> int:
    """Largest increase of a cumulative count ``[(t_s, count), ...]`` within any ``window_s``.

    Samples are points, so the answer is exact only up to the sampling period.
    """
    best = 0
    j = 0
    for i in range(len(series)):
        while series[i][0] - series[j][0] > window_s + 1e-9:
            j += 1
        best = max(best, series[i][1] - series[j][1])
    return best


def share_429(stats: dict[str, Any]) -> float | None:
    """Fraction of the mock's requests answered 429 (None when no request arrived)."""
    requests = int(stats.get("requests", 0))
    return int(stats.get("status", {}).get("429", 0)) / requests if requests else None


# ----------------------------------------------------------------------------- processes


def _env(python: str | None = None) -> dict[str, str]:
    """This environment with the repository on ``PYTHONPATH``; for another interpreter, also
    ``TIKTOKEN_CACHE_DIR`` at the encodings LiteLLM ships there (curator needs one offline)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    if python is not None and "TIKTOKEN_CACHE_DIR" not in env:
        cache = tiktoken_cache_dir(python)
        if cache is not None:
            env["TIKTOKEN_CACHE_DIR"] = cache
    return env


class MockProcess:
    """The mock server (``python -m bench.mockserver``) in its own process.

    Use as ``async with MockProcess(["--latency-ms", "200", "--rpm", "600"]) as mock:``;
    ``mock.url`` is the ``/v1`` base URL, ``await mock.stats()`` its counters, and after
    the block ``mock.final`` holds the counters it printed on SIGTERM.

    Args:
        args: mock flags (see ``bench/mockserver.py``), without ``--port``.
        ready_timeout_s: seconds to wait for its ``ready`` line.
        cpus: CPU numbers the mock process is pinned to (``os.sched_setaffinity``) once it
            is ready; None leaves it where it started.

    Raises:
        RuntimeError: the process exited or did not print ``ready`` in time.
    """

    def __init__(self, args: Sequence[str], ready_timeout_s: float = 20.0, cpus: set[int] | None = None) -> None:
        self.args = list(args)
        self.cpus = cpus
        self.ready_timeout_s = ready_timeout_s
        self.root = ""
        self.url = ""
        self.final: dict[str, Any] = {}
        self.final_cpu_s: float | None = None
        self._cpu0 = 0.0
        self._proc: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> MockProcess:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.mockserver", "--port", "0", *self.args,
            cwd=REPO, env=_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )
        assert self._proc.stdout is not None
        try:
            line = await asyncio.wait_for(self._proc.stdout.readline(), self.ready_timeout_s)
        except TimeoutError:
            line = b""
        text = line.decode().strip()
        if not text.startswith("ready "):
            self._proc.kill()
            await self._proc.wait()
            raise RuntimeError(f"mock server did not start (args {self.args}): {text!r}")
        self.root = text.split(" ", 1)[1]
        self.url = f"{self.root}/v1"
        if self.cpus is not None:
            os.sched_setaffinity(self._proc.pid, self.cpus)
        self._cpu0 = self.cpu_s() or 0.0  # start-up (imports) is not serving
        self._session = aiohttp.ClientSession()
        return self

    async def stats(self) -> dict[str, Any]:
        """Current counters of the mock (``GET /stats``)."""
        assert self._session is not None
        async with self._session.get(f"{self.root}/stats") as response:
            data: dict[str, Any] = await response.json()
            return data

    def cpu_s(self) -> float | None:
        """CPU seconds (user + system) the mock process has used, from /proc (None elsewhere)."""
        if self._proc is None:
            return None
        try:
            fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # Fields 14 and 15 of proc(5) (utime, stime) in clock ticks; index 11/12 after the comm.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def __aexit__(self, *exc: object) -> None:
        cpu = self.cpu_s()
        self.final_cpu_s = None if cpu is None else cpu - self._cpu0
        if self._session is not None:
            await self._session.close()
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 10.0)
            lines = out.decode().strip().splitlines()
            if lines:
                self.final = json.loads(lines[-1])
        except (TimeoutError, ValueError):
            proc.kill()
            await proc.wait()


async def run_worker(
    spec: dict[str, Any],
    *,
    python: str | None = None,
    poll: MockProcess | None = None,
    poll_interval_s: float = 0.1,
    timeout_s: float = 1800.0,
) -> dict[str, Any]:
    """Run one client in a fresh worker process (``python -m bench.scenarios.clients``).

    Args:
        spec: the worker's job (see ``bench/scenarios/clients.py``), JSON-serializable.
        python: interpreter; default this one.
        poll: when given, the mock's ``/stats`` is sampled every ``poll_interval_s`` while the
            worker runs; the report gets ``"admitted_series": [[t_s, n_200_or_fault], ...]``.
        timeout_s: the worker is killed after this many seconds.

    Returns:
        The worker's JSON report; ``{"crashed": True, "stderr": ...}`` when it failed.
    """
    with tempfile.TemporaryDirectory(prefix="dahl-bench-") as tmp:
        spec_path = Path(tmp) / "spec.json"
        out_path = Path(tmp) / "report.json"
        spec_path.write_text(json.dumps(spec))
        proc = await asyncio.create_subprocess_exec(
            python or sys.executable, "-m", "bench.scenarios.clients", str(spec_path), str(out_path),
            cwd=REPO, env=_env(python), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        series: list[tuple[float, int]] = []

        async def sample() -> None:
            assert poll is not None
            t0 = time.monotonic()
            while True:
                stats = await poll.stats()
                # Admitted = everything not refused with 429 (faults included).
                admitted = int(stats["requests"]) - int(stats["status"].get("429", 0)) - int(stats["in_flight"])
                series.append((time.monotonic() - t0, admitted))
                await asyncio.sleep(poll_interval_s)

        poller = asyncio.get_running_loop().create_task(sample()) if poll is not None else None
        try:
            _, err = await asyncio.wait_for(proc.communicate(), timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            return {"crashed": True, "stderr": f"worker timed out after {timeout_s} s"}
        finally:
            if poller is not None:
                poller.cancel()
                try:
                    await poller
                except (asyncio.CancelledError, aiohttp.ClientError):
                    pass
        if proc.returncode != 0 or not out_path.exists():
            return {"crashed": True, "returncode": proc.returncode, "stderr": err.decode()[-4000:]}
        report: dict[str, Any] = json.loads(out_path.read_text())
        if poll is not None:
            report["admitted_series"] = [[round(t, 3), n] for t, n in series]
        return report


# ----------------------------------------------------------------------------- CLI


def scenario_main(
    name: str,
    run: Callable[[str, Path], Coroutine[Any, Any, ScenarioResult]],
    argv: Sequence[str] | None = None,
    sizes: Sequence[str] = SIZES,
) -> int:
    """Command line of a scenario module: ``--size tiny|quick|full --json PATH``.

    Runs ``run(size, workdir)`` and writes the result JSON to ``--json`` (stdout by default).
    ``sizes`` are the ``--size`` choices (a scenario may add its own beyond :data:`SIZES`).

    Returns:
        0 on success, 1 when dahl lost claims (claims in != claims out).
    """
    parser = argparse.ArgumentParser(prog=f"python -m bench.scenarios.{name}")
    parser.add_argument("--size", choices=sizes, default="quick")
    parser.add_argument("--json", type=Path, help="write the result here (default: stdout)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"dahl-{name}-") as tmp:
        result = asyncio.run(run(args.size, Path(tmp)))
    payload = json.dumps(result.as_dict(time.monotonic() - start), indent=2)
    if args.json is not None:
        args.json.write_text(payload + "\n")
    else:
        sys.stdout.write(payload + "\n")
    return 0 if result.claims_in == result.claims_out else 1


async def measured_run(
    kind: str,
    answers: Path,
    mock_args: Sequence[str],
    *,
    concurrency: int,
    workdir: Path,
    rpm: float | None = None,
    tpm: float | None = None,
    limit: int | None = None,
    poll: bool = False,
    python: str | None = None,
    mock_cpus: set[int] | None = None,
) -> dict[str, Any]:
    """One client run against a fresh mock process; the worker report plus the mock's view.

    Args:
        kind: client kind (see ``bench/scenarios/clients.py``).
        answers: generated input file.
        mock_args: mock flags (latency, limits, faults).
        concurrency: requests in flight (dahl's ``max_in_flight``; peers' pool/semaphore size).
        workdir: scratch folder; dahl writes its output under it.
        rpm, tpm: limits configured on the client (None = not configured).
        limit: first ``limit`` claims only (the sequential peer).
        poll: sample the mock's admitted count every 0.1 s (``admitted_series``).
        python: interpreter of the worker (the peers' virtualenv for the peers, when made).
        mock_cpus: CPU numbers to pin the mock process to (None: not pinned); the worker
            runs where this process may run.

    Returns:
        The worker report with ``mock`` (final ``/stats``), ``mock_cpu_s``, ``requests_per_s``
        (mock requests / client wall seconds) and ``share_429``.
    """
    out_dir = workdir / f"{kind}-{time.monotonic_ns()}"
    spec = {
        "kind": kind, "answers": str(answers), "concurrency": concurrency, "rpm": rpm, "tpm": tpm,
        "limit": limit, "out_dir": str(out_dir),
    }
    async with MockProcess(mock_args, cpus=mock_cpus) as mock:
        spec["url"] = mock.url
        if kind != "dahl":  # a peer's worker reads its bodies from a file: it may not have dahl
            from bench.scenarios.clients import write_bodies

            spec["bodies"] = str(workdir / f"bodies-{kind}-{time.monotonic_ns()}.json")
            write_bodies(answers, mock.url, Path(spec["bodies"]))
        report = await run_worker(spec, python=python, poll=mock if poll else None)
    report["mock"] = mock.final
    report["mock_cpu_s"] = mock.final_cpu_s
    wall = report.get("wall_s")
    requests = int(mock.final.get("requests", 0))
    report["requests_per_s"] = requests / wall if wall else None
    report["claims_per_s"] = report.get("claims_out", 0) / wall if wall else None
    report["share_429"] = share_429(mock.final)
    return report


def rounded(obj: Any, digits: int = 4) -> Any:
    """``obj`` with floats rounded to ``digits`` significant places (for readable JSON)."""
    if isinstance(obj, float):
        return float(f"{obj:.{digits}g}")
    if isinstance(obj, dict):
        return {k: rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [rounded(v, digits) for v in obj]
    return obj
