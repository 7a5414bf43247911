"""Splitter and Checker over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works with OpenAI, Perplexity (sonar models search the web; their citations are
kept as evidence), vLLM, Ollama, Together and others. One call = build the body
(:func:`split_request_body` / :func:`check_request_body`, pure, so the cache can
hash exactly what is sent), hand ONE HTTP attempt to the engine's lane (which
does all waiting, rate limiting and retrying), then parse strictly. A reply that
cannot be parsed is re-asked once with the parse error (DESIGN.md §5); after
that the Checker returns label ``error`` and the Splitter raises.

A server that rejects ``response_format`` (HTTP 400 or 422 naming it) is asked in text
mode from then on by that adapter instance (logged once).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import aiohttp

from dahl.adapters import prompts
from dahl.adapters.bodies import (
    Format,
    Kind,
    check_request_body,
    endpoint_fingerprint,
    estimate_tokens,
    split_request_body,
)
from dahl.adapters.http import ChatReply, encode_body, post_chat, request_headers
from dahl.adapters.keybody import CheckKeyTemplate, digest_system
from dahl.adapters.parse import parse_claims, parse_label
from dahl.config import EndpointConfig, resolve_api_key
from dahl.errors import OutputParseError, PermanentAPIError
from dahl.records import Answer, Claim, Evidence, Label, Usage, Verdict, normalize_text

__all__ = [
    "CallLane",
    "OpenAIChecker",
    "OpenAISplitter",
    "check_request_body",
    "endpoint_fingerprint",
    "estimate_tokens",
    "split_request_body",
]

log = logging.getLogger(__name__)

class CallLane(Protocol):
    """What the adapters need from ``dahl.engine.lane.Lane``: run one attempt under its limits."""

    async def call(
        self, attempt: Callable[[], Awaitable[ChatReply]], *, estimated_tokens: int
    ) -> ChatReply:
        """Run ``attempt`` (one HTTP request) with rate limits and retries; return its reply."""
        ...


def _total_usage(*usages: Usage | None) -> Usage | None:
    """Sum of the reported usages (a re-asked verdict costs both calls); None if none reported."""
    known = [u for u in usages if u is not None]
    if not known:
        return None
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in known),
        completion_tokens=sum(u.completion_tokens for u in known),
    )


class _Endpoint:
    """State shared by the splitter and checker: config, session, lane, key, format fallback."""

    def __init__(
        self,
        cfg: EndpointConfig,
        session: aiohttp.ClientSession,
        lane: CallLane,
        kind: Kind,
    ) -> None:
        self.cfg = cfg
        self.kind: Kind = kind
        self._session = session
        self._lane = lane
        self._api_key = resolve_api_key(cfg)
        self._headers = request_headers(self._api_key)  # the same for every request
        self._fmt: Format = cfg.effective_format()
        self.fingerprint = endpoint_fingerprint(cfg, kind)
        self.system_digests: dict[str, str] = {}

    @property
    def reply_format(self) -> Format:
        """Reply format currently requested (``text`` after a response_format fallback)."""
        return self._fmt

    async def _send(self, body: dict[str, Any]) -> ChatReply:
        """Send ``body`` through the lane (one attempt per lane try).

        The body is encoded once here; every attempt (retry) sends the same bytes.
        """
        data = encode_body(body)
        session, url, api_key, headers = self._session, self.cfg.chat_url, self._api_key, self._headers

        def attempt() -> Awaitable[ChatReply]:
            return post_chat(session, url, api_key, data, headers=headers)

        return await self._lane.call(attempt, estimated_tokens=estimate_tokens(body))

    def _rejects_format(self, exc: PermanentAPIError) -> bool:
        return self._fmt != "text" and exc.status in (400, 422) and "response_format" in str(exc)

    async def ask(self, build: Callable[[Format], dict[str, Any]]) -> tuple[ChatReply, dict[str, Any]]:
        """Send the body ``build(format)``; on a response_format rejection switch to text once."""
        body = build(self._fmt)
        try:
            return await self._send(body), body
        except PermanentAPIError as exc:
            if not self._rejects_format(exc):
                raise
            log.warning(
                "%s rejected response_format=%s (%s); using text mode for the rest of the run",
                self.cfg.base_url,
                self._fmt,
                exc,
            )
            self._fmt = "text"
            body = build(self._fmt)
            return await self._send(body), body

    async def reask(self, body: dict[str, Any], reply: str, error: OutputParseError) -> ChatReply:
        """Send the single follow-up after an unparseable ``reply`` to ``body``."""
        messages = prompts.reask_messages(
            body["messages"], reply, str(error), self.kind, json_reply=self._fmt != "text"
        )
        return await self._send({**body, "messages": messages})


class OpenAISplitter:
    """Splitter over an OpenAI-compatible endpoint (template ``split/v1``).

    Also implements the optional cache hooks of :mod:`dahl.cache.wrap`
    (``cache_request``, ``split_with_raw``, ``parse_raw``, ``parser_version``).

    Args:
        cfg: the split endpoint settings.
        session: shared session from :func:`dahl.adapters.http.make_session`.
        lane: the endpoint's lane (``dahl.engine.lane.Lane``), shared with the checker
            when both stages use the same endpoint.

    Attributes:
        fingerprint: see :func:`endpoint_fingerprint`.
        parser_version: version of :func:`dahl.adapters.parse.parse_claims` (bump when
            it changes a result: cached replies are then re-parsed, not re-asked).

    Raises:
        ConfigError: (on construction) the API key variable is unset.
    """

    parser_version = "1"

    def __init__(self, cfg: EndpointConfig, session: aiohttp.ClientSession, lane: CallLane) -> None:
        self._endpoint = _Endpoint(cfg, session, lane, "split")
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
            "template": prompts.SPLIT_TEMPLATE_VERSION,
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

        reply, body = await endpoint.ask(build)
        try:
            texts = parse_claims(reply.content)
        except OutputParseError as first:
            reply = await endpoint.reask(body, reply.content, first)
            texts = parse_claims(reply.content)
        return [Claim(text=text, index=i) for i, text in enumerate(texts)], reply.content


class OpenAIChecker:
    """Checker over an OpenAI-compatible endpoint (template ``check/v1``).

    With a search-backed model (Perplexity sonar) the reply's citations become the
    verdict's evidence (``Evidence(source=url)``). Also implements the optional cache
    hooks of :mod:`dahl.cache.wrap` (``cache_request``, ``parse_raw``, ``parser_version``).

    Args:
        cfg: the check endpoint settings.
        session: shared session from :func:`dahl.adapters.http.make_session`.
        lane: the endpoint's lane.

    Attributes:
        fingerprint: see :func:`endpoint_fingerprint`.
        parser_version: version of :func:`dahl.adapters.parse.parse_label` (bump when it
            changes a result: cached replies are then re-parsed, not re-asked).

    Raises:
        ConfigError: (on construction) the API key variable is unset.
    """

    parser_version = "2"  # 2: qualified verdicts ("True, but only ...") and "Supported? No." are unsupported
    #: ``cache_request`` holds the question and claim as sent (see :mod:`dahl.cache.keys`).
    cache_request_covers_input = True

    def __init__(self, cfg: EndpointConfig, session: aiohttp.ClientSession, lane: CallLane) -> None:
        self._endpoint = _Endpoint(cfg, session, lane, "check")
        self.fingerprint = self._endpoint.fingerprint
        self._key_templates: dict[Format, CheckKeyTemplate] = {}
        self._last_question: tuple[str, str] = ("", "")  # (raw, normalized): claims share it
        self._last_frame: dict[str, Any] = {}  # the frame last handed out (never mutated)

    def cache_request(self, claim: Claim, answer: Answer) -> dict[str, Any]:
        """What determines the verdict on ``claim``: base URL, model, template and request body.

        Returns:
            ``{"base_url", "model", "template", "frame", "content"}``: ``content`` is the
            templated user message as :meth:`check` would send it now (question and
            claim normalized), ``frame`` the digest of the rest of the body (system
            prompt, model, parameters; see :class:`CheckKeyTemplate`). When the
            template cannot be split, ``{"base_url", "model", "template", "body"}``
            with the whole body, its system prompt replaced by the prompt's digest
            (:func:`digest_system`). Never the API key.
        """
        frame = self.cache_request_frame()
        if frame is not None:
            return {**frame, "content": self.cache_request_content(claim, answer)}
        cfg = self._endpoint.cfg
        return {
            "base_url": cfg.base_url,
            "model": cfg.model,
            "template": prompts.CHECK_TEMPLATE_VERSION,
            "body": self._key_template().exact(self._question(answer), normalize_text(claim.text)),
        }

    def cache_request_frame(self) -> dict[str, Any] | None:
        """The part of :meth:`cache_request` that is the same for every claim now.

        ``cache_request(claim, answer) == {**frame, "content": cache_request_content(claim,
        answer)}`` whenever this is not None (None: the fast template is unusable and
        the material holds the whole body). :func:`dahl.cache.keys.check_keys` uses the
        split to hash the constant part once per answer.
        """
        template = self._key_template()
        if not template.usable:
            return None
        cfg = self._endpoint.cfg
        frame = {
            "base_url": cfg.base_url,
            "model": cfg.model,
            "template": prompts.CHECK_TEMPLATE_VERSION,
            "frame": template.frame,
        }
        # Hand out one object while it is unchanged: check_keys then skips re-encoding it.
        if frame != self._last_frame:
            self._last_frame = frame
        return self._last_frame

    def cache_request_content(self, claim: Claim, answer: Answer) -> str:
        """The templated user message of ``claim`` (``cache_request(...)["content"]``)."""
        return self._key_template().content(self._question(answer), normalize_text(claim.text))

    def cache_request_parts(self) -> tuple[str, str, str] | None:
        """The text around question and claim in :meth:`cache_request_content`, or None.

        Whenever :meth:`cache_request_frame` is not None, ``cache_request_content(claim,
        answer) == dahl.adapters.keybody.fill_content(parts, normalize_text(answer.question),
        normalize_text(claim.text))``; :func:`dahl.cache.keys.check_key_recipe` builds
        keys from it in another process.
        """
        template = self._key_template()
        return template.parts if template.usable else None

    def cache_request_contents(self, claims: Sequence[Claim], answer: Answer) -> list[str]:
        """:meth:`cache_request_content` of every claim of ``answer``, in order."""
        content = self._key_template().content
        question = self._question(answer)
        return [content(question, normalize_text(claim.text)) for claim in claims]

    def _key_template(self) -> CheckKeyTemplate:
        endpoint = self._endpoint
        fmt = endpoint.reply_format
        template = self._key_templates.get(fmt)
        if template is None:
            template = CheckKeyTemplate(endpoint.cfg, fmt, endpoint.system_digests)
            self._key_templates[fmt] = template
        return template

    def _question(self, answer: Answer) -> str:
        """``answer.question`` normalized (remembered: the claims of an answer share it)."""
        raw_question, question = self._last_question
        if answer.question != raw_question:
            question = normalize_text(answer.question)
            self._last_question = (answer.question, question)
        return question

    def parse_raw(self, raw: str) -> Verdict:
        """Parse a stored check reply into a verdict, as :meth:`check` does.

        The verdict has no evidence or usage: those came with the original HTTP reply.

        Raises:
            OutputParseError: ``raw`` cannot be parsed.
        """
        return Verdict(label=parse_label(raw), checker=self.fingerprint, raw=raw)

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Label ``claim`` given ``answer.question``.

        Returns:
            A Verdict with the parsed label, the raw reply, citations as evidence and
            usage (summed over the re-ask, if any); label ``error``
            (``error="OutputParseError: ..."``) when the reply and the one re-ask could not
            be parsed.

        Raises:
            AdapterError: the HTTP call failed after the lane's retries.
        """
        endpoint = self._endpoint
        text = normalize_text(claim.text)
        # Normalized like the claim, so whitespace variants share one cache key and request
        # (remembered: the claims of an answer share it).
        question = self._question(answer)

        def build(fmt: Format) -> dict[str, Any]:
            return check_request_body(endpoint.cfg, question, text, fmt=fmt)

        reply, body = await endpoint.ask(build)
        usage = reply.usage
        try:
            label = parse_label(reply.content)
        except OutputParseError as first:
            reply = await endpoint.reask(body, reply.content, first)
            usage = _total_usage(usage, reply.usage)
            try:
                label = parse_label(reply.content)
            except OutputParseError as second:
                return Verdict(
                    label=Label.ERROR,
                    checker=self.fingerprint,
                    raw=reply.content,
                    error=f"OutputParseError: {second}",
                    usage=usage,
                )
        return Verdict(
            label=label,
            checker=self.fingerprint,
            raw=reply.content,
            evidence=tuple(Evidence(source=url) for url in reply.citations),
            usage=usage,
        )
