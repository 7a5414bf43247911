"""PMC articles by id through NCBI E-utilities ``efetch``, under NCBI's rate limit, resumable.

NCBI allows 3 requests per second, 10 with an API key (E-utilities "Usage guidelines"). Each id's
outcome (``ok``, ``metadata_only``, ``not_found``) is appended to ``<articles>.fetch.jsonl``, so
a re-run asks only for ids not logged; the articles JSONL is then written from the log.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import Literal

import anyio
import msgspec

from dahl.adapters._http import BytesReply, get_bytes, make_session
from dahl.engine._channel import Channel
from dahl.lanes._lane import LaneLimits, LanePool
from dahl.engine._ends import Reader, Writer, read_back
from dahl.engine._stage import Stage, run_stages
from dahl.errors import AdapterError, InputError, OutputWriteError
from dahl.questions._articles import Article
from dahl.questions._jats import parse_jats

log = logging.getLogger(__name__)

__all__ = ["EUTILS_URL", "FetchCounters", "FetchSettings", "fetch_articles", "ncbi_limits", "read_ids"]

#: NCBI E-utilities root.
EUTILS_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils"

Status = Literal["ok", "metadata_only", "not_found"]


class _Logged(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    status: Status
    article: Article | None = None


_LOG_DECODER = msgspec.json.Decoder(_Logged)
_ENCODER = msgspec.json.Encoder()


@dataclasses.dataclass(frozen=True)
class FetchSettings:
    """What to fetch.

    Attributes:
        ids: text file of PMC ids, one per line (``PMC123`` or ``123``; ``#`` comments).
        out: the articles JSONL to write; its fetch log sits beside it.
        base_url: E-utilities root (a loopback mock in tests).
        api_key: NCBI API key ("" for none): 10 requests/s instead of 3; never logged.
        timeout_s: timeout of one request, seconds.
    """

    ids: Path
    out: Path
    base_url: str = EUTILS_URL
    api_key: str = dataclasses.field(default="", repr=False)
    timeout_s: float = 60.0


@dataclasses.dataclass
class FetchCounters:
    """Outcomes of a fetch.

    Attributes:
        ids: ids read; resumed: already in the fetch log; requests: efetch calls made.
        ok, metadata_only, not_found: outcomes (this run and resumed ones).
        failed: ids whose request failed after retries.
        metadata_only_ids: the ids answered with metadata only, in ids order.
    """

    ids: int = 0
    resumed: int = 0
    requests: int = 0
    ok: int = 0
    metadata_only: int = 0
    not_found: int = 0
    failed: int = 0
    metadata_only_ids: list[str] = dataclasses.field(default_factory=list)


def ncbi_limits(api_key: str) -> LaneLimits:
    """NCBI's limit: 3 requests/s (180 per minute), 10/s (600) with an API key."""
    return LaneLimits(rpm=600.0 if api_key else 180.0, max_in_flight=10 if api_key else 3)


def read_ids(path: Path) -> list[str]:
    """PMC ids of ``path`` as ``PMC<digits>``, in order, repeats dropped (blocking).

    Raises:
        InputError: unreadable file, or a line that is not a PMC id (file and line named).
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read ids: {exc.strerror}", file=str(path)) from exc
    out: dict[str, None] = {}
    for n, line in enumerate(lines, 1):
        raw = line.split("#", 1)[0].strip()
        if not raw:
            continue
        digits = raw.removeprefix("PMC").removeprefix("pmc")
        if not digits.isdigit():
            raise InputError(f"not a PMC id: {raw!r}", file=str(path), line=n)
        out[f"PMC{digits}"] = None
    return list(out)


def _log_path(out: Path) -> Path:
    return out.with_name(out.name + ".fetch.jsonl")


def _read_log(path: Path) -> dict[str, _Logged]:
    return {item.id: item for item in read_back(path, _LOG_DECODER.decode, "fetch log")}


def _append(path: Path, item: _Logged) -> None:
    try:
        with path.open("ab") as handle:
            handle.write(_ENCODER.encode(item) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise OutputWriteError(f"cannot write {path}: {exc.strerror}", path=str(path)) from exc


def _write_articles(out: Path, ids: list[str], found: dict[str, _Logged]) -> None:
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tmp.open("wb") as handle:
            for pmc_id in ids:
                item = found.get(pmc_id)
                if item is not None and item.article is not None:
                    handle.write(_ENCODER.encode(item.article) + b"\n")
        os.replace(tmp, out)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {out}: {exc.strerror}", path=str(out)) from exc


async def fetch_articles(settings: FetchSettings, counters: FetchCounters | None = None) -> FetchCounters:
    """Fetch every id of ``settings.ids`` not logged yet and write ``settings.out``.

    Returns:
        The counters; ``out`` is written only when no id failed.

    Raises:
        InputError: a bad ids line, a reply that is not XML, a fetch log of another command.
        OutputWriteError: the fetch log or the articles file cannot be written.
        QuotaExhausted, FatalAPIError: NCBI stopped the fetch (logged ids are kept).
    """
    counters = counters if counters is not None else FetchCounters()
    ids = await anyio.to_thread.run_sync(read_ids, settings.ids)
    log_path = _log_path(settings.out)
    logged = await anyio.to_thread.run_sync(_read_log, log_path)
    limits = ncbi_limits(settings.api_key)
    lane = LanePool().get(settings.base_url, "ncbi-key" if settings.api_key else "", "efetch", limits)
    url = settings.base_url.rstrip("/") + "/efetch.fcgi"
    todo: Channel[str] = Channel(2 * limits.max_in_flight)
    done: Channel[_Logged] = Channel(16)
    counters.ids = len(ids)

    async with make_session(limits.max_in_flight, settings.timeout_s) as session:

        async def take(batch: list[str]) -> None:
            for pmc_id in batch:
                if pmc_id in logged:
                    counters.resumed += 1
                else:
                    await todo.send(pmc_id)

        async def fetch(pmc_id: str) -> None:
            params = {"db": "pmc", "id": pmc_id.removeprefix("PMC"), "retmode": "xml"}
            if settings.api_key:
                params["api_key"] = settings.api_key

            def attempt() -> Awaitable[BytesReply]:
                return get_bytes(session, url, params, secret=settings.api_key)

            counters.requests += 1
            reply = await lane.call(attempt, estimated_tokens=0)
            found = await anyio.to_thread.run_sync(parse_jats, pmc_id, reply.body)
            item = _Logged(id=pmc_id, status="ok", article=found) if isinstance(found, Article) \
                else _Logged(id=pmc_id, status=found)
            await done.send(item)

        async def failed(pmc_id: str, exc: AdapterError) -> None:
            counters.failed += 1
            log.warning("%s not fetched: %s: %s", pmc_id, type(exc).__name__, exc)

        def append(items: list[_Logged]) -> None:
            for item in items:
                _append(log_path, item)

        def written(items: list[_Logged]) -> None:
            logged.update((item.id, item) for item in items)

        stage = Stage("fetch", todo, fetch, workers=limits.max_in_flight, outputs=[done], on_error=failed)
        reader = Reader(ids, take, outputs=[todo], batch=len(ids) or 1)
        await run_stages([stage], [reader, Writer(done, append, written=written)])
    for pmc_id in ids:
        item = logged.get(pmc_id)
        if item is None:
            continue
        if item.status == "ok":
            counters.ok += 1
        elif item.status == "metadata_only":
            counters.metadata_only += 1
            counters.metadata_only_ids.append(pmc_id)
        else:
            counters.not_found += 1
    if not counters.failed:
        await anyio.to_thread.run_sync(_write_articles, settings.out, ids, logged)
    return counters
