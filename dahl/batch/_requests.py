"""The records a batch wave is made of: one planned request, and what a stage's results need to be stored."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dahl.records import Evidence

__all__ = ["BatchRequest", "Stage", "StageMeta"]

Stage = Literal["split", "check", "cover"]


@dataclass(frozen=True)
class BatchRequest:
    """One request of a wave.

    Attributes:
        custom_id: the result's cache key (32 hex digits, :mod:`dahl.cache._keys`); of a
            cover request, blake2b-128 of its facts' keys.
        stage: ``"split"``, ``"check"`` or ``"cover"``.
        body: the chat-completions body the online adapter would send.
        keys: cover: the cache keys of its facts, in the prompt's order.
        evidence: check with a corpus: the passages the verdict keeps.
    """

    custom_id: str
    stage: Stage
    body: dict[str, Any]
    keys: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class StageMeta:
    """What :mod:`dahl.batch._collect` needs to store a stage's replies as the online adapter would.

    Attributes:
        fingerprint: the adapter's fingerprint (a verdict's ``checker``).
        parser_version: the adapter's parser version.
        base_url: the endpoint's API root.
        model: the endpoint's model.
        api_key_env: the environment variable holding its key (``""``: keyless).
        with_evidence: check: claims are judged against corpus passages (``check-evidence/v1``).
    """

    fingerprint: str
    parser_version: str
    base_url: str
    model: str
    api_key_env: str
    with_evidence: bool = False
