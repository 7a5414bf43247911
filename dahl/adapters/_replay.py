"""The replay Checker: labels supplied with the input (e.g. human annotations)."""

from __future__ import annotations

from dahl.records import Answer, Claim, Label, Verdict

__all__ = ["ReplayChecker"]


class ReplayChecker:
    """Returns each claim's given label; a claim without one gets ``unknown``."""

    fingerprint = "replay/v1"
    #: Concurrency hint for the pipeline: replay is instantaneous.
    concurrency = 4
    #: Never stored in the result cache: the labels are in the input already.
    cacheable = False
    parser_version = "1"

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return ``claim.given_label`` as the verdict (``unknown`` when absent)."""
        label = claim.given_label if claim.given_label is not None else Label.UNKNOWN
        return Verdict(label=label, checker=self.fingerprint)
