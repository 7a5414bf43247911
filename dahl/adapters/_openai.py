"""Splitter and Checker over any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works with OpenAI, Perplexity, vLLM, Ollama, Together and others. One call = build the
body (:func:`dahl.adapters._bodies.split_request_body` / ``check_request_body``, pure, so
the cache can hash exactly what is sent), one HTTP attempt through the lane (which does
all waiting, rate limiting and retrying), then a strict parse; the format fallback and
the one re-ask are the endpoint client's (:class:`dahl.adapters._endpoint.Endpoint`).
After the re-ask the Checker returns label ``error`` and the Splitter raises.

The Checker judges a claim by the model's knowledge (template ``check/v1``), or by the
web for a search-backed model (Perplexity sonar: the reply's citations, with their
titles and snippets, become the verdict's evidence). With a corpus (``--checker openai
--evidence CORPUS``) it is FActScore's retrieve-then-ask Checker (Min et al. 2023): per
(question, claim) the top-k BM25 passages go into the prompt (template
``check-evidence/v1``), the verdict keeps them as evidence (passage id, title, text,
score) and says whether an unsupported claim is contradicted by them or not in them
(``Verdict.reason``, "Beyond Precision" error analysis).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import aiohttp
import anyio.to_thread

from dahl.adapters import _prompts as prompts
from dahl.adapters._bodies import Format, adapter_task, check_request_body, split_request_body, template_version
from dahl.adapters._endpoint import CallLane, Endpoint
from dahl.adapters._http import ChatReply
from dahl.adapters._keybody import CheckKeyTemplate, digest_system
from dahl.adapters._parse import parse_claims, parse_verdict
from dahl.config import EndpointConfig
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, Evidence, Label, UnsupportedReason, Verdict, normalize_text

if TYPE_CHECKING:  # bm25s is imported only when a corpus is used
    from dahl.adapters._corpus import Corpus, Hit
    from dahl.lanes._spend import Spend

__all__ = ["NO_PASSAGE", "OpenAIChecker", "OpenAISplitter", "citation_evidence"]

#: Retrievals one Checker remembers (cache_request and check of a claim share one search).
_MAX_RETRIEVALS = 16_384
#: Raw text of a verdict given without a call: no corpus passage shares a term with the query.
NO_PASSAGE = "no passage of the corpus matches the claim"


def citation_evidence(reply: ChatReply) -> tuple[Evidence, ...]:
    """A search-backed reply's citations as evidence: URL, and title and snippet when sent.

    Perplexity's chat completion carries ``citations`` (URLs) and ``search_results``
    (``[{title, url, date?, snippet?}]``); each cited URL becomes one Evidence
    (``source`` = URL, ``title``, ``text`` = snippet), in citation order.
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
    """Checker over an OpenAI-compatible endpoint (template ``check/v1``; ``check-evidence/v1`` with a corpus).

    With a search-backed model (Perplexity sonar) the reply's citations become the
    verdict's evidence (URL, title, snippet: :func:`citation_evidence`). With a corpus,
    each claim is judged against its top ``top_k`` passages: BM25 over the analyzed
    claim and question (:func:`dahl.adapters._corpus.analyze`), restricted to
    ``answer.meta["evidence_ids"]`` when that is a list of document ids, as the
    evidence Checker does. A claim no passage matches is labelled unsupported
    (``no_evidence``) without a call. Also implements the optional cache hooks of
    :mod:`dahl.cache._wrap` (``cache_request``, ``parse_raw``, ``parser_version``);
    with a corpus the key material is the whole body (which holds the passages)
    plus the passages' digests, and there is no constant frame (no key recipe).

    Args:
        cfg: the check endpoint settings.
        session: shared session from :func:`dahl.adapters._http.make_session`.
        lane: the endpoint's lane.
        corpus: the indexed corpus to retrieve passages from, or None (judge by knowledge).
        top_k: passages per claim (>= 1), used with a corpus.
        spend: the run's money meter (calls reported as ``check``), or None.

    Attributes:
        fingerprint: see :func:`dahl.adapters._bodies.endpoint_fingerprint`; with a corpus, also the corpus
            fingerprint and ``top_k`` (so a changed corpus re-checks every claim and a
            finished run is not resumed across it).
        parser_version: version of :func:`dahl.adapters._parse.parse_verdict` (bump when it
            changes a result: cached replies are then re-parsed, not re-asked).

    Raises:
        ConfigError: (on construction) the API key variable is unset; top_k < 1; a cost
            cap and no price for the model.
    """

    # 2: qualified verdicts ("True, but only ...") and "Supported? No." are unsupported
    # 3: reasons for unsupported (contradicted / no_evidence); contradicted, not_supported
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
        self._last_question: tuple[str, str] = ("", "")  # (raw, normalized): claims share it
        self._last_frame: dict[str, Any] = {}  # the frame last handed out (never mutated)
        # (question, claim, doc ids) -> hits; written on the event loop thread only.
        self._retrievals: dict[tuple[str, str, tuple[str, ...] | None], tuple[Hit, ...]] = {}

    def cache_request(self, claim: Claim, answer: Answer) -> dict[str, Any]:
        """What determines the verdict on ``claim``: base URL, model, template and request body.

        Returns:
            ``{"base_url", "model", "template", "frame", "content"}``: ``content`` is the
            templated user message as :meth:`check` would send it now (question and
            claim normalized), ``frame`` the digest of the rest of the body (system
            prompt, model, parameters; see :class:`CheckKeyTemplate`). When the
            template cannot be split, ``{"base_url", "model", "template", "body"}``
            with the whole body, its system prompt replaced by the prompt's digest
            (:func:`digest_system`). With a corpus, ``{"base_url", "model", "template",
            "body", "passages"}``: the whole body as sent (it holds the retrieved
            passages' ids, titles and texts) and the passages' digests
            (:attr:`dahl.adapters._corpus.Passage.digest`), best first; the retrieval
            is the one :meth:`prepare_keys` did in a worker thread (run here, on the
            caller's thread, when it was not) and is remembered for :meth:`check`.
            Never the API key.
        """
        cfg = self._endpoint.cfg
        if self._corpus is not None:
            question, text = self._question(answer), normalize_text(claim.text)
            hits = self._hits(question, text, answer)
            body = check_request_body(
                cfg, question, text, evidence=_prompt_passages(hits), fmt=self._endpoint.reply_format
            )
            return {
                "base_url": cfg.base_url,
                "model": cfg.model,
                "template": template_version(cfg, "check", with_evidence=True),
                "body": digest_system(body, self._endpoint.system_digests),
                "passages": [h.passage.digest for h in hits],
            }
        frame = self.cache_request_frame()
        if frame is not None:
            return {**frame, "content": self.cache_request_content(claim, answer)}
        return {
            "base_url": cfg.base_url,
            "model": cfg.model,
            "template": template_version(cfg, "check"),
            "body": self._key_template().exact(self._question(answer), normalize_text(claim.text)),
        }

    def cache_request_frame(self) -> dict[str, Any] | None:
        """The part of :meth:`cache_request` that is the same for every claim now.

        ``cache_request(claim, answer) == {**frame, "content": cache_request_content(claim,
        answer)}`` whenever this is not None (None: the fast template is unusable, or a
        corpus is used, and the material holds the whole body).
        :func:`dahl.cache._keys.check_keys` uses the split to hash the constant part once
        per answer.
        """
        if self._corpus is not None:
            return None
        template = self._key_template()
        if not template.usable:
            return None
        cfg = self._endpoint.cfg
        frame = {
            "base_url": cfg.base_url,
            "model": cfg.model,
            "template": template_version(cfg, "check"),
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
        answer) == dahl.adapters._keybody.fill_content(parts, normalize_text(answer.question),
        normalize_text(claim.text))``; :func:`dahl.cache._keys.check_key_recipe` builds
        keys from it in another process. None with a corpus.
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
        """Retrieve the passages of ``claims`` in one worker-thread hop, for :meth:`cache_request`.

        The cache wrapper (:mod:`dahl.cache._wrap`) awaits this before computing keys, so
        the BM25 searches run off the event loop; without a corpus it does nothing.
        """
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

        For a batch API (:mod:`dahl.batch._plan`): with a corpus, await
        :meth:`prepare_keys` first, or the retrieval runs here, on the caller's thread.

        Returns:
            ``(body, evidence)``: the chat-completions body and, with a corpus, the
            passages as :class:`Evidence` (``()`` without one); None when no passage
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
        """Parse a stored check reply into a verdict, as :meth:`check` does.

        The verdict has no evidence or usage: those came with the original HTTP reply.

        Raises:
            OutputParseError: ``raw`` cannot be parsed.
        """
        label, reason = parse_verdict(raw, with_evidence=self._corpus is not None)
        return Verdict(label=label, checker=self.fingerprint, raw=raw, reason=reason)

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Label ``claim`` given ``answer.question`` (and, with a corpus, its passages).

        Returns:
            A Verdict with the parsed label and reason, the raw reply, the passages
            (with a corpus) or the citations as evidence, and usage (summed over the
            re-ask, if any); label ``error`` (``error="OutputParseError: ..."``) when
            the reply and the one re-ask could not be parsed.

        Raises:
            AdapterError: the HTTP call failed after the lane's retries.
        """
        endpoint = self._endpoint
        text = normalize_text(claim.text)
        # Normalized like the claim, so whitespace variants share one cache key and request
        # (remembered: the claims of an answer share it).
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

        parsed = await endpoint.ask(build, lambda raw: parse_verdict(raw, with_evidence=with_evidence))
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
        fingerprint: see :func:`dahl.adapters._bodies.endpoint_fingerprint`.
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
