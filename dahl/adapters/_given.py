"""The ``given`` Splitter: claims supplied with the input (e.g. FActScore human atomic facts)."""

from __future__ import annotations

from dahl.errors import ConfigError
from dahl.records import Answer, Claim, normalize_text

__all__ = ["GivenSplitter"]


class GivenSplitter:
    """Splitter that returns ``answer.claims`` as they are (``fingerprint`` ``"given/v1"``).

    Claim text is normalized, the given label copied to ``Claim.given_label`` and claims are
    indexed 0..n-1 in input order; no span or sentence is known.
    """

    fingerprint: str = "given/v1"
    #: Splitting is cheap and deterministic: the verdict cache does not store it.
    cacheable: bool = False
    parser_version: str = "1"

    async def split(self, answer: Answer) -> list[Claim]:
        """Return the claims given with ``answer``.

        Raises:
            ConfigError: ``answer.claims`` is None (the input carries no claims);
                the message names the answer id.
        """
        if answer.claims is None:
            raise ConfigError(
                f"--splitter given needs claims in the input; answer {answer.id!r} has none"
            )
        return [
            Claim(text=normalize_text(given.text), index=i, given_label=given.label)
            for i, given in enumerate(answer.claims)
        ]
