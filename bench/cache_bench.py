"""Cache benchmark: put and cache-hit throughput of the result store (issue 4).

Command line::

    python -m bench.cache_bench [--claims N] [--per-answer K] [--workers W]
        [--checker openai|offline] [--dir PATH]

Builds N claims (K per answer) keyed like a real OpenAI-compatible Checker (the
templated request body is hashed; ``--checker offline``: keyed like an offline
Checker, from its fingerprint, question and claim), then:

1. put: computes every key and puts a verdict; timed until the writer thread has
   committed everything (``flush``);
2. get: closes the store, reopens it (a fresh run) and re-scores every claim through
   :class:`dahl.cache.CachingChecker` with W concurrent workers; every claim must be
   a hit (the inner Checker fails the run if it is ever called).

Prints one JSON object: checker, claims, workers, key_us_per_claim, put_per_s, get_per_s (cache-hit claims per second),
get_us_per_claim, key_us_per_claim, read_batches, transactions, size_bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

from dahl.adapters._openai import OpenAIChecker
from dahl.cache import CacheStore, CachingChecker, check_key
from dahl.config import EndpointConfig
from dahl.results._counters import RunCounters
from dahl.records import Answer, Claim, Label, Verdict


class _NoLane:
    """A lane that fails: the benchmark must be served from the cache alone."""

    async def call(self, attempt: Any, *, estimated_tokens: int) -> Any:
        raise AssertionError("cache miss: the model was called")


class _OfflineChecker:
    """An offline Checker (no cache_request hook) that must never be called."""

    fingerprint = "offline-bench/v1:corpus=0123456789abcdef"
    cacheable = True
    parser_version = "1"

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        raise AssertionError("cache miss: the checker was called")


def _openai_checker() -> OpenAIChecker:
    cfg = EndpointConfig(
        base_url="http://127.0.0.1:9/v1", model="bench-model", api_key_env="", seed=1
    )
    return OpenAIChecker(cfg, None, _NoLane())  # type: ignore[arg-type]  # session never used


def _claims(n: int, per_answer: int) -> list[tuple[Claim, Answer]]:
    out: list[tuple[Claim, Answer]] = []
    answer = Answer(id="a0", question="", response="")
    for i in range(n):
        if i % per_answer == 0:
            a = i // per_answer
            answer = Answer(id=f"a{a}", question=f"Tell me a bio of person number {a}.", response="")
        text = f"Person {i // per_answer} was born in year {1900 + i % 97} in city {i}."
        out.append((Claim(text=text, index=i % per_answer), answer))
    return out


async def _run(
    n: int, per_answer: int, workers: int, kind: str, directory: Path
) -> dict[str, Any]:
    checker: OpenAIChecker | _OfflineChecker = (
        _openai_checker() if kind == "openai" else _OfflineChecker()
    )
    items = _claims(n, per_answer)

    t0 = time.perf_counter()
    keys = [check_key(checker, claim, answer) for claim, answer in items]
    key_s = time.perf_counter() - t0

    store = CacheStore(directory)
    t0 = time.perf_counter()
    for key, (claim, _) in zip(keys, items, strict=True):
        label = Label.SUPPORTED if len(claim.text) % 2 else Label.UNSUPPORTED
        store.put(key, Verdict(label=label, checker=checker.fingerprint, raw=str(label)), str(label))
    await store.flush()
    put_s = time.perf_counter() - t0
    transactions = store.transactions
    store.close()
    del keys

    store = CacheStore(directory)
    counters = RunCounters()
    caching = CachingChecker(checker, store, counters)
    source: Iterator[tuple[Claim, Answer]] = iter(items)

    async def worker() -> None:
        for claim, answer in source:
            await caching.check(claim, answer)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(workers):
            tg.start_soon(worker)
    get_s = time.perf_counter() - t0
    stats = store.stats()
    store.close()
    if counters.claims_cached != n or counters.claims_checked != 0:
        raise AssertionError(f"expected {n} hits, got {counters.as_dict()}")
    return {
        "checker": kind,
        "claims": n,
        "workers": workers,
        "key_us_per_claim": round(key_s / n * 1e6, 2),
        "put_per_s": round(n / put_s),
        "get_per_s": round(n / get_s),
        "get_us_per_claim": round(get_s / n * 1e6, 2),
        "read_batches": stats["read_batches"],
        "claims_per_read_batch": round(n / max(1, stats["read_batches"]), 1),
        "transactions": transactions,
        "size_bytes": stats["size_bytes"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON figures; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claims", type=int, default=1_000_000)
    parser.add_argument("--per-answer", type=int, default=20)
    parser.add_argument("--workers", type=int, default=64, help="concurrent check() callers")
    parser.add_argument("--checker", choices=("openai", "offline"), default="openai")
    parser.add_argument("--dir", type=Path, default=None, help="cache directory (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dahl-cache-bench-") as tmp:
        directory = args.dir or Path(tmp) / "cache"
        result = asyncio.run(
            _run(args.claims, args.per_answer, args.workers, args.checker, directory)
        )
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
