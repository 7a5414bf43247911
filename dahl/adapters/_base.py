"""The Splitter, Checker and Coverer protocols, and the optional capabilities the cache reads.

Every Splitter and Checker has ``fingerprint`` (in cache keys), ``cacheable`` (False: called
directly, no store) and ``parser_version`` (stored beside a result; a new one re-parses the
stored raw reply). The other protocols are optional, ``runtime_checkable`` capabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dahl.records import Answer, AnswerResult, Claim, Evidence, Verdict

__all__ = [
    "Batched", "Checker", "ConcurrencyHint", "Coverer", "FramedKeys", "LookingUp", "Lookup",
    "PreparedKeys", "RawSplitter", "ReparsingChecker", "RequestKeyed", "RequestKeyedSplitter",
    "Splitter"
]


@runtime_checkable
class Splitter(Protocol):
    """Turns an answer into atomic claims.

    Attributes:
        fingerprint: names the Splitter and every setting that changes its output.
        cacheable: False for a cheap, deterministic Splitter (never cached).
        parser_version: version of its output parser.
    """

    fingerprint: str
    cacheable: bool
    parser_version: str

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` (already preprocessed) into claims, in answer order.

        Raises:
            AdapterError: the split failed (the answer gets status ``error``).
        """
        ...


@runtime_checkable
class Checker(Protocol):
    """Decides whether one claim is supported.

    Attributes:
        fingerprint: names the Checker and every setting that changes its output.
        cacheable: False for a cheap, deterministic Checker (never cached).
        parser_version: version of its output parser.
    """

    fingerprint: str
    cacheable: bool
    parser_version: str

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim`` (label ``unknown`` when undecided).

        Raises:
            AdapterError: the call failed; the pipeline records label ``error``.
        """
        ...


@runtime_checkable
class RequestKeyed(Protocol):
    """A Checker whose cache key comes from the request it sends.

    Attributes:
        cache_request_covers_input: True when the material holds the question and claim
            as sent (the key then leaves the raw texts out).
    """

    cache_request_covers_input: bool

    def cache_request(self, claim: Claim, answer: Answer) -> dict[str, Any]:
        """The material that fully determines the verdict (msgspec-encodable)."""
        ...


@runtime_checkable
class RequestKeyedSplitter(Protocol):
    """A Splitter whose cache key comes from the request it sends."""

    def cache_request(self, answer: Answer) -> dict[str, Any]:
        """The material that fully determines the claims (msgspec-encodable)."""
        ...


@runtime_checkable
class FramedKeys(RequestKeyed, Protocol):
    """A :class:`RequestKeyed` Checker whose material is a constant frame plus one message per claim.

    ``cache_request(claim, answer) == {**cache_request_frame(), "content": cache_request_content(claim, answer)}``.
    """

    def cache_request_frame(self) -> dict[str, Any] | None:
        """The request without its per-claim message (the same object while settings are
        unchanged); None when the fast path does not apply."""
        ...

    def cache_request_content(self, claim: Claim, answer: Answer) -> str:
        """The templated per-claim message."""
        ...

    def cache_request_contents(self, claims: Sequence[Claim], answer: Answer) -> list[str]:
        """:meth:`cache_request_content` of every claim of ``answer``, in order."""
        ...

    def cache_request_parts(self) -> tuple[str, str, str] | None:
        """The message text around the question and the claim (before, between, after), or None."""
        ...


@runtime_checkable
class PreparedKeys(Protocol):
    """A Checker whose keys need blocking work first (evidence retrieval)."""

    async def prepare_keys(self, claims: Sequence[Claim], answer: Answer) -> None:
        """Do the blocking part of the claims' keys off the event loop; awaited before the keys are computed."""
        ...


@runtime_checkable
class ReparsingChecker(Protocol):
    """A Checker that can parse a stored raw reply again."""

    def parse_raw(self, raw: str) -> Verdict:
        """The verdict in ``raw`` by the current parser.

        Raises:
            DahlError: the reply does not parse.
        """
        ...


@runtime_checkable
class RawSplitter(Protocol):
    """A Splitter that returns the raw reply its claims come from, and parses a stored one again."""

    async def split_with_raw(self, answer: Answer) -> tuple[list[Claim], str | None]:
        """The claims of ``answer`` and the raw reply they were parsed from.

        Raises:
            AdapterError: the split failed.
        """
        ...

    def parse_raw(self, raw: str, answer: Answer) -> list[Claim]:
        """The claims in ``raw`` by the current parser.

        Raises:
            DahlError: the reply does not parse.
        """
        ...


@runtime_checkable
class Batched(Protocol):
    """A Checker whose requests a provider batch API can carry."""

    def request_of(self, claim: Claim, answer: Answer) -> tuple[dict[str, Any], tuple[Evidence, ...]] | None:
        """The request body of ``claim`` and the evidence it holds; None when there is no passage to send."""
        ...


@runtime_checkable
class ConcurrencyHint(Protocol):
    """An offline Checker that says how many checks (``concurrency`` >= 1) to run at once."""

    concurrency: int


class Lookup(NamedTuple):
    """What :meth:`LookingUp.look_up` found for one answer's claims.

    Attributes:
        verdicts: per claim, the stored verdict, or None when not found.
        keys: per claim, its cache key (hand it to :meth:`LookingUp.check_missed`).
        generation: the store's write generation read before the lookup.
    """

    verdicts: list[Verdict | None]
    keys: list[str]
    generation: int


@runtime_checkable
class LookingUp(Protocol):
    """A Checker that looks all claims of an answer up at once (:class:`dahl.cache.CachingChecker`)."""

    @property
    def can_look_up(self) -> bool:
        """Whether :meth:`look_up` may be used (a store is in use)."""
        ...

    async def look_up(self, claims: Sequence[Claim], answer: Answer) -> Lookup:
        """One batched lookup of every claim of ``answer``."""
        ...

    async def check_missed(self, claim: Claim, answer: Answer, key: str, generation: int) -> Verdict:
        """Check a claim :meth:`look_up` did not find, with its key and the lookup's generation."""
        ...


@runtime_checkable
class Coverer(Protocol):
    """Adds recall to a finished answer: judges its coverage of its question's F*.

    Attributes:
        fingerprint: names the judge, the reference set and every setting that changes recall.
    """

    fingerprint: str

    async def cover(self, result: AnswerResult) -> AnswerResult:
        """Return ``result`` with ``recall`` set (UNSET without a reference set); a failed
        judge call labels the fact ``error``.

        Raises:
            QuotaExhausted, FatalAPIError: the run must stop.
        """
        ...
