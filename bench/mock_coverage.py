"""What the mock server answers to a coverage prompt (dahl's ``cover/v1`` template).

The user message holds ``<response>`` and ``<facts>`` with one ``N. fact`` line per
fact. The reply is one label per fact, in order: ``{"coverage": [...]}`` in JSON mode,
a bare JSON array in text mode.

With an oracle that knows the response (found by its normalized text), a fact is
``covered`` iff it is one of that response's claims labelled supported (for FActScore
files: its human atomic facts labelled S), else ``not_covered``; the replayed labels
and the wire path then give the same recall. Otherwise (no oracle, or a response it
lacks) the label is a hash of the normalized (response, fact): blake2b modulo 100,
below 50 covered, below 60 partial, else not covered.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

from bench.mock_oracle import Oracle
from dahl.records import normalize_text

__all__ = ["cover_content", "default_coverage", "numbered_facts"]

_NUMBERED = re.compile(r"^\s*\d+\.\s+(.*\S)\s*$")


def numbered_facts(block: str) -> tuple[str, ...]:
    """The facts of a ``<facts>`` block: each ``N. text`` line's text, in order (other lines skipped)."""
    return tuple(m.group(1) for line in block.splitlines() if (m := _NUMBERED.match(line)))


def default_coverage(response: str, fact: str) -> str:
    """Reproducible label of ``fact`` in ``response`` (50% covered, 10% partial, 40% not covered)."""
    key = f"{normalize_text(response)}\x00{normalize_text(fact)}".encode()
    bucket = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") % 100
    return "covered" if bucket < 50 else "partial" if bucket < 60 else "not_covered"


def cover_content(response: str, facts: Sequence[str], oracle: Oracle | None, *, json_mode: bool) -> str:
    """The reply content of a coverage request (see the module docstring)."""
    supported = oracle.supported(response) if oracle is not None else None
    if supported is not None:
        labels = ["covered" if normalize_text(f) in supported else "not_covered" for f in facts]
    else:
        labels = [default_coverage(response, f) for f in facts]
    return json.dumps({"coverage": labels} if json_mode else labels)
