"""A deterministic fake Checker for tests, demos and benchmarks (no model, no network)."""

from __future__ import annotations

import hashlib

import anyio

from dahl.errors import TransientAPIError
from dahl.records import Answer, Claim, Label, Verdict

__all__ = ["FakeChecker"]


def _unit_interval(text: str, salt: str) -> float:
    """Map ``text`` to a stable float in [0, 1) (blake2b-64 of salt + text)."""
    digest = hashlib.blake2b(f"{salt}\x00{text}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class FakeChecker:
    """Labels each claim from a hash of its text: same claim, same label, every run.

    Args:
        supported: share of claims labelled supported, in [0, 1].
        unknown: share labelled unknown; the rest is unsupported.
        latency_s: simulated call latency, seconds (0: none).
        fail_rate: share of claims (also hash-chosen) whose check raises TransientAPIError.

    Raises:
        ValueError: shares outside [0, 1] or summing above 1.
    """

    #: Concurrency hint for the pipeline.
    concurrency = 8
    #: Never stored in the result cache: computing a verdict is cheaper than storing it.
    cacheable = False
    parser_version = "1"

    def __init__(
        self,
        *,
        supported: float = 0.7,
        unknown: float = 0.05,
        latency_s: float = 0.0,
        fail_rate: float = 0.0,
    ) -> None:
        if not (0 <= supported <= 1 and 0 <= unknown <= 1 and supported + unknown <= 1):
            raise ValueError("supported and unknown must be shares in [0, 1] summing to at most 1")
        if latency_s < 0 or not 0 <= fail_rate <= 1:
            raise ValueError("latency_s must be >= 0 and fail_rate in [0, 1]")
        self.supported = supported
        self.unknown = unknown
        self.latency_s = latency_s
        self.fail_rate = fail_rate
        self.fingerprint = f"fake/v1:s={supported}:u={unknown}:f={fail_rate}"

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the hash-determined verdict for ``claim``.

        Raises:
            TransientAPIError: for the ``fail_rate`` share of claims.
        """
        if self.latency_s:
            await anyio.sleep(self.latency_s)
        if self.fail_rate and _unit_interval(claim.text, "fail") < self.fail_rate:
            raise TransientAPIError("fake failure")
        x = _unit_interval(claim.text, "label")
        if x < self.supported:
            label = Label.SUPPORTED
        elif x < self.supported + self.unknown:
            label = Label.UNKNOWN
        else:
            label = Label.UNSUPPORTED
        return Verdict(label=label, checker=self.fingerprint)
