"""Atomic fact extraction from documents: chunks, the rule and LLM extractors, and their cache."""

from __future__ import annotations

from typing import Protocol

import anyio
import msgspec

from dahl.adapters._endpoint import Endpoint
from dahl.adapters._parse import parse_json_object
from dahl.adapters._rules import RuleSplitter, split_claims
from dahl.cache._wrap import BlobCache
from dahl.cache._keys import extract_key
from dahl.errors import OutputParseError
from dahl.records import normalize_text
from dahl.refs._settings import BuildCounters, Granularity
from dahl.refs import _prompts as prompts
from dahl.sentences import split_sentences

__all__ = [
    "SENTENCES_PER_CHUNK", "CachedExtractor", "Chunk", "ExtractedFact", "Extractor",
    "Granularity", "OpenAIExtractor", "RuleExtractor", "chunks", "parse_facts"
]


#: Sentences per chunk at ``granularity="chunk"``: a short passage, one call.
SENTENCES_PER_CHUNK = 5


class Chunk(msgspec.Struct, frozen=True):
    """A run of consecutive sentences of one document.

    Attributes:
        doc_id: the document's id.
        title: the document's title ("" when none).
        text: ``document[span[0]:span[1]]``.
        span: (start, end) character offsets into the document text.
    """

    doc_id: str
    title: str
    text: str
    span: tuple[int, int]


class ExtractedFact(msgspec.Struct, frozen=True, array_like=True):
    """One fact of a chunk: normalized text and (start, end) offsets into the document."""

    text: str
    span: tuple[int, int]


_FACTS = msgspec.msgpack.Encoder()
_FACTS_DECODER = msgspec.msgpack.Decoder(list[ExtractedFact])


def chunks(doc_id: str, title: str, text: str, granularity: Granularity = "chunk") -> list[Chunk]:
    """Cut a document into chunks of whole sentences, in order (CPU: run it in a thread).

    Args:
        doc_id: the document's id.
        title: its title.
        text: its text.
        granularity: ``"chunk"`` (up to :data:`SENTENCES_PER_CHUNK` sentences) or ``"sentence"``.

    Returns:
        Chunks covering every sentence once; empty for a blank text.
    """
    size = 1 if granularity == "sentence" else SENTENCES_PER_CHUNK
    spans = split_sentences(text)
    out: list[Chunk] = []
    for i in range(0, len(spans), size):
        start, end = spans[i][0], spans[min(i + size, len(spans)) - 1][1]
        out.append(Chunk(doc_id, title, text[start:end], (start, end)))
    return out


def parse_facts(raw: str) -> list[str]:
    """The facts of an extraction reply ``{"facts": [str, ...]}``, normalized, blanks dropped.

    Raises:
        OutputParseError: not a JSON object, no ``facts`` list, or a non-string item.
    """
    value = parse_json_object(raw)
    facts = value.get("facts")
    if not isinstance(facts, list):
        raise OutputParseError('the reply has no "facts" list', raw=raw)
    out: list[str] = []
    for n, fact in enumerate(facts):
        if not isinstance(fact, str):
            raise OutputParseError(f"facts[{n}] is a {type(fact).__name__}, not a string", raw=raw)
        text = normalize_text(fact)
        if text:
            out.append(text)
    return out


class Extractor(Protocol):
    """Extracts the atomic facts of one chunk."""

    fingerprint: str

    async def extract(self, chunk: Chunk) -> tuple[list[ExtractedFact], str | None]:
        """The facts of ``chunk`` in order, and the raw model reply (None offline).

        Raises:
            AdapterError: the call failed (LLM extractors).
        """
        ...


class RuleExtractor:
    """Offline extractor: the rule Splitter's claims of the chunk, longest statements only.

    Attributes:
        fingerprint: ``"rules-extract/v1|"`` + the rule Splitter's fingerprint.
    """

    fingerprint = f"rules-extract/v1|{RuleSplitter.fingerprint}"

    async def extract(self, chunk: Chunk) -> tuple[list[ExtractedFact], str | None]:
        """The whole-statement claims of ``chunk.text`` (in a worker thread); spans index the document."""
        found = await anyio.to_thread.run_sync(split_claims, chunk.text)
        base = chunk.span[0]
        kept: list[tuple[str, tuple[int, int], int]] = []
        for text, (a, b), sentence in found:
            if kept and kept[-1][2] == sentence and text.startswith(kept[-1][0].rstrip(" .;!")):
                _, (a0, b0), _ = kept.pop()
                a, b = min(a, a0), max(b, b0)
            kept.append((text, (a, b), sentence))
        return [ExtractedFact(text, (base + a, base + b)) for text, (a, b), _ in kept], None


class OpenAIExtractor:
    """LLM extractor over an LLM endpoint (template ``refs-extract/v1``).

    Args:
        endpoint: the endpoint client with the extraction task (:func:`dahl.refs._prompts.task`).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self.fingerprint = endpoint.fingerprint

    async def extract(self, chunk: Chunk) -> tuple[list[ExtractedFact], str | None]:
        """The facts the model states for ``chunk``; each fact's span is the chunk's.

        Raises:
            OutputParseError: the reply and the one re-ask could not be parsed.
            AdapterError: the HTTP call failed after the lane's retries.
        """
        endpoint = self._endpoint
        messages = prompts.extract_messages(chunk.title, chunk.text, template=endpoint.cfg.templates.get("extract"))
        parsed = await endpoint.ask(lambda fmt: endpoint.body(messages, fmt), parse_facts)
        return [ExtractedFact(text, chunk.span) for text in parsed.get()], parsed.raw


class CachedExtractor:
    """An :class:`Extractor` behind the cache (LLM extractors only) and single flight.

    Args:
        inner: the extractor.
        cache: the run's blob cache for extraction (None: no caching).
        counters: the build's; ``extract_calls`` counts the cache misses.
    """

    parser_version = "1"

    def __init__(self, inner: Extractor, cache: BlobCache | None, counters: BuildCounters) -> None:
        self._inner = inner
        self._cache = cache
        self._counters = counters
        self.fingerprint = inner.fingerprint

    async def extract(self, chunk: Chunk) -> list[ExtractedFact]:
        """The facts of ``chunk``, computed at most once per (fingerprint, title, text); spans re-based.

        Raises:
            AdapterError: the inner extractor failed (nothing is cached).
        """
        if self._cache is None:
            self._counters.extract_calls += 1
            return (await self._inner.extract(chunk))[0]
        key = extract_key(self.fingerprint, chunk.title, chunk.text)
        base = chunk.span[0]

        async def compute() -> tuple[bytes, str | None]:
            self._counters.extract_calls += 1
            facts, raw = await self._inner.extract(chunk)
            relative = [ExtractedFact(f.text, (f.span[0] - base, f.span[1] - base)) for f in facts]
            return _FACTS.encode(relative), raw

        blob = await self._cache.get_or_compute(key, compute)
        return [ExtractedFact(f.text, (f.span[0] + base, f.span[1] + base)) for f in _FACTS_DECODER.decode(blob)]

