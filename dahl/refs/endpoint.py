"""One OpenAI-compatible endpoint for the extraction and rating calls of ``dahl refs build``.

A call is the same as the Checker's (:mod:`dahl.adapters.openai`): a pure request body,
ONE HTTP attempt handed to the engine's lane (rate limits, in-flight cap, retries,
breaker), a strict parse of the reply, and one re-ask with the parse error when it
fails. Replies are JSON objects in every format: ``json_schema`` / ``json_object`` ask
for it through ``response_format``, ``text`` through the instructions alone. A server
that rejects ``response_format`` (HTTP 400/422 naming it) is asked in text mode from
then on (logged once).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import aiohttp
import orjson

from dahl.adapters.bodies import Format, estimate_tokens
from dahl.adapters.http import ChatReply
from dahl.adapters.openai import CallLane
from dahl.adapters.route import ChatRoute
from dahl.config import EndpointConfig
from dahl.errors import OutputParseError, PermanentAPIError
from dahl.refs import prompts

__all__ = ["CountMismatch", "RefsEndpoint", "RefsKind", "parse_json_object"]

log = logging.getLogger(__name__)

RefsKind = Literal["extract", "rate"]

#: Completion budgets (tokens) when the endpoint sets none: a chunk's facts, a batch's ratings.
DEFAULT_MAX_TOKENS: dict[RefsKind, int] = {"extract": 1024, "rate": 1024}


class CountMismatch(OutputParseError):
    """A reply that parsed but did not answer each numbered item exactly once.

    Not re-asked as a whole: the caller asks each item alone (never pads).
    """


def parse_json_object(raw: str) -> dict[str, Any]:
    """The JSON object of a reply: the whole text, or the text inside one ```json fence.

    Raises:
        OutputParseError: the reply is not one JSON object.
    """
    text = raw.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise OutputParseError(f"the reply is not JSON ({exc})", raw=raw) from None
    if not isinstance(value, dict):
        raise OutputParseError(f"the reply is a JSON {type(value).__name__}, not an object", raw=raw)
    return value


class RefsEndpoint:
    """Extraction or rating requests to one OpenAI-compatible endpoint, through its lane.

    Args:
        cfg: endpoint settings.
        session: shared session from :func:`dahl.adapters.http.make_session`.
        lane: the endpoint's lane (``dahl.lanes._lane.Lane``).
        kind: ``"extract"`` or ``"rate"`` (template and default ``max_tokens``).

    Attributes:
        fingerprint: every setting that changes a reply (base URL, model, template version,
            temperature, seed, max_tokens, format, extra_body); never the key or limits.

    Raises:
        ConfigError: (on construction) the API key variable is unset.
    """

    def __init__(self, cfg: EndpointConfig, session: aiohttp.ClientSession, lane: CallLane, kind: RefsKind) -> None:
        self.cfg = cfg
        self.kind: RefsKind = kind
        self._session = session
        self._lane = lane
        self._route = ChatRoute(cfg)  # provider, key and headers (Anthropic: /messages)
        self._fmt: Format = cfg.effective_format()
        self.max_tokens = cfg.max_tokens if cfg.max_tokens is not None else DEFAULT_MAX_TOKENS[kind]
        template = cfg.template(prompts.EXTRACT_TEMPLATE if kind == "extract" else prompts.RATE_TEMPLATE).version
        extra = orjson.dumps(cfg.extra_body, option=orjson.OPT_SORT_KEYS).decode()
        self.fingerprint = (
            f"openai:{kind}|{cfg.base_url}|model={cfg.model}|template={template}"
            f"|temperature={cfg.temperature!r}|seed={cfg.seed}|max_tokens={self.max_tokens}"
            f"|format={self._fmt}|extra={extra}"
            + ("" if cfg.provider == "openai" else f"|provider={cfg.provider}")
        )

    def body(self, messages: list[dict[str, str]], fmt: Format | None = None) -> dict[str, Any]:
        """The exact JSON body sent for ``messages`` (pure; never the API key)."""
        fmt = fmt or self._fmt
        body: dict[str, Any] = {
            "model": self.cfg.model,
            "messages": messages,
            "temperature": self.cfg.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.cfg.seed is not None:
            body["seed"] = self.cfg.seed
        if fmt == "json_schema":
            body["response_format"] = prompts.extract_schema() if self.kind == "extract" else prompts.rate_schema()
        elif fmt == "json_object":
            body["response_format"] = {"type": "json_object"}
        body.update(self.cfg.extra_body)
        return body

    async def _send(self, body: dict[str, Any]) -> ChatReply:
        route, session = self._route, self._session
        data = route.encode(body)

        def attempt() -> Awaitable[ChatReply]:
            return route.post(session, data)

        return await self._lane.call(attempt, estimated_tokens=estimate_tokens(body))

    async def ask(self, messages: list[dict[str, str]], parse: Callable[[str], Any]) -> tuple[Any, str]:
        """Send ``messages``, parse the reply with ``parse``; re-ask once on a parse error.

        A :class:`CountMismatch` is raised at once, not re-asked.

        Returns:
            ``(parse(reply), reply)``.

        Raises:
            OutputParseError: the reply and the one re-ask could not be parsed.
            AdapterError: the HTTP call failed after the lane's retries.
        """
        body = self.body(messages)
        try:
            reply = await self._send(body)
        except PermanentAPIError as exc:
            if not (self._fmt != "text" and exc.status in (400, 422) and "response_format" in str(exc)):
                raise
            log.warning("%s rejected response_format=%s (%s); using text mode for the rest of the run",
                        self.cfg.base_url, self._fmt, exc)
            self._fmt = "text"
            body = self.body(messages)
            reply = await self._send(body)
        try:
            return parse(reply.content), reply.content
        except OutputParseError as first:
            if isinstance(first, CountMismatch):
                raise
            again = self.body(prompts.reask_messages(messages, reply.content, str(first)))
            reply = await self._send(again)
            return parse(reply.content), reply.content
