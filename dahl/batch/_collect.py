"""Batch results into the cache, stored exactly as the online adapters store a reply.

Errors are never stored; they are counted by class (an unparseable reply, or a cover reply with
another count of labels than facts, is ``OutputParseError``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from dahl.adapters._coverage import parse_coverage
from dahl.adapters._http import ChatReply, parse_reply
from dahl.adapters._openai import citation_evidence
from dahl.adapters._parse import parse_claims, parse_verdict
from dahl.batch._extras import Extra
from dahl.batch._requests import StageMeta
from dahl.batch._providers import Outcome
from dahl.cache._store import CacheStore
from dahl.errors import AdapterError, OutputParseError
from dahl.records import Claim, Verdict

__all__ = ["Collected", "Put", "parse_outcomes", "read_results", "store_puts", "write_results"]


@dataclass
class Collected:
    """What one set of results held.

    Attributes:
        stored: results parsed and put in the cache.
        errors: failed requests per error class (``http_500``, ``OutputParseError``, ...).
        unfinished: expired or canceled requests (never run).
        prompt_tokens, completion_tokens: reported usage of the succeeded requests, tokens.
        cached_tokens, cache_write_tokens: of ``prompt_tokens``, those read from and written to the
            provider's prompt cache, tokens (priced apart: :func:`dahl.pricing.cost_usd`).
        classes: per custom_id, its error class (None: stored), for the saved result file.
    """

    stored: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    unfinished: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    classes: dict[str, str | None] = field(default_factory=dict)

    def add(self, other: Collected) -> None:
        """Add ``other``'s counts to these."""
        self.stored += other.stored
        self.errors.update(other.errors)
        self.unfinished += other.unfinished
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.classes.update(other.classes)


class Put(NamedTuple):
    """One cache entry to store: ``CacheStore.put(key, value, raw, parser_version=version)``."""

    key: str
    value: Verdict | list[Claim] | bytes
    raw: str | None
    version: str


def parse_outcomes(outcomes: Iterable[Outcome], stage_of: dict[str, str], stages: dict[str, StageMeta],
                   extras: dict[str, Extra] | None = None) -> tuple[list[Put], Collected]:
    """Parse every succeeded outcome into the entries the online adapter stores; count the rest by class.

    CPU work (call it in a worker thread); put the entries with :func:`store_puts`.

    Args:
        outcomes: results; an id not in ``stage_of`` is counted as ``unknown_custom_id``.
        stage_of: custom_id -> ``"split"`` / ``"check"`` / ``"cover"`` (from the shards).
        stages: stage settings recorded at prepare.
        extras: custom_id -> its :class:`~dahl.batch._extras.Extra`; a request that needs one and
            has none is counted as ``missing_extras``.

    Returns:
        The entries, and the counts; usage counts every succeeded reply, parsed or not.
    """
    puts: list[Put] = []
    got = Collected()
    for outcome in outcomes:
        key = outcome.custom_id
        stage = stage_of.get(key)
        if outcome.reply is None:
            error = outcome.error or "error"
            if outcome.unfinished:
                got.unfinished += 1
            else:
                got.errors[error] += 1
            got.classes[key] = error
            continue
        if stage is None or stage not in stages:
            got.errors["unknown_custom_id"] += 1
            continue
        try:
            reply = parse_reply(outcome.reply, {})
        except AdapterError as exc:
            got.errors[type(exc).__name__] += 1
            got.classes[key] = type(exc).__name__
            continue
        if (usage := reply.usage) is not None:
            got.prompt_tokens += usage.prompt_tokens
            got.completion_tokens += usage.completion_tokens
            got.cached_tokens += usage.cached_tokens
            got.cache_write_tokens += usage.cache_write_tokens
        meta = stages[stage]
        extra = (extras or {}).get(key)
        if extra is None and (stage == "cover" or (stage == "check" and meta.with_evidence)):
            got.errors["missing_extras"] += 1
            got.classes[key] = "missing_extras"
            continue
        try:
            puts.extend(_entries(stage, key, reply, meta, extra))
        except AdapterError as exc:  # OutputParseError: not stored, asked again later
            got.errors[type(exc).__name__] += 1
            got.classes[key] = type(exc).__name__
            continue
        got.stored += 1
        got.classes[key] = None
    return puts, got


def _entries(stage: str, key: str, reply: ChatReply, meta: StageMeta, extra: Extra | None) -> list[Put]:
    """The cache entries of one succeeded reply, as the online adapter stores them.

    Raises:
        OutputParseError: the reply does not parse (or labels another count of facts).
    """
    content = reply.content
    if stage == "split":
        claims = [Claim(text=text, index=i) for i, text in enumerate(parse_claims(content))]
        return [Put(key, claims, content, meta.parser_version)]
    if stage == "cover":
        assert extra is not None
        labels = parse_coverage(content)
        if len(labels) != len(extra.keys):
            raise OutputParseError(f"{len(labels)} labels for {len(extra.keys)} facts", raw=content)
        return [Put(k, label.value.encode(), None, meta.parser_version) for k, label in zip(extra.keys, labels)]
    label, reason = parse_verdict(content, with_evidence=meta.with_evidence)
    passages = extra.evidence if extra is not None else ()
    verdict = Verdict(label=label, checker=meta.fingerprint, raw=content, evidence=passages + citation_evidence(reply),
                      usage=reply.usage, reason=reason)
    return [Put(key, verdict, content, meta.parser_version)]


def store_puts(store: CacheStore, puts: Iterable[Put]) -> None:
    """Put ``puts`` in ``store`` (only enqueues; call on the event loop thread)."""
    for put in puts:
        store.put(put.key, put.value, put.raw, parser_version=put.version)


def write_results(path: Path, classes: dict[str, str | None]) -> None:
    """Save each custom_id's class (``{"custom_id", "error"}`` lines), atomically (blocking)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    part.write_bytes(b"".join(orjson.dumps({"custom_id": k, "error": v}) + b"\n" for k, v in classes.items()))
    part.replace(path)


def read_results(path: Path) -> dict[str, str | None]:
    """The classes :func:`write_results` saved (blocking)."""
    out: dict[str, str | None] = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            row: dict[str, Any] = orjson.loads(line)
            out[str(row["custom_id"])] = row.get("error")
    return out
