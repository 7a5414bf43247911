"""Configuration of the mock OpenAI-compatible server: latency, rate limits, faults, oracle.

Built once at the edge (CLI flags or a test) and passed down; immutable.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from bench.mock_batches import BatchMockConfig
from dahl.errors import ConfigError

__all__ = ["FAULT_KINDS", "Latency", "MockConfig", "parse_fault", "parse_latency"]

#: Injectable faults. ``500``/``503``: that status with an error body; ``reset``: the
#: connection is aborted; ``timeout``: no reply for ``MockConfig.timeout_fault_s``;
#: ``malformed``: 200 with a truncated JSON body; ``offformat``: 200 with chatty content
#: that is neither a label nor a claim list; ``quota``: 429 ``insufficient_quota``;
#: ``401``: OpenAI's ``invalid_api_key`` reply; ``400``: an ``invalid_request_error``;
#: ``529``: Anthropic's ``overloaded_error`` (:mod:`bench.mock_anthropic`); ``refusal``: 200 with
#: a refusal (OpenAI's ``message.refusal`` and null content; Anthropic's ``stop_reason: "refusal"``).
FAULT_KINDS: tuple[str, ...] = (
    "500", "503", "reset", "timeout", "malformed", "offformat", "quota", "401", "400", "529", "refusal")


@dataclass(frozen=True)
class Latency:
    """Service time added to every admitted request.

    Attributes:
        median_ms: fixed latency, or the median of the lognormal, in milliseconds (>= 0).
        sigma: lognormal shape (standard deviation of the log); 0 means fixed latency.
    """

    median_ms: float = 0.0
    sigma: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median_ms) and self.median_ms >= 0):
            raise ConfigError(f"latency median must be >= 0 ms, got {self.median_ms}")
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ConfigError(f"latency sigma must be >= 0, got {self.sigma}")

    def sample_s(self, rng: random.Random) -> float:
        """Draw one service time in seconds.

        Lognormal with median ``median_ms``: ``exp(N(ln median, sigma^2))`` ms, whose median
        is ``median_ms`` and mean ``median_ms * exp(sigma^2 / 2)``; fixed when ``sigma == 0``.

        Args:
            rng: the seeded generator to draw from (unused for fixed latency).
        """
        if self.median_ms <= 0:
            return 0.0
        if self.sigma == 0:
            return self.median_ms / 1000.0
        return rng.lognormvariate(math.log(self.median_ms), self.sigma) / 1000.0


def parse_latency(spec: str) -> Latency:
    """Parse ``lognormal:MEDIAN_MS[:SIGMA]`` (sigma defaults to 0.5).

    Args:
        spec: e.g. ``"lognormal:200"`` or ``"lognormal:200:0.8"``; milliseconds.

    Returns:
        The latency distribution.

    Raises:
        ConfigError: unknown distribution or numbers that do not parse.
    """
    parts = spec.split(":")
    if parts[0] != "lognormal" or len(parts) not in (2, 3):
        raise ConfigError(f"--latency must look like lognormal:MEDIAN_MS[:SIGMA], got {spec!r}")
    try:
        median = float(parts[1])
        sigma = float(parts[2]) if len(parts) == 3 else 0.5
    except ValueError as exc:
        raise ConfigError(f"--latency numbers do not parse in {spec!r}") from exc
    return Latency(median_ms=median, sigma=sigma)


def parse_fault(spec: str) -> tuple[str, float]:
    """Parse one ``KIND=RATE`` fault flag.

    Args:
        spec: e.g. ``"503=0.05"``; RATE is a probability per admitted request in [0, 1].

    Returns:
        ``(kind, rate)``.

    Raises:
        ConfigError: unknown kind (see :data:`FAULT_KINDS`) or a rate outside [0, 1].
    """
    kind, sep, rate_text = spec.partition("=")
    if not sep or kind not in FAULT_KINDS:
        raise ConfigError(f"--fault must be KIND=RATE with KIND in {', '.join(FAULT_KINDS)}; got {spec!r}")
    try:
        rate = float(rate_text)
    except ValueError as exc:
        raise ConfigError(f"--fault rate does not parse in {spec!r}") from exc
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--fault rate must be in [0, 1], got {spec!r}")
    return kind, rate


@dataclass(frozen=True)
class MockConfig:
    """Everything the mock server does differently from a perfect, instant endpoint.

    Attributes:
        port: TCP port on 127.0.0.1; 0 picks a free one.
        oracle_files: dahl JSONL or FActScore labeled JSONL files answering check/split prompts.
        latency: service time per admitted request.
        rpm: requests per minute, or None for no limit.
        tpm: tokens per minute (prompt estimate + max_tokens, counted at admission), or None.
        window_s: length of the fixed rate-limit window in seconds; each window admits
            ``rpm * window_s / 60`` requests and ``tpm * window_s / 60`` tokens (floored).
        faults: ``(kind, rate)`` pairs; rates are summed per kind and their total must be <= 1.
        seed: seeds the latency and fault draws, so runs are reproducible.
        timeout_fault_s: how long a ``timeout`` fault holds the request, seconds.
        echo_auth: append the request's ``Authorization`` header to every reply's content
            (on a line of its own), then ``api-key`` and ``x-*`` headers when sent, as a
            server that echoes the key would (``/v1/messages``: see :mod:`bench.mock_anthropic`).
        oracle_answers: JSONL ``{question, response}`` answering generation requests
            (:mod:`bench.mock_generate`), or None.
        model_answers: ``(model, file)`` pairs: files as ``oracle_answers`` answering the
            generation requests of that model only (tried first).
        batches: the batch routes' completion time, expiry and errors (:mod:`bench.mock_batches`).
        finish_length: cut every generated reply in its last sentence, ``finish_reason: "length"``.
        cached_prompt: report half of every prompt's tokens (rounded down) as read from a prompt
            cache (OpenAI's ``prompt_tokens_details.cached_tokens``; Anthropic's
            ``cache_read_input_tokens``, the rest in ``input_tokens``).
        llama: answer validation failures (a ``json_schema`` reply format, a body that is not
            JSON) with llama.cpp's HTTP 500 (:mod:`bench.mock_local`).
        slots: requests computed at once, the rest queued (None: no limit).
        n_ctx: context window, tokens: a longer prompt is refused, a reply past it is cut.
        models: the names ``GET /v1/models`` lists (none: a JSON 404).

    Raises:
        ConfigError: a limit that admits less than one request/token per window, a
            non-positive window, or fault rates summing above 1.
    """

    port: int = 0
    oracle_files: tuple[Path, ...] = ()
    latency: Latency = field(default_factory=Latency)
    rpm: int | None = None
    tpm: int | None = None
    window_s: float = 60.0
    faults: tuple[tuple[str, float], ...] = ()
    seed: int = 0
    timeout_fault_s: float = 3600.0
    echo_auth: bool = False
    oracle_answers: Path | None = None
    model_answers: tuple[tuple[str, Path], ...] = ()
    finish_length: bool = False
    cached_prompt: bool = False
    llama: bool = False
    slots: int | None = None
    n_ctx: int | None = None
    models: tuple[str, ...] = ()
    batches: BatchMockConfig = field(default_factory=BatchMockConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in 0..65535, got {self.port}")
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise ConfigError(f"--window-s must be > 0 seconds, got {self.window_s}")
        for name, per_minute in (("rpm", self.rpm), ("tpm", self.tpm)):
            if per_minute is not None and per_minute * self.window_s / 60.0 < 1.0:
                raise ConfigError(
                    f"--{name} {per_minute} allows less than one unit per {self.window_s} s window; "
                    "raise the limit or lengthen --window-s"
                )
        for kind, rate in self.faults:
            if kind not in FAULT_KINDS or not 0.0 <= rate <= 1.0:
                raise ConfigError(f"bad fault {kind}={rate}")
        if sum(rate for _, rate in self.faults) > 1.0 + 1e-9:
            raise ConfigError("fault rates sum to more than 1")
        for name in ("slots", "n_ctx"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
        if self.timeout_fault_s < 0:
            raise ConfigError("timeout_fault_s must be >= 0 seconds")

    @property
    def requests_per_window(self) -> int | None:
        """Requests admitted per window (``floor(rpm * window_s / 60)``), or None without a limit."""
        return None if self.rpm is None else math.floor(self.rpm * self.window_s / 60.0 + 1e-9)

    @property
    def tokens_per_window(self) -> int | None:
        """Tokens admitted per window (``floor(tpm * window_s / 60)``), or None without a limit."""
        return None if self.tpm is None else math.floor(self.tpm * self.window_s / 60.0 + 1e-9)

    def fault_rates(self) -> dict[str, float]:
        """Rate per fault kind (probability per admitted request), summed over repeated flags."""
        rates: dict[str, float] = {}
        for kind, rate in self.faults:
            rates[kind] = rates.get(kind, 0.0) + rate
        return rates
