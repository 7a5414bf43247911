"""Splitter and Checker over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

The Checker judges a claim by the model's knowledge (template ``check/v1``), by the web for a
search-backed model (its citations become evidence), or, with a corpus, against its top-k BM25
passages (template ``check-evidence/v1``; FActScore's retrieve-then-ask, Min et al. 2023).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio.to_thread

from dahl.adapters import _prompts as prompts
from dahl.adapters._bodies import (
    BodyBytes,
    Format,
    Kind,
    adapter_task,
    check_request_body,
    split_request_body,
    template_version,
)
from dahl.adapters._endpoint import CallLane, Endpoint
from dahl.adapters._http import ChatReply
from dahl.adapters._keybody import CONTENT_HOLE, CheckKeyTemplate, digest_system
from dahl.adapters._parse import parse_claims, parse_verdict
from dahl.config import EndpointConfig
from dahl.errors import ConfigError
from dahl.records import (
    Answer,
    Claim,
    Evidence,
    Label,
    UnsupportedReason,
    Verdict,
    normalize_text,
)

if TYPE_CHECKING:  # bm25s is imported only when a corpus is used
    from dahl.adapters._corpus import Corpus, Hit
    from dahl.lanes._spend import Spend

__all__ = ["NO_PASSAGE", "OpenAIChecker", "OpenAISplitter", "citation_evidence"]

#: Retrievals one Checker remembers (cache_request and check of a claim share one search).
_MAX_RETRIEVALS = 16_384
#: Raw text of a verdict given without a call: no corpus passage shares a term with the query.
NO_PASSAGE = "no passage of the corpus matches the claim"


def citation_evidence(reply: ChatReply) -> tuple[Evidence, ...]:
    """A search-backed reply's citations as evidence, in citation order.

    Each URL of ``citations`` becomes one Evidence (``source`` = URL, with ``title`` and
    ``text`` = snippet from the matching ``search_results`` entry when sent).
    """
    found: dict[str, Mapping[str, Any]] = {}
    results = reply.raw.get("search_results") if isinstance(reply.raw, dict) else None
    for result in results if isinstance(results, list) else ():
        if isinstance(result, dict) and isinstance(result.get("url"), str):
            found.setdefault(result["url"], result)
    out = []
    for url in reply.citations:
        result = found.get(url, {})
        title, snippet = result.get("title"), result.get("snippet")
        out.append(
            Evidence(
                source=url,
                title=title if isinstance(title, str) and title else None,
                text=snippet if isinstance(snippet, str) else "",
            )
        )
    return tuple(out)


def _key_head(cfg: EndpointConfig, kind: Kind, *, with_evidence: bool = False) -> dict[str, Any]:
    """The start of every cache-key material: base URL, model and template version."""
    return {
        "base_url": cfg.base_url,
        "model": cfg.model,
        "template": template_version(cfg, kind, with_evidence=with_evidence),
    }


def _passage_evidence(hits: Sequence[Hit]) -> tuple[Evidence, ...]:
    return tuple(
        Evidence(
            text=h.passage.text,
            source=h.passage.doc_id,
            score=round(h.score, 4),
            title=h.passage.title or None,
            passage_id=h.passage.id,
        )
        for h in hits
    )


class OpenAIChecker:
    """Checker over an OpenAI-compatible endpoint (``check/v1``; ``check-evidence/v1`` with a corpus).

    With a ``corpus`` each claim is judged against its top ``top_k`` (>= 1) passages (only those
    of ``answer.meta["evidence_ids"]`` when that is a list); a claim no passage matches is
    unsupported (``no_evidence``) without a call. ``spend`` meters the calls as ``check``.

    Attributes:
        fingerprint: :func:`dahl.adapters._bodies.endpoint_fingerprint`; with a corpus, also the
            corpus fingerprint, analyzer version and ``top_k``.

    Raises:
        ConfigError: (on construction) the API key variable is unset; top_k < 1; a cost cap and
            no price for the model.
    """

    # 3: reasons for unsupported (contradicted / no_evidence)
    parser_version = "3"
    cacheable = True
    #: ``cache_request`` holds the question and claim as sent (see :mod:`dahl.cache._keys`).
    cache_request_covers_input = True

    def __init__(
        self,
        cfg: EndpointConfig,
        session: aiohttp.ClientSession,
        lane: CallLane,
        *,
        corpus: Corpus | None = None,
        top_k: int = 5,
        spend: Spend | None = None,
    ) -> None:
        if top_k < 1:
            raise ConfigError(f"top_k must be >= 1, got {top_k}")
        self._endpoint = Endpoint(cfg, session, lane, adapter_task(cfg, "check", with_evidence=corpus is not None),
                                  spend=spend)
        self._corpus = corpus
        self._top_k = top_k
        self.fingerprint = self._endpoint.fingerprint
        if corpus is not None:
            from dahl.adapters._corpus import ANALYZER_VERSION

            self.fingerprint = (
                self._endpoint.fingerprint
                + f"|evidence={corpus.fingerprint}|analyzer={ANALYZER_VERSION}|top_k={top_k}"
            )
        self._key_templates: dict[Format, CheckKeyTemplate] = {}
        # Per format: the request bytes around the templated message (None: bodies are built).
        self._sent: dict[Format, BodyBytes | None] = {}
        self._last_question: tuple[str, str] = ("", "")  # (raw, normalized): claims share it
        self._last_frame: dict[str, Any] = {}  # the frame last handed out (never mutated)
        # (question, claim, doc ids) -> hits; written on the event loop thread only.
        self._retrievals: dict[tuple[str, str, tuple[str, ...] | None], tuple[Hit, ...]] = {}

    def cache_request(self, claim: Claim, answer: Answer) -> dict[str, Any]:
        """What determines the verdict on ``claim`` (never the API key).

        Returns:
            ``{"base_url", "model", "template", "frame", "content"}`` (:class:`CheckKeyTemplate`);
            when the template cannot be split, ``"body"`` (system prompt digested) instead of frame
            and content; with a corpus, ``"body"`` and ``"passages"`` (digests, best first).
        """
        cfg = self._endpoint.cfg
        if self._corpus is not None:
            question, text = self._question(answer), normalize_text(claim.text)
            hits = self._hits(question, text, answer)
            body = check_request_body(
                cfg, question, text, evidence=_prompt_passages(hits), fmt=self._endpoint.reply_format
            )
            return {
                **_key_head(cfg, "check", with_evidence=True),
                "body": digest_system(body, self._endpoint.system_digests),
                "passages": [h.passage.digest for h in hits],
            }
        frame = self.cache_request_frame()
        if frame is not None:
            return {**frame, "content": self.cache_request_content(claim, answer)}
        return {
            **_key_head(cfg, "check"),
            "body": self._key_template().exact(self._question(answer), normalize_text(claim.text)),
        }

    def cache_request_frame(self) -> dict[str, Any] | None:
        """The part of :meth:`cache_request` that is the same for every claim now, or None.

        ``cache_request(claim, answer) == {**frame, "content": cache_request_content(claim,
        answer)}`` whenever this is not None.
        """
        if self._corpus is not None:
            return None
        template = self._key_template()
        if not template.usable:
            return None
        frame = {**_key_head(self._endpoint.cfg, "check"), "frame": template.frame}
        # One object while unchanged: check_keys then skips re-encoding it.
        if frame != self._last_frame:
            self._last_frame = frame
        return self._last_frame

    def cache_request_content(self, claim: Claim, answer: Answer) -> str:
        """The templated user message of ``claim`` (``cache_request(...)["content"]``)."""
        return self._key_template().content(self._question(answer), normalize_text(claim.text))

    def cache_request_parts(self) -> tuple[str, str, str] | None:
        """The text around question and claim in :meth:`cache_request_content`, or None.

        When not None, ``cache_request_content(claim, answer) == fill_content(parts,
        normalize_text(answer.question), normalize_text(claim.text))``.
        """
        if self._corpus is not None:
            return None
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

    def _sent_bytes(self, fmt: Format) -> BodyBytes | None:
        """The request bytes of format ``fmt`` around :meth:`cache_request_content`, built once."""
        try:
            return self._sent[fmt]
        except KeyError:
            body = self._key_template().sent_body()
            sent = self._sent[fmt] = None if body is None else self._endpoint.body_bytes(body, CONTENT_HOLE)
            return sent

    def _question(self, answer: Answer) -> str:
        """``answer.question`` normalized (remembered: the claims of an answer share it)."""
        raw_question, question = self._last_question
        if answer.question != raw_question:
            question = normalize_text(answer.question)
            self._last_question = (answer.question, question)
        return question

    def _retrieval_key(
        self, question: str, text: str, answer: Answer
    ) -> tuple[str, str, tuple[str, ...] | None]:
        ids = answer.meta.get("evidence_ids") if answer.meta else None
        return question, text, tuple(str(i) for i in ids) if isinstance(ids, list) else None

    def _search(self, key: tuple[str, str, tuple[str, ...] | None]) -> tuple[Hit, ...]:
        """The top-k passages for a retrieval key (blocking; pure)."""
        from dahl.adapters._corpus import analyze

        assert self._corpus is not None
        question, text, doc_ids = key
        return tuple(self._corpus.search(analyze(text) + analyze(question), k=self._top_k, doc_ids=doc_ids))

    def _remember(self, key: tuple[str, str, tuple[str, ...] | None], hits: tuple[Hit, ...]) -> None:
        if len(self._retrievals) >= _MAX_RETRIEVALS:
            self._retrievals.pop(next(iter(self._retrievals)))
        self._retrievals[key] = hits

    def _hits(self, question: str, text: str, answer: Answer) -> tuple[Hit, ...]:
        """The claim's passages, searched here when not remembered."""
        key = self._retrieval_key(question, text, answer)
        hits = self._retrievals.get(key)
        if hits is None:
            hits = self._search(key)
            self._remember(key, hits)
        return hits

    async def prepare_keys(self, claims: Sequence[Claim], answer: Answer) -> None:
        """Retrieve the passages of ``claims`` in one worker-thread hop, for :meth:`cache_request`."""
        if self._corpus is None:
            return
        question = self._question(answer)
        wanted = [
            key
            for key in dict.fromkeys(self._retrieval_key(question, normalize_text(c.text), answer) for c in claims)
            if key not in self._retrievals
        ]
        if wanted:
            found = await anyio.to_thread.run_sync(lambda: [self._search(key) for key in wanted])
            for key, hits in zip(wanted, found, strict=True):
                self._remember(key, hits)

    async def _hits_async(self, question: str, text: str, answer: Answer) -> tuple[Hit, ...]:
        """As :meth:`_hits`, searching in a worker thread (BM25 over the corpus is CPU work)."""
        key = self._retrieval_key(question, text, answer)
        hits = self._retrievals.get(key)
        if hits is None:
            hits = await anyio.to_thread.run_sync(self._search, key)
            self._remember(key, hits)
        return hits

    def request_of(self, claim: Claim, answer: Answer) -> tuple[dict[str, Any], tuple[Evidence, ...]] | None:
        """The body :meth:`check` would send first for ``claim`` now, and the passages its verdict keeps.

        Returns:
            ``(body, evidence)`` (evidence ``()`` without a corpus); None when no passage
            matches (:meth:`check` then gives its verdict without a call).
        """
        question, text = self._question(answer), normalize_text(claim.text)
        fmt = self._endpoint.reply_format
        if self._corpus is None:
            return check_request_body(self._endpoint.cfg, question, text, fmt=fmt), ()
        hits = self._hits(question, text, answer)
        if not hits:
            return None
        body = check_request_body(self._endpoint.cfg, question, text, evidence=_prompt_passages(hits), fmt=fmt)
        return body, _passage_evidence(hits)

    @property
    def with_evidence(self) -> bool:
        """Whether claims are judged against corpus passages (template ``check-evidence/v1``)."""
        return self._corpus is not None

    def parse_raw(self, raw: str) -> Verdict:
        """Parse a stored check reply into a verdict (no evidence or usage), as :meth:`check` does.

        Raises:
            OutputParseError: ``raw`` cannot be parsed.
        """
        label, reason = parse_verdict(raw, with_evidence=self._corpus is not None)
        return Verdict(label=label, checker=self.fingerprint, raw=raw, reason=reason)

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Label ``claim`` given ``answer.question`` (and, with a corpus, its passages).

        Returns:
            A Verdict with the label, reason, raw reply, passages or citations as evidence and usage
            (summed over the re-ask); label ``error`` when the reply and the re-ask do not parse.

        Raises:
            AdapterError: the HTTP call failed after the lane's retries.
        """
        endpoint = self._endpoint
        text = normalize_text(claim.text)
        # Normalized like the claim, so whitespace variants share one cache key and request.
        question = self._question(answer)
        with_evidence = self._corpus is not None
        passages: list[prompts.PromptPassage] | None = None
        evidence: tuple[Evidence, ...] = ()
        if with_evidence:
            hits = await self._hits_async(question, text, answer)
            if not hits:
                return Verdict(
                    label=Label.UNSUPPORTED,
                    checker=self.fingerprint,
                    raw=NO_PASSAGE,
                    reason=UnsupportedReason.NO_EVIDENCE,
                )
            passages = _prompt_passages(hits)
            evidence = _passage_evidence(hits)

        def build(fmt: Format) -> dict[str, Any]:
            return check_request_body(endpoint.cfg, question, text, evidence=passages, fmt=fmt)

        encoded: tuple[Format, bytes, int] | None = None
        fmt = endpoint.reply_format
        sent = None if with_evidence else self._sent_bytes(fmt)
        if sent is not None:  # the body's bytes from the template's, around the one message that changes
            encoded = (fmt, *sent.encode(self._key_template().content(question, text)))
        parsed = await endpoint.ask(build, lambda raw: parse_verdict(raw, with_evidence=with_evidence),
                                    encoded=encoded)
        if parsed.error is not None:
            return Verdict(
                label=Label.ERROR,
                checker=self.fingerprint,
                raw=parsed.raw,
                error=f"OutputParseError: {parsed.error}",
                usage=parsed.usage,
                evidence=evidence,
            )
        label, reason = parsed.get()
        return Verdict(
            label=label,
            checker=self.fingerprint,
            raw=parsed.raw,
            evidence=evidence + citation_evidence(parsed.reply),
            usage=parsed.usage,
            reason=reason,
        )


def _prompt_passages(hits: Sequence[Hit]) -> list[prompts.PromptPassage]:
    """Hits as the prompt shows them: (passage id, title, text), best first."""
    return [(h.passage.id, h.passage.title, h.passage.text) for h in hits]


class OpenAISplitter:
    """Splitter over an OpenAI-compatible endpoint (template ``split/v1``; ``spend`` meters ``split``).

    Attributes:
        fingerprint: :func:`dahl.adapters._bodies.endpoint_fingerprint`.

    Raises:
        ConfigError: (on construction) the API key variable is unset; a cost cap and no price
            for the model.
    """

    parser_version = "1"
    cacheable = True

    def __init__(
        self, cfg: EndpointConfig, session: aiohttp.ClientSession, lane: CallLane, *, spend: Spend | None = None
    ) -> None:
        self._endpoint = Endpoint(cfg, session, lane, adapter_task(cfg, "split"), spend=spend)
        self.fingerprint = self._endpoint.fingerprint

    def cache_request(self, answer: Answer) -> dict[str, Any]:
        """``{"base_url", "model", "template", "body"}``: what determines the split of
        ``answer``, the body's system prompt digested (:func:`digest_system`)."""
        endpoint = self._endpoint
        cfg = endpoint.cfg
        body = split_request_body(cfg, answer.question, answer.response, fmt=endpoint.reply_format)
        return {**_key_head(cfg, "split"), "body": digest_system(body, endpoint.system_digests)}

    def parse_raw(self, raw: str, answer: Answer) -> list[Claim]:
        """Parse a stored split reply into claims, as :meth:`split` does.

        Raises:
            OutputParseError: ``raw`` cannot be parsed.
        """
        return [Claim(text=text, index=i) for i, text in enumerate(parse_claims(raw))]

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` into claims via the model: ``text`` normalized, ``index`` 0..n-1,
        no spans; ``[]`` for NONE.

        Raises:
            OutputParseError: the reply and the one re-ask could not be parsed.
            AdapterError: the HTTP call failed after the lane's retries.
        """
        claims, _ = await self.split_with_raw(answer)
        return claims

    async def split_with_raw(self, answer: Answer) -> tuple[list[Claim], str]:
        """As :meth:`split`, also returning the raw reply the claims were parsed from."""
        endpoint = self._endpoint

        def build(fmt: Format) -> dict[str, Any]:
            return split_request_body(endpoint.cfg, answer.question, answer.response, fmt=fmt)

        parsed = await endpoint.ask(build, parse_claims)
        return [Claim(text=text, index=i) for i, text in enumerate(parsed.get())], parsed.raw
