"""Provider batch APIs over HTTP: OpenAI ``/v1/files`` + ``/v1/batches``, Anthropic ``/v1/messages/batches``.

Every call is retried on a transient error (5xx, 429, reset, timeout) under a
:class:`~dahl.lanes._retry.RetryPolicy`; a 4xx is raised at once. Sources:
platform.openai.com/docs/api-reference/batch, docs.anthropic.com/en/api/creating-message-batches.
"""

from __future__ import annotations

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

__all__ = ["ANTHROPIC_VERSION", "BATCH_RETRY", "AnthropicBatches", "BatchClient", "BatchState", "OpenAIBatches",
           "Outcome", "client_for", "parse_openai_line"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The ``anthropic-version`` header sent.
ANTHROPIC_VERSION = "2023-06-01"

#: Retries of one provider call: 5 attempts, backoff 1 s doubling to 30 s, none started after 10 min.
BATCH_RETRY = RetryPolicy(max_attempts=5, max_wall_s=600.0, base_s=1.0, cap_s=30.0)


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

    async def upload(self, path: Path) -> str | None:
        """Upload a shard; its file id, or None when the provider takes requests inline."""
        ...

    async def create(self, path: Path, file_id: str | None) -> str:
        """Start a batch of the shard; its batch id."""
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

    async def upload(self, path: Path) -> str | None:
        """``POST /files`` (purpose ``batch``); the file id.

        Raises:
            AdapterError: the upload failed.
        """
        data = await anyio.to_thread.run_sync(path.read_bytes)

        def form() -> aiohttp.FormData:  # a new one per attempt: a sent form is spent
            made = aiohttp.FormData()
            made.add_field("purpose", "batch")
            # A file object, not bytes: aiohttp streams it instead of one blocking write.
            made.add_field("file", io.BytesIO(data), filename=path.name, content_type="application/jsonl")
            return made

        reply = await self._retried("POST /files", lambda: self._once("POST", "/files", data=form()))
        return str(orjson.loads(reply)["id"])

    async def create(self, path: Path, file_id: str | None) -> str:
        """``POST /batches`` of the uploaded file; the batch id (a listed batch of that file is adopted)."""
        async def attempt() -> str:
            listed = orjson.loads(await self._once("GET", "/batches", params={"limit": "100"}))
            for batch in listed.get("data") or ():
                if batch.get("input_file_id") == file_id:
                    return str(batch["id"])
            body = {"input_file_id": file_id, "endpoint": CHAT_URL, "completion_window": "24h",
                    "metadata": {"dahl_shard": path.name}}
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

    async def upload(self, path: Path) -> str | None:
        """Nothing to upload: the requests go in the create call."""
        return None

    async def create(self, path: Path, file_id: str | None) -> str:
        """``POST /messages/batches`` with the shard's requests; the batch id."""
        data = await anyio.to_thread.run_sync(path.read_bytes)
        body = b'{"requests":[' + b",".join(line for line in data.splitlines() if line.strip()) + b"]}"
        headers = {**self._headers, "content-type": "application/json"}
        reply = await self._retried("POST /messages/batches", lambda: self._once(
            "POST", "/messages/batches", data=io.BytesIO(body), headers=headers))
        return str(orjson.loads(reply)["id"])

    async def retrieve(self, batch_id: str) -> BatchState:
        """``GET /messages/batches/{id}``."""
        raw = orjson.loads(await self._call("GET", f"/messages/batches/{batch_id}"))
        counts = raw.get("request_counts") or {}
        done = int(counts.get("succeeded") or 0) + int(counts.get("errored") or 0)
        total = done + sum(int(counts.get(k) or 0) for k in ("processing", "canceled", "expired"))
        status = str(raw.get("processing_status"))
        return BatchState(batch_id, status, status == "ended", done, total, raw)

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
