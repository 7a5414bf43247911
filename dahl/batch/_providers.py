"""Provider batch APIs over HTTP: OpenAI ``/v1/files`` + ``/v1/batches``, Anthropic ``/v1/messages/batches``.

Every call is retried on a transient error (5xx, 429, reset, timeout) under a
:class:`~dahl.lanes._retry.RetryPolicy`; a 4xx is raised at once. A shard's upload and batch are
marked with its :class:`ShardTag`, so that a restart (a reply lost, a kill before the ledger line)
uses what the provider already holds instead of uploading or creating it again. Sources:
platform.openai.com/docs/api-reference/batch (and ``/files``: list, delete),
docs.anthropic.com/en/api/creating-message-batches (and listing-message-batches).
"""

from __future__ import annotations

import datetime
import io
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiohttp
import anyio
import orjson

from dahl.adapters._anthropic_wire import chat_reply
from dahl.batch._shards import CHAT_URL
from dahl.lanes._retry import RetryPolicy, classify
from dahl.errors import AdapterError, ConfigError, PermanentAPIError, TransientAPIError

__all__ = ["ANTHROPIC_VERSION", "BATCH_RETRY", "CLOCK_SKEW_S", "AnthropicBatches", "BatchClient", "BatchState",
           "OpenAIBatches", "Outcome", "ShardTag", "client_for", "parse_openai_line"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The ``anthropic-version`` header sent.
ANTHROPIC_VERSION = "2023-06-01"

#: Retries of one provider call: 5 attempts, backoff 1 s doubling to 30 s, none started after 10 min.
BATCH_RETRY = RetryPolicy(max_attempts=5, max_wall_s=600.0, base_s=1.0, cap_s=30.0)

#: Seconds the provider's clock may be behind ours: listed objects this much older than a tag's
#: ``since`` are still looked at.
CLOCK_SKEW_S = 120.0


@dataclass(frozen=True)
class ShardTag:
    """What marks one shard's upload and batch at the provider, so a restart finds them.

    Attributes:
        key: 32 hex digits recorded in the ledger before the shard's first provider call. OpenAI:
            the uploaded file is named :meth:`file_name` and the batch's ``metadata.dahl_shard``
            is the key. Anthropic keeps no metadata: a batch of exactly ``requests`` requests
            created since ``since`` that the ledger does not record is taken for the shard's (so
            two folders resuming shards of one size at once on one account could swap them).
        since: unix seconds the key was recorded: nothing of the shard is older.
        requests: lines of the shard.
        resumed: an earlier run recorded the key (its upload or batch may exist); else the first
            attempt of each call lists nothing.
        known: batch ids the ledger records, never adopted.
    """

    key: str
    since: float
    requests: int
    resumed: bool = False
    known: frozenset[str] = frozenset()

    def file_name(self, path: Path) -> str:
        """The uploaded file's name: ``STEM-KEY.jsonl`` of shard ``path``."""
        return f"{path.stem}-{self.key}.jsonl"


@dataclass(frozen=True)
class BatchState:
    """A batch as the provider reports it.

    Attributes:
        batch_id: the provider's id.
        status: the provider's status word (OpenAI ``validating``, ``completed``, ``expired``, ...;
            Anthropic ``in_progress``, ``canceling``, ``ended``).
        ended: True when no request will finish any more.
        done: requests finished (succeeded or errored).
        total: requests in the batch.
        raw: the provider's whole batch object (its file ids, results URL).
    """

    batch_id: str
    status: str
    ended: bool
    done: int
    total: int
    raw: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    """One request's result.

    Attributes:
        custom_id: the cache key.
        reply: a chat-completions reply body when it succeeded, else None.
        error: the error class when it failed (``"expired"`` and ``"canceled"`` are
            unfinished, anything else failed: ``"http_500"``, ``"invalid_request_error"``, ...).
    """

    custom_id: str
    reply: dict[str, Any] | None
    error: str | None = None

    @property
    def unfinished(self) -> bool:
        """Expired or canceled: never run, so resubmitting it is the only way to a result."""
        return self.error in ("expired", "canceled")


class BatchClient(Protocol):
    """What ``submit``, ``status``, ``collect`` and ``cancel`` need from a provider."""

    async def upload(self, path: Path, tag: ShardTag) -> str | None:
        """Upload a shard (or find its upload); its file id, or None when the provider takes requests inline."""
        ...

    async def create(self, path: Path, file_id: str | None, tag: ShardTag) -> str:
        """Start a batch of the shard (or find the one started); its batch id."""
        ...

    async def retrieve(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    async def results(self, state: BatchState) -> list[Outcome]:
        """Every result of an ended batch (unfinished requests as ``expired``)."""
        ...

    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop the batch."""
        ...


async def _json(response: aiohttp.ClientResponse) -> Any:
    """The body of ``response``; an HTTP error as dahl's error (5xx/429 transient, else permanent)."""
    data = await response.read()
    if response.status >= 400:
        text = data.decode("utf-8", "replace")[:300]
        if response.status >= 500 or response.status == 429:
            raise TransientAPIError(f"HTTP {response.status} from {response.url.path}: {text}")
        raise PermanentAPIError(f"HTTP {response.status} from {response.url.path}: {text}", status=response.status)
    return data


class _Client:
    def __init__(self, session: aiohttp.ClientSession, base_url: str, headers: dict[str, str],
                 retry: RetryPolicy, rng: random.Random | None) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._headers = headers
        self._retry = retry
        self._rng = rng or random.Random()
        #: Attempts retried so far (all calls).
        self.retries = 0

    async def _retried(self, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, again after a transient error, as :attr:`_retry` allows; else its error."""
        policy, started = self._retry, time.monotonic()
        for n in itertools.count():
            try:
                return await attempt()
            except AdapterError as exc:
                decision = classify(exc)
                if decision.kind == "fatal" or n + 1 >= policy.max_attempts:
                    raise
                wait = (policy.rate_limit_pause_s(decision.retry_after_s) if decision.kind == "rate_limit"
                        else policy.backoff_s(n, self._rng))
                if time.monotonic() - started + wait > policy.max_wall_s:
                    raise
                log.warning("%s failed (%s); retry %d of %d in %.1f s", what, exc, n + 1, policy.max_attempts - 1,
                            wait)
                self.retries += 1
                await anyio.sleep(wait)
        raise AssertionError("unreachable")  # itertools.count() never ends

    async def _listed(self, route: str, params: dict[str, str], cursor: str, since: float) -> list[dict[str, Any]]:
        """The objects of list ``route`` (newest first) created since ``since`` less :data:`CLOCK_SKEW_S`,
        page after page (``cursor``: the parameter taking the last id of the page before); not retried."""
        out: list[dict[str, Any]] = []
        after: dict[str, str] = {}
        while True:
            page = orjson.loads(await self._once("GET", route, params={**params, **after}))
            data = page.get("data") or []
            fresh = [item for item in data if _created_s(item) >= since - CLOCK_SKEW_S]
            out.extend(fresh)
            if len(fresh) < len(data) or not data or not page.get("has_more"):
                return out
            after = {cursor: str(page.get("last_id") or data[-1]["id"])}

    async def _call(self, method: str, route: str, **kwargs: Any) -> bytes:
        """One call, retried; ``route`` under the base URL, or an absolute ``http(s)://`` URL as it is;
        ``kwargs`` go to aiohttp as they are (no body that a first attempt consumes)."""
        return await self._retried(f"{method} {route}", lambda: self._once(method, route, **kwargs))

    async def _once(self, method: str, route: str, **kwargs: Any) -> bytes:
        headers = kwargs.pop("headers", self._headers)
        url = route if route.startswith(("http://", "https://")) else self._base + route
        try:
            async with self._session.request(method, url, headers=headers, **kwargs) as response:
                data: bytes = await _json(response)
                return data
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise TransientAPIError(f"{method} {route}: {exc!r}") from exc


def parse_openai_line(line: dict[str, Any]) -> Outcome:
    """An OpenAI batch output or error line (also ``vllm run-batch``'s) as an Outcome.

    ``{"custom_id", "response": {"status_code", "body"}, "error": {"code", "message"} | null}``;
    OpenAI writes the requests an expired batch never ran with code ``batch_expired``.
    """
    custom_id = str(line.get("custom_id"))
    error, response = line.get("error"), line.get("response") or {}
    if error:
        code = str(error.get("code") or error.get("type") or "error")
        return Outcome(custom_id, None, {"batch_expired": "expired", "batch_cancelled": "canceled"}.get(code, code))
    status = int(response.get("status_code") or 0)
    body = response.get("body")
    if status != 200 or not isinstance(body, dict):
        kind = body.get("error", {}).get("type") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        return Outcome(custom_id, None, f"http_{status}" if not kind else f"http_{status}:{kind}")
    return Outcome(custom_id, body)


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in data.splitlines() if line.strip()]


def _created_s(item: dict[str, Any]) -> float:
    """Unix seconds of a listed object's ``created_at`` (OpenAI: seconds; Anthropic: RFC 3339); absent: now on."""
    created = item.get("created_at")
    if isinstance(created, (int, float)):
        return float(created)
    if isinstance(created, str):
        return datetime.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    return float("inf")


def _anthropic_total(raw: dict[str, Any]) -> int:
    """Requests of an Anthropic batch object: the sum of its ``request_counts``."""
    counts = raw.get("request_counts") or {}
    return sum(int(counts.get(k) or 0) for k in ("processing", "succeeded", "errored", "canceled", "expired"))


def _looked_up(resumed: bool) -> Callable[[], bool]:
    """Whether an attempt should look for what an earlier one made: after a resume, else from the second on."""
    tried = [resumed]

    def now() -> bool:
        before, tried[0] = tried[0], True
        return before

    return now


class OpenAIBatches(_Client):
    """OpenAI's Batch API (``/v1/files`` upload, ``/v1/batches``, completion window 24 h).

    Args:
        session: an open aiohttp session.
        base_url: API root ending in ``/v1``.
        api_key: bearer token (``""``: none sent); never logged.
        retry: retries of each call.
        rng: the backoff's random source (None: unseeded).
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str, api_key: str, *,
                 retry: RetryPolicy = BATCH_RETRY, rng: random.Random | None = None) -> None:
        super().__init__(session, base_url, {"Authorization": f"Bearer {api_key}"} if api_key else {}, retry, rng)

    async def upload(self, path: Path, tag: ShardTag) -> str | None:
        """``POST /files`` (purpose ``batch``, named ``tag.file_name(path)``); the file id.

        After a resume or a failed attempt, a whole file of that name the provider lists
        (``GET /files``) is used instead, and its other copies are deleted (``DELETE /files/{id}``).

        Raises:
            AdapterError: the upload failed.
        """
        data = await anyio.to_thread.run_sync(path.read_bytes)
        name, look = tag.file_name(path), _looked_up(tag.resumed)

        def form() -> aiohttp.FormData:  # a new one per attempt: a sent form is spent
            made = aiohttp.FormData()
            made.add_field("purpose", "batch")
            # A file object, not bytes: aiohttp streams it instead of one blocking write.
            made.add_field("file", io.BytesIO(data), filename=name, content_type="application/jsonl")
            return made

        async def attempt() -> str:
            if look():
                mine = [f for f in await self._listed("/files", {"purpose": "batch"}, "after", tag.since)
                        if f.get("filename") == name]
                kept = next((f for f in mine if f.get("bytes") == len(data)), None)
                for copy in mine:
                    if copy is not kept:
                        await self._once("DELETE", f"/files/{copy['id']}")
                if kept is not None:
                    return str(kept["id"])
            return str(orjson.loads(await self._once("POST", "/files", data=form()))["id"])

        return await self._retried("POST /files", attempt)

    async def create(self, path: Path, file_id: str | None, tag: ShardTag) -> str:
        """``POST /batches`` of the uploaded file, ``metadata.dahl_shard`` the tag's key; the batch id.

        After a resume or a failed attempt, a listed batch (``GET /batches``) of that key or of that
        file, not recorded for another shard, is adopted instead.
        """
        look = _looked_up(tag.resumed)

        async def attempt() -> str:
            if look():
                for batch in await self._listed("/batches", {"limit": "100"}, "after", tag.since):
                    mine = (batch.get("metadata") or {}).get("dahl_shard") == tag.key \
                        or batch.get("input_file_id") == file_id
                    if mine and batch.get("id") not in tag.known:
                        return str(batch["id"])
            body = {"input_file_id": file_id, "endpoint": CHAT_URL, "completion_window": "24h",
                    "metadata": {"dahl_shard": tag.key, "dahl_file": path.name}}
            return str(orjson.loads(await self._once("POST", "/batches", json=body))["id"])

        return await self._retried("POST /batches", attempt)

    async def retrieve(self, batch_id: str) -> BatchState:
        """``GET /batches/{id}``."""
        raw = orjson.loads(await self._call("GET", f"/batches/{batch_id}"))
        counts = raw.get("request_counts") or {}
        status = str(raw.get("status"))
        done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
        return BatchState(batch_id, status, status in ("completed", "expired", "cancelled", "failed"), done,
                          int(counts.get("total") or 0), raw)

    async def results(self, state: BatchState) -> list[Outcome]:
        """The output and error files' lines (``GET /files/{id}/content``)."""
        out: list[Outcome] = []
        for name in ("output_file_id", "error_file_id"):
            file_id = state.raw.get(name)
            if file_id:
                out.extend(parse_openai_line(line) for line in _lines(await self._call("GET", f"/files/{file_id}/content")))
        return out

    async def cancel(self, batch_id: str) -> None:
        """``POST /batches/{id}/cancel``."""
        await self._call("POST", f"/batches/{batch_id}/cancel")


class AnthropicBatches(_Client):
    """Anthropic's Message Batches API (requests inline, results as JSONL).

    Args:
        session: an open aiohttp session.
        base_url: API root ending in ``/v1``.
        api_key: sent as ``x-api-key``; never logged.
        retry: retries of each call.
        rng: the backoff's random source (None: unseeded).
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str, api_key: str, *,
                 retry: RetryPolicy = BATCH_RETRY, rng: random.Random | None = None) -> None:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        super().__init__(session, base_url, headers, retry, rng)

    async def upload(self, path: Path, tag: ShardTag) -> str | None:
        """Nothing to upload: the requests go in the create call."""
        return None

    async def create(self, path: Path, file_id: str | None, tag: ShardTag) -> str:
        """``POST /messages/batches`` with the shard's requests; the batch id.

        After a resume or a failed attempt, the oldest listed batch (``GET /messages/batches``)
        that matches ``tag`` (see :class:`ShardTag`) is adopted instead.
        """
        data = await anyio.to_thread.run_sync(path.read_bytes)
        body = b'{"requests":[' + b",".join(line for line in data.splitlines() if line.strip()) + b"]}"
        headers = {**self._headers, "content-type": "application/json"}
        look = _looked_up(tag.resumed)

        async def attempt() -> str:
            if look():
                for batch in reversed(await self._listed("/messages/batches", {"limit": "100"}, "after_id", tag.since)):
                    if batch.get("id") not in tag.known and _anthropic_total(batch) == tag.requests:
                        return str(batch["id"])
            reply = await self._once("POST", "/messages/batches", data=io.BytesIO(body), headers=headers)
            return str(orjson.loads(reply)["id"])

        return await self._retried("POST /messages/batches", attempt)

    async def retrieve(self, batch_id: str) -> BatchState:
        """``GET /messages/batches/{id}``."""
        raw = orjson.loads(await self._call("GET", f"/messages/batches/{batch_id}"))
        counts = raw.get("request_counts") or {}
        done = int(counts.get("succeeded") or 0) + int(counts.get("errored") or 0)
        status = str(raw.get("processing_status"))
        return BatchState(batch_id, status, status == "ended", done, _anthropic_total(raw), raw)

    async def results(self, state: BatchState) -> list[Outcome]:
        """``GET`` the batch's ``results_url`` (JSONL ``{custom_id, result: {type, ...}}``).

        An absolute ``results_url`` is fetched as it is (another host than the base URL: a gateway, a
        proxy), a relative one under the base URL; both with the same auth headers.
        """
        url = str(state.raw.get("results_url") or f"/messages/batches/{state.batch_id}/results")
        out = []
        for line in _lines(await self._call("GET", url if "://" in url or url.startswith("/") else "/" + url)):
            result = line.get("result") or {}
            kind = result.get("type")
            if kind == "succeeded":
                out.append(Outcome(str(line["custom_id"]), chat_reply(result["message"])))
            elif kind == "errored":
                error = (result.get("error") or {}).get("error") or result.get("error") or {}
                out.append(Outcome(str(line["custom_id"]), None, str(error.get("type") or "errored")))
            else:
                out.append(Outcome(str(line["custom_id"]), None, str(kind or "errored")))
        return out

    async def cancel(self, batch_id: str) -> None:
        """``POST /messages/batches/{id}/cancel``."""
        await self._call("POST", f"/messages/batches/{batch_id}/cancel")


def client_for(provider: str, session: aiohttp.ClientSession, base_url: str, api_key: str, *,
               retry: RetryPolicy = BATCH_RETRY) -> BatchClient:
    """The client of ``provider`` (``openai`` or ``anthropic``), retrying each call as ``retry`` allows.

    Raises:
        ConfigError: ``file`` or an unknown provider (it has no API).
    """
    if provider == "openai":
        return OpenAIBatches(session, base_url, api_key, retry=retry)
    if provider == "anthropic":
        return AnthropicBatches(session, base_url, api_key, retry=retry)
    raise ConfigError(f"provider {provider!r} has no batch API: run the shards with `vllm run-batch` and "
                       "`dahl batch collect --from-file OUT.jsonl`")
