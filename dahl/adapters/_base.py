"""The Splitter and Checker protocols every adapter implements, and the capabilities the cache reads.

Every Splitter and Checker declares what the cache needs to know of it:

- ``fingerprint`` (str): names the adapter and every setting that changes its output
  (goes into cache keys).
- ``cacheable`` (bool): False marks a cheap, deterministic adapter (replay, fake,
  given, rules): the caching wrapper calls it directly, with no store, key or single
  flight.
- ``parser_version`` (str): version of the adapter's output parser; stored beside a
  result, not part of its key (a new version re-parses the stored raw reply).

Optional capabilities are the protocols below, tested with ``isinstance`` (each is
``runtime_checkable``) and checked by mypy where an adapter is built:

- :class:`RequestKeyed` / :class:`RequestKeyedSplitter`: ``cache_request``, the material
  that fully determines the output (request body, base URL, model, template version).
- :class:`FramedKeys`: a Checker whose request is a constant frame plus one templated
  message per claim, so keys are hashed around the per-claim text.
- :class:`PreparedKeys`: blocking work the key needs (retrieving evidence passages),
  done off the event loop before the keys are computed.
- :class:`ReparsingChecker` / :class:`RawSplitter`: re-parse a stored raw reply after a
  parser change instead of calling again; a Splitter that returns the raw reply too.
- :class:`Batched`: a Checker whose requests a provider batch API can carry.
- :class:`ConcurrencyHint`: the pipeline's worker count for an offline Checker.
- :class:`LookingUp`: a Checker that looks every claim of an answer up at once (the
  caching Checker); the pipeline then sends only the claims not found to ``check``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dahl.records import Answer, AnswerResult, Claim, Evidence, Verdict

__all__ = [
    "Batched",
    "Checker",
    "ConcurrencyHint",
    "Coverer",
    "FramedKeys",
    "LookingUp",
    "Lookup",
    "PreparedKeys",
    "RawSplitter",
    "ReparsingChecker",
    "RequestKeyed",
    "RequestKeyedSplitter",
    "Splitter",
]


@runtime_checkable
class Splitter(Protocol):
    """Turns an answer into atomic claims.

    Attributes:
        fingerprint: stable string naming the Splitter and every setting that
            changes its output (goes into cache keys).
        cacheable: False for a cheap, deterministic Splitter (never cached).
        parser_version: version of its output parser (``"1"`` for offline Splitters).
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
        fingerprint: stable string naming the Checker and every setting that
            changes its output (goes into cache keys).
        cacheable: False for a cheap, deterministic Checker (never cached).
        parser_version: version of its output parser (``"1"`` for offline Checkers).
    """

    fingerprint: str
    cacheable: bool
    parser_version: str

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim`` (``answer`` gives the question for context).

        A Checker returns a Verdict with label ``unknown`` when it cannot decide.

        Raises:
            AdapterError: the call failed; the pipeline records label ``error``.
        """
        ...


@runtime_checkable
class RequestKeyed(Protocol):
    """A Checker whose cache key comes from the request it sends.

    Attributes:
        cache_request_covers_input: True when the material holds the question and claim
            as sent (then the key leaves the raw texts out); False when it holds only
            extra settings (the evidence Checker's document ids).
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
        """The request without its per-claim message; None when the fast path does not apply.

        The same object is handed out while the Checker's settings are unchanged.
        """
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
    """An offline Checker that says how many checks the pipeline should run at once.

    Attributes:
        concurrency: check workers (>= 1).
    """

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
    """A Checker that looks all claims of an answer up at once (:class:`dahl.cache.CachingChecker`).

    Attributes:
        can_look_up: whether :meth:`look_up` may be used now (a store is in use).
    """

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

    The engine's cover stage calls it once per finished answer; it looks the
    answer's reference set up itself (by ``question_id``, else the normalized
    question), judges coverage (caching per fact) and returns the result with
    ``recall`` set (left UNSET when the question has no reference set).

    Attributes:
        fingerprint: stable string naming the judge, the reference set and every
            setting that changes recall (F* cut, α, β, partial mode).
    """

    fingerprint: str

    async def cover(self, result: AnswerResult) -> AnswerResult:
        """Return ``result`` with its recall.

        A failed judge call gives the fact label ``error`` (the answer's recall is
        None, reason ``coverage_error``), never ``not_covered``.

        Raises:
            QuotaExhausted, FatalAPIError: the run must stop.
        """
        ...
