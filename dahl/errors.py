"""Errors raised by dahl.

Every error dahl raises on purpose derives from ``DahlError``::

    DahlError
    ├── InputError(ValueError)        bad input: file, line and field are named
    ├── ConfigError(ValueError)       bad option, missing key, unknown format
    ├── AdapterError                  a Splitter or Checker call failed
    │   ├── RateLimited               429; ``retry_after_s`` seconds to wait
    │   ├── TransientAPIError         408, 409, 5xx, reset, timeout: retry with backoff
    │   │   ├── ConnectError          refused, unresolvable host: fatal once retries run out
    │   │   └── RequestTimeout        no reply within the endpoint's timeout
    │   ├── PermanentAPIError         other 4xx, oversized request: never retried
    │   │   ├── ModelRefused          the model refused the request (a refusal stop reason)
    │   │   └── ReplyCut              the reply ended at the token limit (finish_reason length)
    │   ├── QuotaExhausted            quota or billing exhausted: the run stops cleanly
    │   │   └── CostCapReached        the next call could pass --max-cost: stops likewise
    │   ├── FatalAPIError             the endpoint cannot work (bad key, unreachable,
    │   │                             every call refused): the run stops cleanly
    │   └── OutputParseError          the model's reply could not be parsed
    ├── CacheError                    the verdict cache cannot be used
    └── OutputWriteError              an output file cannot be written (disk full, read-only)

Third-party exceptions are translated into this tree at module boundaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

__all__ = [
    "AdapterError",
    "CacheError",
    "ConfigError",
    "ConnectError",
    "CostCapReached",
    "DahlError",
    "FatalAPIError",
    "InputError",
    "ModelRefused",
    "OutputParseError",
    "OutputWriteError",
    "PermanentAPIError",
    "QuotaExhausted",
    "RateLimited",
    "ReplyCut",
    "RequestTimeout",
    "TransientAPIError",
]


class DahlError(Exception):
    """Root of every error dahl raises on purpose."""


class InputError(DahlError, ValueError):
    """Input data that cannot be read.

    Args:
        message: what is wrong, in plain words.
        file: path of the offending file, when known.
        line: 1-based line (or CSV row) number, when known.
        field: the field or JSON path at fault, e.g. ``"response"`` or ``"$.claims[2].label"``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file) if self.line is None else f"{self.file}:{self.line}")
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class ConfigError(DahlError, ValueError):
    """An option, config file or environment setting is invalid or missing."""


class AdapterError(DahlError):
    """A Splitter or Checker call failed.

    Args:
        message: what failed.
        status: HTTP status code, when the failure came from an HTTP reply.
    """

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class RateLimited(AdapterError):
    """The server answered 429 (rate limit, not quota).

    Args:
        message: what the server said.
        retry_after_s: seconds the server asked us to wait, if it said.
        status: HTTP status (429).
        headers: the reply's headers with lowercase names (its ``x-ratelimit-*`` limits), if known.
    """

    def __init__(
        self, message: str, *, retry_after_s: float | None = None, status: int | None = 429,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.retry_after_s = retry_after_s
        self.headers: Mapping[str, str] = headers if headers is not None else {}
        super().__init__(message, status=status)


class TransientAPIError(AdapterError):
    """A failure worth retrying with backoff: 408, 409, 5xx, connection reset, timeout."""


class ConnectError(TransientAPIError):
    """No connection could be made (refused, host not resolved): retried, then :class:`FatalAPIError`."""


class RequestTimeout(TransientAPIError):
    """No reply came within the endpoint's timeout (``timeout_s``); retried like any transient
    error, except against a local server (see :class:`~dahl.lanes.Lane`)."""


class PermanentAPIError(AdapterError):
    """A failure that retrying cannot fix: 4xx other than 408/409/429, oversized request, or a
    reply of any status whose error is a validation error naming the request's own fields."""


class ModelRefused(PermanentAPIError):
    """The model refused to answer a Splitter's, Checker's or judge's request: Anthropic's
    ``stop_reason: "refusal"``, OpenAI's ``message.refusal`` or ``finish_reason: "content_filter"``.

    Args:
        message: what the model said, or the stop reason when it said nothing.
    """


class ReplyCut(PermanentAPIError):
    """A Splitter's, Checker's or judge's reply ended at the token limit (``finish_reason:
    "length"``; a server whose context window is smaller than prompt + ``max_tokens`` cuts it
    too): half a reply is never parsed. Never retried; raise ``max_tokens`` or the server's
    context window.
    """


class QuotaExhausted(AdapterError):
    """The account's quota or billing limit is exhausted; the run stops cleanly."""


def _plain_usd(usd: float) -> str:
    """``usd`` as typed, without an exponent (``1e-05`` -> ``0.00001``, ``0.0`` -> ``0``)."""
    text = format(Decimal(repr(usd)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


class CostCapReached(QuotaExhausted):
    """The next call could take the money spent past ``--max-cost``; the run stops before it.

    Args:
        cap_usd: the cap, USD.
        spent_usd: money spent by this run's calls so far, USD.
        next_usd: the most the refused call could have cost, USD.
    """

    def __init__(self, *, cap_usd: float, spent_usd: float, next_usd: float) -> None:
        self.cap_usd = cap_usd
        self.spent_usd = spent_usd
        self.next_usd = next_usd
        super().__init__(
            f"--max-cost ${_plain_usd(cap_usd)} reached: this run spent ${spent_usd:.6f}, and its next request "
            f"could cost up to ${next_usd:.6f}"
        )


class FatalAPIError(AdapterError):
    """The endpoint cannot work for this run (bad key, unreachable, breaker tripped); the run stops.

    Args:
        message: what failed, naming the endpoint (never the key).
        status: HTTP status of the last failing reply, when there was one.
    """


class OutputParseError(AdapterError):
    """The model's reply did not have the expected format.

    Args:
        message: the parse error, suitable to send back to the model once.
        raw: the reply that failed to parse.
    """

    def __init__(self, message: str, *, raw: str = "") -> None:
        self.raw = raw
        super().__init__(message)


class CacheError(DahlError):
    """The verdict cache cannot be read, cleared or used (a closed store, a failed statistics read)."""


class OutputWriteError(DahlError):
    """An output file cannot be written (disk full, read-only file or folder).

    Args:
        message: what failed, naming the file; finished results already on disk are kept.
        path: the file that could not be written.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        super().__init__(message)
