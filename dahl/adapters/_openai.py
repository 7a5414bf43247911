"""Splitter and Checker over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works with OpenAI, Perplexity (sonar models search the web; their citations are
kept as evidence), vLLM, Ollama, Together and others. One call = build the body
(:func:`split_request_body` / :func:`check_request_body`, pure, so the cache can
hash exactly what is sent), hand ONE HTTP attempt to the engine's lane (which
does all waiting, rate limiting and retrying), then parse strictly. A reply that
cannot be parsed is re-asked once with the parse error; after
that the Checker returns label ``error`` and the Splitter raises.

The format fallback and the re-ask are the endpoint client's
(:class:`dahl.adapters._endpoint.Endpoint`). The Checker lives in
:mod:`dahl.adapters._openai_check` (with a corpus it is a retrieve-then-ask Checker);
both are re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp

from dahl.adapters._bodies import (
    Format,
    adapter_task,
    check_request_body,
    endpoint_fingerprint,
    estimate_tokens,
    split_request_body,
    template_version,
)
from dahl.adapters._endpoint import CallLane, Endpoint
from dahl.adapters._keybody import digest_system
from dahl.adapters._openai_check import NO_PASSAGE, OpenAIChecker, citation_evidence
from dahl.adapters._parse import parse_claims
from dahl.config import EndpointConfig
from dahl.records import Answer, Claim

if TYPE_CHECKING:
    from dahl.lanes._spend import Spend

__all__ = [
    "NO_PASSAGE",
    "CallLane",
    "OpenAIChecker",
    "OpenAISplitter",
    "check_request_body",
    "citation_evidence",
    "endpoint_fingerprint",
    "estimate_tokens",
    "split_request_body",
]


class OpenAISplitter:
    """Splitter over an OpenAI-compatible endpoint (template ``split/v1``).

    Also implements :class:`~dahl.adapters._base.RequestKeyedSplitter` and
    :class:`~dahl.adapters._base.RawSplitter` (``cache_request``, ``split_with_raw``, ``parse_raw``).

    Args:
        cfg: the split endpoint settings.
        session: shared session from :func:`dahl.adapters._http.make_session`.
        lane: the endpoint's lane (``dahl.lanes._lane.Lane``), shared with the checker
            when both stages use the same endpoint.
        spend: the run's money meter (calls reported as ``split``), or None.

    Attributes:
        fingerprint: see :func:`endpoint_fingerprint`.
        parser_version: version of :func:`dahl.adapters._parse.parse_claims` (bump when
            it changes a result: cached replies are then re-parsed, not re-asked).

    Raises:
        ConfigError: (on construction) the API key variable is unset; a cost cap and no
            price for the model.
    """

    parser_version = "1"
    cacheable = True

    def __init__(
        self, cfg: EndpointConfig, session: aiohttp.ClientSession, lane: CallLane, *, spend: Spend | None = None
    ) -> None:
        self._endpoint = Endpoint(cfg, session, lane, adapter_task(cfg, "split"), spend=spend)
        self.fingerprint = self._endpoint.fingerprint

    def cache_request(self, answer: Answer) -> dict[str, Any]:
        """What determines the split of ``answer``: base URL, model, template and request body.

        Returns:
            ``{"base_url", "model", "template", "body"}`` with ``body`` as :meth:`split`
            would send it now, its system prompt replaced by the prompt's digest
            (:func:`digest_system`); never the API key.
        """
        endpoint = self._endpoint
        cfg = endpoint.cfg
        body = split_request_body(cfg, answer.question, answer.response, fmt=endpoint.reply_format)
        return {
            "base_url": cfg.base_url,
            "model": cfg.model,
            "template": template_version(cfg, "split"),
            "body": digest_system(body, endpoint.system_digests),
        }

    def parse_raw(self, raw: str, answer: Answer) -> list[Claim]:
        """Parse a stored split reply into claims, as :meth:`split` does.

        Raises:
            OutputParseError: ``raw`` cannot be parsed.
        """
        return [Claim(text=text, index=i) for i, text in enumerate(parse_claims(raw))]

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` into claims via the model, in answer order.

        Returns:
            Claims with ``text`` normalized and ``index`` 0..n-1 (no spans: claims are
            rewritten, e.g. pronouns resolved). ``[]`` when the model says NONE.

        Raises:
            OutputParseError: the reply and the one re-ask could not be parsed.
            AdapterError: the HTTP call failed after the lane's retries.
        """
        claims, _ = await self.split_with_raw(answer)
        return claims

    async def split_with_raw(self, answer: Answer) -> tuple[list[Claim], str]:
        """As :meth:`split`, also returning the raw reply the claims were parsed from.

        Raises:
            OutputParseError: the reply and the one re-ask could not be parsed.
            AdapterError: the HTTP call failed after the lane's retries.
        """
        endpoint = self._endpoint

        def build(fmt: Format) -> dict[str, Any]:
            return split_request_body(endpoint.cfg, answer.question, answer.response, fmt=fmt)

        parsed = await endpoint.ask(build, parse_claims)
        return [Claim(text=text, index=i) for i, text in enumerate(parsed.get())], parsed.raw
