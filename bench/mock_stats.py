"""Counters of the mock server, served at ``GET /stats`` and zeroed by ``POST /stats/reset``."""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["MockStats"]


class MockStats:
    """What the mock server has seen since start or the last reset.

    Attributes:
        requests: chat-completions requests received (any outcome).
        kinds: requests per kind: ``check``, ``split``, ``cover``, ``other``.
        status: replies per HTTP status (aborted and never-answered requests have none).
        rate_limited: 429 replies per reason: ``requests``, ``tokens``, ``quota``.
        faults: injected faults per kind (see ``bench.mock_config.FAULT_KINDS``).
        prompt_tokens: estimated prompt tokens of 200 replies (``usage.prompt_tokens``).
        completion_tokens: estimated completion tokens of 200 replies.
        admitted_tokens: tokens charged to the TPM window (prompt estimate + max_tokens).
        in_flight: requests being handled now.
        in_flight_max: most requests handled at once.
        oracle_conflicts: (question, claim) pairs with conflicting oracle labels (not reset).
    """

    def __init__(self, oracle_conflicts: int = 0) -> None:
        self.oracle_conflicts = oracle_conflicts
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        """Zero every counter; ``in_flight_max`` restarts from the current ``in_flight``."""
        self.requests = 0
        self.kinds: Counter[str] = Counter()
        self.status: Counter[str] = Counter()
        self.rate_limited: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.admitted_tokens = 0
        self.in_flight_max = self.in_flight

    def enter(self) -> None:
        """Count one request entering the handler."""
        self.requests += 1
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)

    def leave(self) -> None:
        """Count one request leaving the handler (in a ``finally``)."""
        self.in_flight -= 1

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready snapshot: ``{"requests", "split", "check", "other", "status", "tokens", ...}``."""
        return {
            "requests": self.requests,
            "split": self.kinds["split"],
            "check": self.kinds["check"],
            "cover": self.kinds["cover"],
            "other": self.kinds["other"],
            "kinds": dict(sorted(self.kinds.items())),
            "status": dict(sorted(self.status.items())),
            "rate_limited": dict(sorted(self.rate_limited.items())),
            "faults": dict(sorted(self.faults.items())),
            "tokens": {
                "prompt": self.prompt_tokens,
                "completion": self.completion_tokens,
                "total": self.prompt_tokens + self.completion_tokens,
                "admitted": self.admitted_tokens,
            },
            "in_flight": self.in_flight,
            "in_flight_max": self.in_flight_max,
            "oracle_conflicts": self.oracle_conflicts,
        }
