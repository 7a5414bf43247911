"""Worker process: runs ONE client against the mock and writes a JSON report.

``python -m bench.scenarios.clients SPEC.json REPORT.json``; the spec is::

    {"kind": "dahl" | "bare" | "openai" | "sequential" | "litellm" | "curator",
     "answers": "answers.jsonl", "url": "http://127.0.0.1:PORT/v1",
     "concurrency": 64, "rpm": 600 | null, "tpm": null, "limit": null, "out_dir": "...",
     "bodies": "bodies.json" | null}

Every client sends the same request bodies: :func:`dahl.adapters._bodies.check_request_body`
over the claims of ``answers`` (``limit`` caps how many; the sequential loop uses it). The
orchestrator writes them to ``bodies`` (:func:`write_bodies`) for every client but dahl, so
a peer's worker imports no dahl module and runs in the peers' virtualenv. The
report holds ``claims_in`` (claims attempted), ``claims_out`` (claims that came back: with a
label for dahl, as a 200 reply for the others), ``wall_s``, ``cpu_s`` (user + system CPU of
this process during the run), ``peak_rss_mb`` (VmHWM: this process since exec, imports included),
``steady_rate`` (claims/s between 10 % and 90 % done), event-loop lag and, for the non-dahl
clients, request latency p50/p99 (ms, one HTTP call as the client sees it).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from bench.scenarios.common import LoopLag, ProgressSampler, cpu_seconds, peak_rss_mb, percentiles

__all__ = ["load_bodies", "main", "write_bodies"]

KINDS = ("dahl", "bare", "openai", "sequential", "litellm", "curator")
_MAX_ATTEMPTS = 8


def load_bodies(answers: Path, url: str, limit: int | None = None) -> list[dict[str, Any]]:
    """The check request bodies dahl would send for every claim of ``answers`` (first ``limit``)."""
    from dahl.adapters._bodies import check_request_body
    from dahl.config import EndpointConfig
    from dahl.records import normalize_text

    cfg = EndpointConfig(base_url=url, model="mock", api_key_env="")
    bodies: list[dict[str, Any]] = []
    with answers.open(encoding="utf-8") as fh:
        for line in fh:
            answer = json.loads(line)
            for claim in answer["claims"]:
                if limit is not None and len(bodies) >= limit:
                    return bodies
                bodies.append(check_request_body(cfg, answer["question"], normalize_text(claim["text"])))
    return bodies


def write_bodies(answers: Path, url: str, path: Path) -> int:
    """Write :func:`load_bodies` of ``answers`` to ``path`` as one JSON list; return how many.

    Run in dahl's environment, so that a peer's worker reads the bodies without importing
    dahl (the peers' virtualenv has no dahl).
    """
    bodies = load_bodies(answers, url)
    path.write_text(json.dumps(bodies), encoding="utf-8")
    return len(bodies)


def _bodies(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The request bodies of a peer's job: ``spec["bodies"]`` (first ``spec["limit"]``) when given."""
    limit = spec.get("limit")
    if spec.get("bodies"):
        bodies: list[dict[str, Any]] = json.loads(Path(spec["bodies"]).read_text(encoding="utf-8"))
        return bodies if limit is None else bodies[:limit]
    return load_bodies(Path(spec["answers"]), spec["url"], limit)


def _count_claims(answers: Path) -> int:
    with answers.open(encoding="utf-8") as fh:
        return sum(len(json.loads(line)["claims"]) for line in fh if line.strip())


async def _dahl(spec: dict[str, Any]) -> dict[str, Any]:
    from dahl import AdapterSettings, EndpointConfig, RunCounters, ScoreConfig, score_async

    answers = Path(spec["answers"])
    out_dir = Path(spec["out_dir"])
    endpoint = EndpointConfig(
        base_url=spec["url"], model="mock", api_key_env="", rpm=spec.get("rpm"), tpm=spec.get("tpm"),
        max_in_flight=int(spec["concurrency"]), timeout_s=float(spec.get("timeout_s", 60.0)),
    )
    config = ScoreConfig(
        inputs=(answers,), out_dir=out_dir, n_boot=10,
        adapters=AdapterSettings(splitter="given", checker="openai", check_endpoint=endpoint),
        # A cache of its own: every claim is a first-time call, and no other run holds the lock.
        cache_dir=out_dir / "cache",
    )
    claims_in = _count_claims(answers)
    counters = RunCounters()
    cpu0, t0 = cpu_seconds(), time.monotonic()
    async with LoopLag() as lag, ProgressSampler(lambda: counters.claims_done) as progress:
        report = await score_async(config, counters=counters)
    wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
    labels: Counter[str] = Counter()
    unexplained = 0  # error labels without an error text
    with report.answers_path.open(encoding="utf-8") as fh:
        for line in fh:
            for claim in json.loads(line)["claims"]:
                labels[claim["label"]] += 1
                unexplained += claim["label"] == "error" and not claim.get("error")
    run = report.summary.get("run", {})
    return {
        "claims_in": claims_in,
        "claims_out": sum(labels.values()),
        "ok": sum(n for label, n in labels.items() if label != "error"),
        "failed": labels.get("error", 0),
        "labels": dict(labels),
        "error_without_reason": unexplained,
        "errors": run.get("errors", {}),
        "run": run,
        "wall_s": wall,
        "cpu_s": cpu,
        "steady_rate": progress.steady_rate(claims_in),
        **lag.summary(),
    }


class _Tally:
    """Outcome counts and per-request latencies of a non-dahl client."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0
        self.latencies_ms: list[float] = []
        self.errors: Counter[str] = Counter()

    def report(self, claims_in: int, wall: float, cpu: float) -> dict[str, Any]:
        p50, p99 = percentiles(self.latencies_ms)
        return {
            "claims_in": claims_in,
            "claims_out": self.ok,
            "ok": self.ok,
            "failed": self.failed,
            "errors": dict(self.errors),
            "wall_s": wall,
            "cpu_s": cpu,
            "latency_p50_ms": p50,
            "latency_p99_ms": p99,
        }


async def _measured(
    bodies: list[dict[str, Any]], tally: _Tally, body: Callable[[], Coroutine[Any, Any, None]]
) -> dict[str, Any]:
    """Run ``body()`` under the lag probe and progress sampler; return the tally's report."""
    cpu0, t0 = cpu_seconds(), time.monotonic()
    async with LoopLag() as lag, ProgressSampler(lambda: tally.ok + tally.failed) as progress:
        await body()
    report = tally.report(len(bodies), time.monotonic() - t0, cpu_seconds() - cpu0)
    report["steady_rate"] = progress.steady_rate(len(bodies))
    report.update(lag.summary())
    return report


async def _bare(spec: dict[str, Any]) -> dict[str, Any]:
    """A fixed pool of aiohttp workers; same connector limits as dahl's session.

    Retries 429 after ``Retry-After`` and 5xx/connection errors after 0.5·2^n s, up to
    8 attempts: the least a careful hand-written loop does. No rate limiter.
    """
    import aiohttp
    import orjson

    concurrency = int(spec["concurrency"])
    bodies = _bodies(spec)
    url = f"{spec['url']}/chat/completions"
    tally = _Tally()
    work = iter(bodies)

    async def worker(session: aiohttp.ClientSession) -> None:
        loop = asyncio.get_running_loop()
        for body in work:
            data = orjson.dumps(body)
            for attempt in range(_MAX_ATTEMPTS):
                t = loop.time()
                wait = 0.5 * 2**attempt
                try:
                    async with session.post(url, data=data, headers={"Content-Type": "application/json"}) as r:
                        payload = await r.read()
                        status = r.status
                        retry_after = r.headers.get("Retry-After")
                    tally.latencies_ms.append((loop.time() - t) * 1000)
                    if status == 200:
                        orjson.loads(payload)
                        tally.ok += 1
                        break
                    tally.errors[str(status)] += 1
                    if status == 429 and retry_after is not None:
                        wait = float(retry_after)
                except (aiohttp.ClientError, orjson.JSONDecodeError, TimeoutError) as exc:
                    tally.errors[type(exc).__name__] += 1
                await asyncio.sleep(wait)
            else:
                tally.failed += 1

    async def run() -> None:
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        timeout = aiohttp.ClientTimeout(total=float(spec.get("timeout_s", 60.0)))
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            async with asyncio.TaskGroup() as tg:
                for _ in range(concurrency):
                    tg.create_task(worker(session))

    return await _measured(bodies, tally, run)


async def _openai(spec: dict[str, Any]) -> dict[str, Any]:
    """``asyncio.gather`` over all claims behind a semaphore, official client, default retries."""
    from openai import AsyncOpenAI, OpenAIError

    concurrency = int(spec["concurrency"])
    bodies = _bodies(spec)
    tally = _Tally()

    async def run() -> None:
        client = AsyncOpenAI(base_url=spec["url"], api_key="x")
        semaphore = asyncio.Semaphore(concurrency)
        loop = asyncio.get_running_loop()

        async def one(body: dict[str, Any]) -> None:
            async with semaphore:
                t = loop.time()
                try:
                    await client.chat.completions.create(**body)
                except OpenAIError as exc:
                    tally.failed += 1
                    tally.errors[type(exc).__name__] += 1
                    return
                tally.latencies_ms.append((loop.time() - t) * 1000)
                tally.ok += 1

        try:
            await asyncio.gather(*(one(b) for b in bodies))
        finally:
            await client.close()

    return await _measured(bodies, tally, run)


def _sequential(spec: dict[str, Any]) -> dict[str, Any]:
    """One request at a time with the official synchronous client (as published research code)."""
    from openai import OpenAI, OpenAIError

    bodies = _bodies(spec)
    tally = _Tally()
    client = OpenAI(base_url=spec["url"], api_key="x")
    cpu0, t0 = cpu_seconds(), time.monotonic()
    for body in bodies:
        t = time.monotonic()
        try:
            client.chat.completions.create(**body)
        except OpenAIError as exc:
            tally.failed += 1
            tally.errors[type(exc).__name__] += 1
            continue
        tally.latencies_ms.append((time.monotonic() - t) * 1000)
        tally.ok += 1
    client.close()
    report = tally.report(len(bodies), time.monotonic() - t0, cpu_seconds() - cpu0)
    report["steady_rate"] = len(bodies) / report["wall_s"] if report["wall_s"] else None
    return report


async def _litellm(spec: dict[str, Any]) -> dict[str, Any]:
    """LiteLLM ``Router`` (rpm/tpm given when the workload has limits) + gather + semaphore."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
    import litellm  # type: ignore[import-not-found, unused-ignore]
    from litellm import Router  # type: ignore[import-not-found, unused-ignore]

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    concurrency = int(spec["concurrency"])
    bodies = _bodies(spec)
    params: dict[str, Any] = {"model": "openai/mock", "api_base": spec["url"], "api_key": "x"}
    for key in ("rpm", "tpm"):
        if spec.get(key):
            params[key] = int(spec[key])
    limited = "rpm" in params or "tpm" in params
    router = Router(
        model_list=[{"model_name": "mock", "litellm_params": params}],
        routing_strategy="usage-based-routing-v2" if limited else "simple-shuffle",
    )
    tally = _Tally()

    async def run() -> None:
        semaphore = asyncio.Semaphore(concurrency)
        loop = asyncio.get_running_loop()

        async def one(body: dict[str, Any]) -> None:
            kwargs = {k: v for k, v in body.items() if k != "model"}
            async with semaphore:
                t = loop.time()
                try:
                    await router.acompletion(model="mock", **kwargs)
                except Exception as exc:  # noqa: BLE001 - a peer's failure is a figure, not a crash
                    tally.failed += 1
                    tally.errors[type(exc).__name__] += 1
                    return
                tally.latencies_ms.append((loop.time() - t) * 1000)
                tally.ok += 1

        await asyncio.gather(*(one(b) for b in bodies))

    return await _measured(bodies, tally, run)


def _curator(spec: dict[str, Any]) -> dict[str, Any]:
    """bespokelabs-curator ``LLM`` with the openai backend pointed at the mock."""
    os.environ.setdefault("CURATOR_CACHE_DIR", tempfile.mkdtemp(prefix="curator-"))
    os.environ.setdefault("TELEMETRY_ENABLED", "False")
    os.environ.setdefault("CURATOR_DISABLE_RICH_DISPLAY", "1")
    from bespokelabs import curator  # type: ignore[import-not-found, unused-ignore]

    bodies = _bodies(spec)

    class Check(curator.LLM):  # type: ignore[misc, unused-ignore]
        def prompt(self, row: dict[str, Any]) -> Any:
            return row["messages"]

        def parse(self, row: dict[str, Any], response: Any) -> dict[str, Any]:
            return {"reply": str(response)}

    backend_params: dict[str, Any] = {
        "base_url": spec["url"],
        "api_key": "x",
        "max_requests_per_minute": int(spec.get("rpm") or 1_000_000),
        "max_tokens_per_minute": int(spec.get("tpm") or 1_000_000_000),
        "require_all_responses": False,
    }
    llm = Check(
        model_name="gpt-4o-mini",
        backend="openai",
        backend_params=backend_params,
        generation_params={"temperature": 0.0, "max_tokens": bodies[0]["max_tokens"]},
    )
    cpu0, t0 = cpu_seconds(), time.monotonic()
    out = llm([{"messages": b["messages"]} for b in bodies])
    wall, cpu = time.monotonic() - t0, cpu_seconds() - cpu0
    dataset = getattr(out, "dataset", out)
    ok = len(dataset)
    tally = _Tally()
    tally.ok, tally.failed = ok, len(bodies) - ok
    report = tally.report(len(bodies), wall, cpu)
    report["steady_rate"] = None
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``SPEC.json REPORT.json``; returns 0 (a crash exits non-zero with a traceback)."""
    args = sys.argv[1:] if argv is None else argv
    spec: dict[str, Any] = json.loads(Path(args[0]).read_text())
    kind = spec["kind"]
    if kind not in KINDS:
        raise SystemExit(f"unknown client kind {kind!r}")
    async_kinds: dict[str, Callable[[dict[str, Any]], Coroutine[Any, Any, dict[str, Any]]]] = {
        "dahl": _dahl, "bare": _bare, "openai": _openai, "litellm": _litellm,
    }
    if kind in async_kinds:
        report = asyncio.run(async_kinds[kind](spec))
    else:
        report = _sequential(spec) if kind == "sequential" else _curator(spec)
    report["kind"] = kind
    report["peak_rss_mb"] = peak_rss_mb()
    report["cpu_total_s"] = cpu_seconds()
    Path(args[1]).write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
