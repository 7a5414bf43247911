"""Batch input files: one provider line per request, cut under the provider's limits.

OpenAI (and ``vllm run-batch``): ``{"custom_id", "method", "url", "body"}`` lines, <= 50,000 requests
and 200 MB a file (platform.openai.com/docs/guides/batch); Anthropic: ``{"custom_id", "params"}``,
<= 100,000 requests or 256 MB (docs.anthropic.com/en/docs/build-with-claude/batch-processing).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from dahl.adapters._anthropic_wire import messages_body
from dahl.batch._requests import BatchRequest

__all__ = ["LIMITS", "CHAT_URL", "Limits", "Provider", "cut", "request_line", "write_lines", "write_shards"]

Provider = Literal["openai", "anthropic", "file"]

#: The route every OpenAI batch line targets.
CHAT_URL = "/v1/chat/completions"


@dataclass(frozen=True)
class Limits:
    """Most requests and bytes (of the JSONL lines, newlines included) of one batch.

    Raises:
        ValueError: a limit below 1.
    """

    max_requests: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes < 1:
            raise ValueError("batch limits must be >= 1")


#: Per provider; ``file`` (``vllm run-batch``) takes OpenAI's, so one file can go either way.
LIMITS: dict[str, Limits] = {
    "openai": Limits(50_000, 200 * 1024 * 1024),
    "file": Limits(50_000, 200 * 1024 * 1024),
    "anthropic": Limits(100_000, 256 * 1024 * 1024),
}


def request_line(provider: Provider, request: BatchRequest) -> bytes:
    """The JSONL line (without newline) of ``request`` in ``provider``'s batch format."""
    if provider == "anthropic":
        return orjson.dumps({"custom_id": request.custom_id, "params": messages_body(request.body)})
    return orjson.dumps({"custom_id": request.custom_id, "method": "POST", "url": CHAT_URL, "body": request.body})


def cut(lines: Iterable[bytes], limits: Limits) -> Iterator[list[bytes]]:
    """Group ``lines`` in order into shards of at most ``limits`` (each line counts its newline).

    Raises:
        ValueError: one line alone exceeds ``limits.max_bytes``.
    """
    shard: list[bytes] = []
    size = 0
    for line in lines:
        n = len(line) + 1
        if n > limits.max_bytes:
            raise ValueError(f"one request of {n:,} bytes exceeds the batch limit of {limits.max_bytes:,} bytes")
        if shard and (len(shard) >= limits.max_requests or size + n > limits.max_bytes):
            yield shard
            shard, size = [], 0
        shard.append(line)
        size += n
    if shard:
        yield shard


def write_shards(folder: Path, prefix: str, provider: Provider, requests: Iterable[BatchRequest],
                 limits: Limits) -> list[tuple[Path, int]]:
    """Write ``requests`` as whole shard files ``folder/PREFIX-0001.jsonl``, ... (blocking, by rename).

    Returns:
        ``(path, requests)`` per shard, in order.
    """
    return write_lines(folder, prefix, (request_line(provider, r) for r in requests), limits)


def write_lines(folder: Path, prefix: str, lines: Iterable[bytes], limits: Limits) -> list[tuple[Path, int]]:
    """As :func:`write_shards`, for provider lines already built (``resubmit`` copies them)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, shard in enumerate(cut(lines, limits), start=1):
        path = folder / f"{prefix}-{i:04d}.jsonl"
        part = path.with_suffix(".jsonl.part")
        part.write_bytes(b"\n".join(shard) + b"\n")
        part.replace(path)
        out.append((path, len(shard)))
    return out
