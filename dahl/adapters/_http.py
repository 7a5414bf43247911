"""One HTTP request to an LLM route, with error mapping; the only module importing aiohttp's exceptions.

=====================================================  =========================
reply or failure                                       raised
=====================================================  =========================
429, 402 or 403 with ``insufficient_quota``/billing    ``QuotaExhausted``
402; 400 "credit balance is too low" (Anthropic)      ``QuotaExhausted``
401; other 403 (bad key, no access to the model)       ``FatalAPIError(status)``
429 "Request too large" (tokens per min)               ``PermanentAPIError(429)``
other 429; 529 (Anthropic overloaded)                  ``RateLimited(retry_after_s)``
any status: a validation error naming request fields   ``PermanentAPIError(status)``
408, 409, 5xx                                          ``TransientAPIError``
404 (the message names the URL)                        ``PermanentAPIError(404)``
other 4xx (incl. 413 request too large)                ``PermanentAPIError(status)``
refused, host not resolved                             ``ConnectError``
reset, disconnect, truncated payload                   ``TransientAPIError``
timeout                                                ``RequestTimeout`` (transient)
200 whose body is not JSON / has no choices            ``TransientAPIError``
200 refusal (``message.refusal``, ``content_filter``)  a reply whose ``refused`` is True
=====================================================  =========================

No error message, log line or reply contains the API key: server messages are redacted, and
the key's bytes in a 200 body become ``***`` before decoding.
"""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import msgspec
import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from dahl.adapters._anthropic_wire import token_count
from dahl.errors import (
    AdapterError,
    ConnectError,
    FatalAPIError,
    PermanentAPIError,
    QuotaExhausted,
    RateLimited,
    RequestTimeout,
    TransientAPIError,
)
from dahl.lanes._retry import parse_duration_s
from dahl.records import Usage

__all__ = [
    "AUTH_HEADERS",
    "REFUSALS",
    "BytesReply",
    "ChatReply",
    "decode_json",
    "encode_body",
    "get_bytes",
    "make_session",
    "parse_duration_s",
    "parse_reply",
    "post_bytes",
    "post_chat",
    "request_headers",
    "retry_after_s",
]

log = logging.getLogger(__name__)

_MAX_MESSAGE_CHARS = 300
# Key-shaped tokens (OpenAI sk-..., Perplexity pplx-..., generic Bearer values) a server may echo.
_KEYLIKE = re.compile(r"\b(?:sk|pplx|gsk|xai|tgp)-[A-Za-z0-9_\-*.]{4,}|Bearer\s+\S+")
_QUOTA_WORDS = ("insufficient_quota", "billing", "exceeded your current quota", "quota exceeded")
# Anthropic answers an exhausted prepaid balance with a 400.
_CREDIT_WORDS = ("credit balance is too low",)
# OpenAI answers a request above the whole per-minute token budget with a 429 that no wait can fix.
_TOO_LARGE_WORDS = ("request too large",)
# A validation error of the request itself (FastAPI/pydantic servers such as llama.cpp's Python
# server answer these with a 500): ``('body', 'response_format', 'type')``, "1 validation error".
_VALIDATION = re.compile(r"\bvalidation errors?\b|\(\s*'body'\s*,|\[\s*\"body\"\s*,")


class ChatReply(msgspec.Struct, frozen=True):
    """A parsed 200 reply of ``/chat/completions`` (or of ``/completions``: ``choices[0].text``).

    Attributes:
        content: text of ``choices[0].message.content`` (``""`` when the server sent null; its
            ``message.refusal`` when that is set and the content is not).
        usage: prompt, completion and prompt-cache tokens, or None if not reported.
        usage_tokens: total tokens of the call, or None if not reported.
        headers: response headers with lowercase names.
        raw: the whole decoded JSON body.
        citations: ``citations`` and ``search_results[].url``, in order, without duplicates.
        finish_reason: ``choices[0].finish_reason`` (``"length"`` = cut at max_tokens;
            ``"refusal"`` when ``message.refusal`` is set or Anthropic's stop reason says so).
    """

    content: str
    usage: Usage | None
    usage_tokens: int | None
    headers: Mapping[str, str]
    raw: dict[str, Any]
    citations: tuple[str, ...] = ()
    finish_reason: str | None = None

    def __repr__(self) -> str:  # the body stays out: it can be long
        return (f"ChatReply(content={self.content!r}, usage={self.usage!r}, usage_tokens={self.usage_tokens!r}, "
                f"headers={self.headers!r}, citations={self.citations!r}, finish_reason={self.finish_reason!r})")

    @property
    def refused(self) -> bool:
        """Whether the model refused: :data:`REFUSALS` holds the finish reason."""
        return self.finish_reason in REFUSALS


#: Finish reasons of a refusal: the model's own (``message.refusal``, Anthropic's stop reason) and
#: OpenAI's content filter.
REFUSALS = frozenset({"refusal", "content_filter"})


#: A key this long or longer is masked wherever a 200 reply echoes it; a shorter one would
#: match ordinary words and JSON names and corrupt the reply.
MIN_REDACTED_KEY_CHARS = 12


def make_session(max_in_flight: int, timeout_s: float) -> aiohttp.ClientSession:
    """The shared client session for one endpoint (inside a running loop; the caller closes it).

    Args:
        max_in_flight: connection cap, total and per host (the lane's in-flight cap).
        timeout_s: total time allowed for one request, seconds (connect + send + read).
    """
    connector = aiohttp.TCPConnector(limit=max_in_flight, limit_per_host=max_in_flight)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        raise_for_status=False,
    )


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds a 429 reply asks us to wait, from its headers; None when it does not say.

    Order: ``retry-after-ms`` (milliseconds), ``Retry-After`` (seconds or an HTTP date,
    RFC 9110 §10.2.3), then the longest ``x-ratelimit-reset-requests``/``-tokens`` of an
    exhausted budget (its remaining is 0 or absent), else the longest reset given.

    Args:
        headers: response headers with lowercase names.
        now: current Unix time, seconds (for HTTP dates; default ``time.time()``).
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is not None:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
            if when is not None:
                now = time.time() if now is None else now
                return max(0.0, when.timestamp() - now)
    exhausted: list[float] = []
    given: list[float] = []
    for budget in ("requests", "tokens"):
        reset = headers.get(f"x-ratelimit-reset-{budget}")
        seconds = parse_duration_s(reset) if reset is not None else None
        if seconds is None:
            continue
        given.append(seconds)
        if headers.get(f"x-ratelimit-remaining-{budget}", "0").strip() in ("0", "0.0"):
            exhausted.append(seconds)
    if exhausted:
        return max(exhausted)
    return max(given) if given else None


def _redact(text: str, api_key: str, secrets: tuple[str, ...] = ()) -> str:
    for secret in (api_key, *secrets):
        if secret:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def _error_fields(body: bytes) -> tuple[str, str]:
    """(type/code words, message) of an OpenAI-style error body; raw text when not JSON."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "", body.decode("utf-8", "replace")
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, dict):
        kinds = " ".join(str(error.get(k) or "") for k in ("type", "code"))
        message = error.get("message") or error.get("detail") or ""
        return kinds, message if isinstance(message, str) else str(message)
    return "", str(error)


def _status_error(
    status: int, headers: Mapping[str, str], body: bytes, api_key: str, url: str, secrets: tuple[str, ...] = ()
) -> AdapterError:
    """Map a non-200 reply to the dahl error tree (see the module table)."""
    kinds, message = _error_fields(body)
    message = " ".join(_redact(message, api_key, secrets).split())[:_MAX_MESSAGE_CHARS]
    text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    lowered = f"{kinds} {message}".lower()
    if (status == 402 or (status in (403, 429) and any(w in lowered for w in _QUOTA_WORDS))
            or (status == 400 and any(w in lowered for w in _CREDIT_WORDS))):
        return QuotaExhausted(text, status=status)
    if status in (401, 403):
        said = f": {message}" if message else "."
        return FatalAPIError(
            f"HTTP {status} from {url}{said} Check the API key (and its access to this model).",
            status=status,
        )
    if status == 429 and any(w in lowered for w in _TOO_LARGE_WORDS):
        return PermanentAPIError(text, status=429)
    if _VALIDATION.search(message) and status not in (429, 529):  # no retry fixes the request
        return PermanentAPIError(text, status=status)
    if status in (429, 529):  # 529: Anthropic's "overloaded", back-pressure like a rate limit
        return RateLimited(text, retry_after_s=retry_after_s(headers), status=status, headers=headers)
    if status in (408, 409) or status >= 500:
        return TransientAPIError(text, status=status)
    if status == 404:  # a wrong path or model: the URL tells which
        return PermanentAPIError(f"HTTP 404 from {url}: {message or 'Not Found'}", status=404)
    return PermanentAPIError(text, status=status)


def _citations(data: Mapping[str, Any]) -> tuple[str, ...]:
    urls: list[str] = []
    for url in data.get("citations") or ():
        if isinstance(url, str):
            urls.append(url)
    for result in data.get("search_results") or ():
        if isinstance(result, dict) and isinstance(result.get("url"), str):
            urls.append(result["url"])
    return tuple(dict.fromkeys(urls))


#: Auth schemes: the header each one sends the key in (``none`` sends no key).
AUTH_HEADERS = {"bearer": "Authorization", "api-key": "api-key", "x-api-key": "x-api-key", "none": ""}


def request_headers(
    api_key: str, *, auth: str = "bearer", extra: Mapping[str, str] | None = None
) -> CIMultiDictProxy[str]:
    """The read-only request headers for ``api_key``, built once per endpoint.

    Args:
        api_key: the key; ``""`` sends none.
        auth: ``bearer`` (``Authorization: Bearer KEY``), ``api-key`` (Azure OpenAI),
            ``x-api-key`` (Anthropic) or ``none`` (no key header).
        extra: further headers, set last: they replace a default of the same name.

    Raises:
        ValueError: an unknown ``auth``.
    """
    if auth not in AUTH_HEADERS:
        raise ValueError(f"unknown auth scheme {auth!r}; choose one of {', '.join(AUTH_HEADERS)}")
    headers = CIMultiDict({"Content-Type": "application/json", "Accept": "application/json"})
    name = AUTH_HEADERS[auth]
    if api_key and name:
        headers[name] = f"Bearer {api_key}" if auth == "bearer" else api_key
    for key, value in (extra or {}).items():
        headers[key] = value
    return CIMultiDictProxy(headers)


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The JSON bytes :func:`post_chat` sends for ``body`` (UTF-8, compact, insertion order).

    Raises:
        TypeError: ``body`` holds a value JSON cannot represent.
    """
    return orjson.dumps(body)


async def post_bytes(
    session: aiohttp.ClientSession, url: str, data: bytes, headers: CIMultiDictProxy[str]
) -> tuple[int, dict[str, str], bytes]:
    """Send ONE POST of ``data``; return (status, headers with lowercase names, body). No retry.

    Raises:
        ConnectError: the connection was refused or the host did not resolve.
        TransientAPIError: reset, disconnect, truncated payload, timeout.
        PermanentAPIError: an invalid URL.
    """
    try:
        async with session.post(url, data=data, headers=headers) as response:
            payload = await response.read()
            return response.status, {k.lower(): v for k, v in response.headers.items()}, payload
    except TimeoutError as exc:  # asyncio.TimeoutError is TimeoutError on Python >= 3.11
        raise RequestTimeout(f"request timed out after {session.timeout.total} s") from exc
    except aiohttp.InvalidURL as exc:
        raise PermanentAPIError(f"invalid URL {url!r}") from exc
    except aiohttp.ServerDisconnectedError as exc:
        raise TransientAPIError("server disconnected") from exc
    except aiohttp.ClientPayloadError as exc:
        raise TransientAPIError(f"truncated reply payload: {type(exc).__name__}") from exc
    except aiohttp.ClientConnectorError as exc:  # refused, DNS failure (before ClientOSError: a subclass)
        raise ConnectError(f"cannot connect to {url}: {exc.os_error.__class__.__name__}: {exc.os_error}") from exc
    except aiohttp.ClientOSError as exc:
        raise TransientAPIError(f"connection error: {type(exc).__name__}: {exc}") from exc
    except aiohttp.ClientError as exc:
        raise TransientAPIError(f"HTTP client error: {type(exc).__name__}") from exc


def decode_json(
    status: int, headers: Mapping[str, str], payload: bytes, api_key: str, url: str, *,
    secrets: tuple[str, ...] = (),
) -> Any:
    """The decoded JSON of a 2xx reply; the dahl error of any other (see the module table).

    The key and ``secrets`` of :data:`MIN_REDACTED_KEY_CHARS` or more echoed in the body become
    ``***`` before decoding.

    Raises:
        AdapterError: the status's error, or ``TransientAPIError`` for a 2xx body that is not JSON.
    """
    if not 200 <= status < 300:
        error = _status_error(status, headers, payload, api_key, url, secrets)
        log.debug("POST %s -> %s", url, error)
        raise error
    for text in (api_key, *secrets):
        if len(text) >= MIN_REDACTED_KEY_CHARS:
            secret = text.encode()
            if secret in payload:
                payload = payload.replace(secret, b"***")
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise TransientAPIError(f"malformed JSON body in 200 reply ({len(payload)} bytes)") from exc


def parse_reply(data: Any, headers: Mapping[str, str]) -> ChatReply:
    """Build a :class:`ChatReply` from a decoded chat-completion body (a 200 reply, or a batch result's body).

    Raises:
        TransientAPIError: the body has no ``choices[0].message`` (or ``.text``) string.
    """
    finish: str | None = None
    try:
        choice = data["choices"][0]
        if "message" not in choice and isinstance(choice.get("text"), str):  # /completions (text_completion)
            content = choice["text"]
        else:
            message = choice["message"]
            content = message.get("content") or ""
            refusal = message.get("refusal")
            if isinstance(refusal, str) and refusal:  # structured outputs' refusal: no content
                content, finish = content or refusal, "refusal"
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise TransientAPIError(f"malformed reply: no choices[0].message ({exc!r})") from exc
    if not isinstance(content, str):
        raise TransientAPIError("malformed reply: message content is not a string")
    usage: Usage | None = None
    total: int | None = None
    raw_usage = data.get("usage")
    if isinstance(raw_usage, dict):
        prompt = token_count(raw_usage.get("prompt_tokens"))
        completion = token_count(raw_usage.get("completion_tokens"))
        details = raw_usage.get("prompt_tokens_details")
        cached = token_count(details.get("cached_tokens")) if isinstance(details, dict) else 0
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached,
                      cache_write_tokens=token_count(raw_usage.get("cache_creation_input_tokens")))
        total = token_count(raw_usage.get("total_tokens")) or prompt + completion
    return ChatReply(
        content=content,
        usage=usage,
        usage_tokens=total,
        headers=headers,
        raw=data,
        citations=_citations(data),
        finish_reason=finish or choice.get("finish_reason"),
    )


async def post_chat(
    session: aiohttp.ClientSession,
    url: str,
    api_key: str,
    body: Mapping[str, Any] | bytes,
    *,
    headers: CIMultiDictProxy[str] | None = None,
    secrets: tuple[str, ...] = (),
) -> ChatReply:
    """Send ONE chat-completions request and return the parsed reply (no retry here).

    Args:
        url: full route URL, e.g. ``https://api.openai.com/v1/chat/completions``.
        api_key: the key, redacted from messages and replies; with ``headers=None`` it is sent
            as a bearer token (``""``: no Authorization header).
        body: JSON request body, or its bytes from :func:`encode_body`.
        headers: :func:`request_headers` of ``api_key``; None builds them here.
        secrets: further values to redact as the key is.

    Raises:
        AdapterError: as in the module table.
    """
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    sent_headers = headers if headers is not None else request_headers(api_key)
    status, reply_headers, payload = await post_bytes(session, url, data, sent_headers)
    return parse_reply(decode_json(status, reply_headers, payload, api_key, url, secrets=secrets), reply_headers)


@dataclass(frozen=True)
class BytesReply:
    """A 2xx reply of a GET: its body and headers (``usage_tokens`` always None)."""

    body: bytes
    headers: Mapping[str, str]
    usage_tokens: int | None = None


async def get_bytes(session: aiohttp.ClientSession, url: str, params: Mapping[str, str], *,
                    secret: str = "", headers: CIMultiDictProxy[str] | None = None) -> BytesReply:
    """Send ONE GET and return its body; no retry. Errors map as for :func:`post_chat`;
    ``params`` (or ``headers``, of :func:`request_headers`) may hold an API key ``secret``,
    redacted from error messages.
    """
    try:
        async with session.get(url, params=dict(params), headers=headers) as response:
            payload = await response.read()
            status = response.status
            reply_headers = {k.lower(): v for k, v in response.headers.items()}
    except TimeoutError as exc:
        raise RequestTimeout(f"request timed out after {session.timeout.total} s") from exc
    except aiohttp.InvalidURL as exc:
        raise PermanentAPIError(f"invalid URL {url!r}") from exc
    except aiohttp.ClientConnectorError as exc:
        raise ConnectError(f"cannot connect to {url}: {exc.os_error.__class__.__name__}: {exc.os_error}") from exc
    except aiohttp.ClientError as exc:
        raise TransientAPIError(f"HTTP client error: {type(exc).__name__}") from exc
    if not 200 <= status < 300:
        raise _status_error(status, reply_headers, payload, secret, url)
    return BytesReply(payload, reply_headers)
