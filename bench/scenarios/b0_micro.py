"""B0 micro: per-item CPU cost of the pure steps a claim goes through, in microseconds.

Measured in this process, each step timed over all items with ``time.perf_counter``:

- preprocessing (:func:`dahl.preprocess.preprocess`) per answer and per claim (answer
  cost divided by the claims :func:`dahl.adapters._rules.split_claims` finds in it);
- rule splitting (:func:`dahl.adapters._rules.split_claims`) per sentence;
- cache keys (:func:`dahl.cache._keys.check_key`) per claim, for the OpenAI-compatible
  Checker (templated request body) and for an offline Checker (fingerprint + texts);
- canonical encoding (msgspec msgpack, ``order="deterministic"``) of a claim's
  :class:`~dahl.cache._keys.KeyMaterial`;
- cache put (queue + writer-thread commit until :meth:`CacheStore.flush` returns) and
  get (a fresh :class:`CacheStore`, 64 concurrent ``get`` callers, batched reads), per claim;
- the hit path as the pipeline's lookup stage takes it: ``check_keys`` and one
  ``get_many`` per answer of 10 claims (64 answers at once), per claim.

Text: real biomedical answers (PubMedQA PQA-L long answers, ``shared/data/pubmedqa``)
when the shared data is present, plus seeded generated biomedical-like answers (always).
The one target: the per-answer hit path (keys + get_many) must fit the 20 µs per claim
that a 50,000 claims/s re-score (issue 4) leaves; the one-claim-at-a-time path (key +
get, as ``CachingChecker.check`` takes it) is printed beside it.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from bench.datasets import pubmedqa, shared_data_dir
from bench.scenarios.common import Figure, ScenarioResult, rounded, scenario_main

NAME = "b0_micro"
#: (generated answers, claims for key/encode/cache steps) per size.
SIZES = {"tiny": (50, 2_000), "quick": (150, 10_000), "full": (2_000, 200_000)}
#: Real answers used per size (PubMedQA has 1,000).
REAL = {"tiny": 50, "quick": 150, "full": 1_000}
#: Per-claim budget of a cache hit at 50,000 claims/s, microseconds.
HIT_BUDGET_US = 1e6 / 50_000
GET_WORKERS = 64

_GENES = "BRCA1 TP53 EGFR KRAS APOE CFTR HER2 PTEN MTHFR VEGF IL6 TNF".split()
_DRUGS = "metformin tamoxifen cisplatin imatinib warfarin statins rituximab aspirin".split()
_DISEASES = (
    "type 2 diabetes|breast cancer|cystic fibrosis|Alzheimer's disease|rheumatoid arthritis|"
    "non-small cell lung cancer|hypertension|chronic kidney disease"
).split("|")
_VERBS = "is associated with|reduces the risk of|is a first-line treatment for|is overexpressed in".split("|")


def generated_answers(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` seeded ``(question, response)`` pairs of biomedical-like prose (3-8 sentences each)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        disease = rng.choice(_DISEASES)
        sentences = []
        for _ in range(rng.randint(3, 8)):
            gene, drug = rng.choice(_GENES), rng.choice(_DRUGS)
            year = 1980 + rng.randrange(45)
            sentences.append(
                rng.choice(
                    (
                        f"{drug.capitalize()} {rng.choice(_VERBS)} {disease}.",
                        f"Mutations in {gene} were first linked to {disease} in {year}, and carriers show a "
                        f"{rng.randint(2, 9)}-fold higher risk.",
                        f"In a trial of {rng.randint(50, 5000)} patients, {drug} lowered mortality by "
                        f"{rng.randint(5, 40)}% (p < 0.0{rng.randint(1, 5)}).",
                        f"The {gene} protein regulates cell growth, DNA repair and apoptosis.",
                    )
                )
            )
        out.append((f"What is known about {disease}?", " ".join(sentences)))
    return out


def real_answers(limit: int) -> list[tuple[str, str]]:
    """First ``limit`` PubMedQA ``(question, long answer)`` pairs; [] when the shared data is absent."""
    try:
        rows, _ = pubmedqa(shared_data_dir())
    except FileNotFoundError:
        return []
    return [(str(r["question"]), str(r["response"])) for r in rows[:limit]]


def _per_item_us(items: list[Any], step: Callable[[Any], object]) -> float:
    """Mean wall microseconds of ``step(item)`` over ``items``."""
    t0 = time.perf_counter()
    for item in items:
        step(item)
    return (time.perf_counter() - t0) / max(1, len(items)) * 1e6


def _text_costs(answers: list[tuple[str, str]]) -> dict[str, float]:
    """Preprocess µs per answer and per claim, split µs per sentence, claims and sentences counted."""
    from dahl.adapters._rules import split_claims
    from dahl.preprocess import preprocess
    from dahl.sentences import split_sentences

    texts = [preprocess(q, r).text for q, r in answers]
    pre_us = _per_item_us(answers, lambda qa: preprocess(qa[0], qa[1]))
    sentences = sum(len(split_sentences(t)) for t in texts)
    t0 = time.perf_counter()
    claims = sum(len(split_claims(t)) for t in texts)
    split_s = time.perf_counter() - t0
    return {
        "answers": len(answers),
        "sentences": sentences,
        "claims": claims,
        "preprocess_us_per_answer": pre_us,
        "preprocess_us_per_claim": pre_us * len(answers) / max(1, claims),
        "split_us_per_sentence": split_s / max(1, sentences) * 1e6,
    }


class _OfflineChecker:
    """Key material of an offline Checker (no ``cache_request`` hook); never called."""

    fingerprint = "evidence/v1:corpus=0123456789abcdef:k=5"
    cacheable = True
    parser_version = "1"

    async def check(self, claim: Any, answer: Any) -> Any:
        raise AssertionError("B0 never checks a claim")


class _NoLane:
    async def call(self, attempt: Any, *, estimated_tokens: int) -> Any:
        raise AssertionError("B0 never calls a model")


def _claims(n: int, seed: int) -> Iterator[tuple[Any, Any]]:
    """``n`` (Claim, Answer) pairs, 10 claims per answer, biomedical-like wording."""
    from dahl.records import Answer, Claim

    rng = random.Random(seed)
    answer = Answer(id="a0", question="", response="")
    for i in range(n):
        if i % 10 == 0:
            answer = Answer(id=f"a{i // 10}", question=f"What is known about {rng.choice(_DISEASES)}?", response="")
        text = f"{rng.choice(_DRUGS).capitalize()} {rng.choice(_VERBS)} {rng.choice(_DISEASES)} (finding {i})."
        yield Claim(text=text, index=i % 10), answer


def _by_answer(items: list[tuple[Any, Any]]) -> list[tuple[list[Any], Any]]:
    """The (claim, answer) pairs grouped into (claims, answer) per answer, in order."""
    groups: list[tuple[list[Any], Any]] = []
    for claim, answer in items:
        if not groups or groups[-1][1] is not answer:
            groups.append(([], answer))
        groups[-1][0].append(claim)
    return groups


def _key_costs(n: int) -> dict[str, float]:
    """µs per claim of check_key (openai and offline Checker) and of the canonical encoding alone."""
    from dahl.adapters._openai import OpenAIChecker
    from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys
    from dahl.config import EndpointConfig
    from dahl.records import normalize_text

    items = list(_claims(n, seed=0))
    cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="mock", api_key_env="")
    openai = OpenAIChecker(cfg, None, _NoLane())  # type: ignore[arg-type]  # no call is made
    offline = _OfflineChecker()
    materials = [
        KeyMaterial(KEY_VERSION, "check", offline.fingerprint, None, normalize_text(a.question), normalize_text(c.text))
        for c, a in items
    ]
    encoder = msgspec.msgpack.Encoder(order="deterministic")
    answers = _by_answer(items)
    t0 = time.perf_counter()
    for claims, answer in answers:
        check_keys(openai, claims, answer)
    keys_openai_us = (time.perf_counter() - t0) / n * 1e6
    return {
        "claims": n,
        "keys_openai_us": keys_openai_us,
        "key_openai_us": _per_item_us(items, lambda ca: check_key(openai, ca[0], ca[1])),
        "key_offline_us": _per_item_us(items, lambda ca: check_key(offline, ca[0], ca[1])),
        "encode_us": _per_item_us(materials, encoder.encode),
    }


async def _cache_costs(n: int, directory: Path) -> dict[str, float]:
    """µs per claim of put (until flushed) and of batched gets from a reopened store; all must hit."""
    from dahl.cache import CacheStore
    from dahl.cache._keys import check_key
    from dahl.records import Label, Verdict

    offline = _OfflineChecker()
    keys = [check_key(offline, c, a) for c, a in _claims(n, seed=1)]
    verdict = Verdict(label=Label.SUPPORTED, checker=offline.fingerprint, raw="Supported")
    store = await asyncio.to_thread(CacheStore, directory)
    t0 = time.perf_counter()
    for key in keys:
        store.put(key, verdict, verdict.raw)
    await store.flush()
    put_s = time.perf_counter() - t0
    transactions = store.transactions
    await asyncio.to_thread(store.close)

    store = await asyncio.to_thread(CacheStore, directory)
    source = iter(keys)
    misses = 0

    async def worker() -> None:
        nonlocal misses
        for key in source:
            misses += await store.get(key) is None

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(GET_WORKERS):
            tg.create_task(worker())
    get_s = time.perf_counter() - t0

    # The pipeline's way: one get_many per answer (10 keys), GET_WORKERS answers at once.
    groups = iter([keys[i : i + 10] for i in range(0, n, 10)])

    async def answer_worker() -> None:
        nonlocal misses
        for group in groups:
            misses += sum(entry is None for entry in await store.get_many(group))

    t0 = time.perf_counter()
    async with asyncio.TaskGroup() as tg:
        for _ in range(GET_WORKERS):
            tg.create_task(answer_worker())
    get_many_s = time.perf_counter() - t0
    stats = await asyncio.to_thread(store.stats)
    await asyncio.to_thread(store.close)
    return {
        "claims": n,
        "put_us": put_s / n * 1e6,
        "get_us": get_s / n * 1e6,
        "get_many_us": get_many_s / n * 1e6,
        "misses": misses,
        "read_batches": stats["read_batches"],
        "put_transactions": transactions,
    }


async def run(size: str, workdir: Path) -> ScenarioResult:
    """Run B0 at ``size``; see the module docstring for the figures."""
    result = ScenarioResult(NAME, size)
    n_generated, n_claims = SIZES[size]
    generated = await asyncio.to_thread(_text_costs, generated_answers(n_generated, seed=0))
    real_pairs = real_answers(REAL[size])
    real = await asyncio.to_thread(_text_costs, real_pairs) if real_pairs else None
    keys = await asyncio.to_thread(_key_costs, n_claims)
    cache = await _cache_costs(n_claims, workdir / "cache")
    result.runs = rounded({"generated_text": generated, "real_text": real, "keys": keys, "cache": cache})
    # Claims in/out: every key computed and every cached claim read back.
    result.claims_in = n_claims
    result.claims_out = n_claims - int(cache["misses"])

    figs = result.figures
    for label, costs in (("generated", generated), ("PubMedQA", real)):
        if costs is None:
            continue
        figs += [
            Figure.make(f"preprocess µs/answer ({label} text)", costs["preprocess_us_per_answer"]),
            Figure.make(f"preprocess µs/claim ({label} text)", costs["preprocess_us_per_claim"]),
            Figure.make(f"rule split µs/sentence ({label} text)", costs["split_us_per_sentence"]),
        ]
    hit_us = keys["key_openai_us"] + cache["get_us"]
    answer_hit_us = keys["keys_openai_us"] + cache["get_many_us"]
    figs += [
        Figure.make("check_key µs/claim, openai Checker", keys["key_openai_us"]),
        Figure.make("check_key µs/claim, offline Checker", keys["key_offline_us"]),
        Figure.make("canonical msgpack encoding µs/claim", keys["encode_us"]),
        Figure.make("cache put µs/claim (until flushed)", cache["put_us"]),
        Figure.make(f"cache get µs/claim (batched, {GET_WORKERS} callers)", cache["get_us"]),
        Figure.make("check_keys µs/claim, openai Checker, per answer of 10", keys["keys_openai_us"]),
        Figure.make(f"cache get_many µs/claim (per answer of 10, {GET_WORKERS} answers at once)", cache["get_many_us"]),
        Figure.make("cache hit path µs/claim, one claim at a time (openai key + get)", hit_us),
        Figure.make("cache hit path µs/claim, per answer as the pipeline looks up (check_keys + get_many) "
                    "vs 20 µs budget", answer_hit_us, HIT_BUDGET_US, "<= 1.0"),
    ]
    if real is None:
        result.notes.append(f"shared data not found at {shared_data_dir()}: real-text figures skipped.")
    else:
        result.notes.append(
            f"PubMedQA: first {real['answers']} long answers, {real['sentences']} sentences, {real['claims']} rule claims."
        )
    result.notes.append("Wall time of one pass per step on one core; the machine may be shared (±20 %).")
    return result


def main() -> int:
    """``python -m bench.scenarios.b0_micro --size quick --json out.json``."""
    return scenario_main(NAME, run)


if __name__ == "__main__":
    sys.exit(main())
