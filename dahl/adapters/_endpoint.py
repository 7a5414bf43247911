"""The one LLM endpoint client: every stage that asks a model sends through an :class:`Endpoint`.

A stage gives its :class:`~dahl.adapters._bodies.Task` and parser; the endpoint owns the route,
the body, one HTTP attempt per lane try, usage and cost, the one text fallback when the server
rejects the structured reply format, and the one re-ask of an unparseable reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import aiohttp
import msgspec
import orjson

from dahl.adapters._bodies import (
    BodyBytes,
    Format,
    Task,
    budget,
    chat_body,
    estimate_tokens,
    fingerprint,
    format_field,
)
from dahl.adapters._http import ChatReply, get_bytes, make_session
from dahl.adapters._route import ChatRoute
from dahl.config import EndpointConfig, api_key_id, is_local_url, resolve_api_key
from dahl.errors import (
    AdapterError,
    ConfigError,
    ModelRefused,
    OutputParseError,
    PermanentAPIError,
    ReplyCut,
)
from dahl.lanes._breaker import BreakerSettings
from dahl.lanes._lane import Lane, LaneLimits, LanePool
from dahl.lanes._spend import InnerLane as CallLane
from dahl.records import Usage

if TYPE_CHECKING:
    from dahl.lanes._spend import Spend

__all__ = [
    "CallLane",
    "Connections",
    "CountMismatch",
    "Endpoint",
    "Parsed",
    "check_model",
    "reask_messages",
    "rejects_format",
    "total_usage",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

Message = dict[str, str]


class CountMismatch(OutputParseError):
    """A reply that parsed but did not answer each numbered item exactly once (never re-asked:
    the stage asks each item alone, and never pads)."""


class Parsed(msgspec.Struct, Generic[T], frozen=True):
    """A reply and what the stage's parser made of it.

    Attributes:
        value: the parsed value; None when ``error`` is set.
        error: the parse error of the last reply (after the one re-ask), or None.
        reply: the last reply; ``reply.content`` is its raw text.
        usage: tokens of the call and of its re-ask, summed; None if none reported.
    """

    value: T | None
    error: OutputParseError | None
    reply: ChatReply
    usage: Usage | None

    @property
    def raw(self) -> str:
        """The raw text of the last reply."""
        return self.reply.content

    def get(self) -> T:
        """The parsed value.

        Raises:
            OutputParseError: the parser's error of the last reply (``CountMismatch`` included).
        """
        if self.error is not None:
            raise self.error
        return cast(T, self.value)


def total_usage(*usages: Usage | None) -> Usage | None:
    """Sum of the reported usages (a re-asked reply costs both calls); None if none reported."""
    known = [u for u in usages if u is not None]
    if not known:
        return None
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in known),
        completion_tokens=sum(u.completion_tokens for u in known),
        cached_tokens=sum(u.cached_tokens for u in known),
        cache_write_tokens=sum(u.cache_write_tokens for u in known),
    )


def rejects_format(exc: AdapterError, *, anthropic: bool) -> bool:
    """Whether ``exc`` is a server's rejection of the structured reply format: a permanent
    error of an HTTP status other than 404 (a 400, a 422, a validation error's 500) naming ``response_format``
    (for Anthropic also ``tools`` / ``tool_choice``)."""
    if not isinstance(exc, PermanentAPIError) or exc.status in (None, 404) or isinstance(exc, ModelRefused):
        return False
    words = ("response_format", "tool_choice", "tools") if anthropic else ("response_format",)
    return any(word in str(exc) for word in words)


def reask_messages(
    messages: list[Message], reply: str, error: str, expected: str, *,
    neutralize: Callable[[str], str] = str,
) -> list[Message]:
    """Messages of the single re-ask after an unparseable ``reply`` to ``messages``.

    Appends the reply (through ``neutralize``) and a user message ``"Your reply could not be
    parsed: {error}; {expected}.\\n\\n"`` followed by the original last user message.
    """
    follow_up = f"Your reply could not be parsed: {error}; {expected}.\n\n{messages[-1]['content']}"
    return [*messages, {"role": "assistant", "content": neutralize(reply)}, {"role": "user", "content": follow_up}]


def _check_refusal(reply: ChatReply, max_tokens: int) -> None:
    """Raise ``ModelRefused`` with what the model said when ``reply`` is a refusal, ``ReplyCut``
    when it ended at the token limit (``finish_reason`` ``"length"``)."""
    finish = reply.finish_reason
    if finish != "length" and not reply.refused:  # the common case: nothing to say, nothing built
        return
    said = " ".join(reply.content.split())[:300] or "(no text)"
    if reply.refused:
        raise ModelRefused(f"the model refused (finish_reason {reply.finish_reason!r}): {said}")
    if finish == "length":
        tokens = reply.usage.completion_tokens if reply.usage is not None else "?"
        raise ReplyCut(f"the reply was cut at the token limit (finish_reason 'length', {tokens} completion "
                       f"tokens, max_tokens {max_tokens}; a server's context window smaller than the prompt + "
                       f"max_tokens cuts it too): {said[:120]}")


async def check_model(session: aiohttp.ClientSession, cfg: EndpointConfig) -> bool | None:
    """Whether ``cfg.base_url``'s ``GET /models`` lists ``cfg.model``; logs a warning when not.

    A local server (llama.cpp, vLLM, Ollama) may answer any model name with the one model it
    serves, echoing the name back. None when the list could not be read (no such route, a
    non-JSON body, any failure): never an error.
    """
    url = f"{cfg.base_url}/models"
    try:
        route = ChatRoute(cfg)
        reply = await get_bytes(session, url, {}, secret=route.api_key, headers=route.headers)
        data = orjson.loads(reply.body)
        names = [str(m.get("id")) for m in data["data"] if isinstance(m, dict)]
    except (AdapterError, ConfigError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        log.debug("GET %s: no model list (%s: %s)", url, type(exc).__name__, exc)
        return None
    if cfg.model in names:
        return True
    log.warning("%s does not list model %r (it lists %s); a local server may answer with the model it "
                "serves whatever the name", cfg.base_url, cfg.model, ", ".join(map(repr, names[:5])) or "none")
    return False


class Connections:
    """The lanes and HTTP sessions of a run's LLM endpoints (inside a running event loop).

    One lane per (normalized base URL, key identity, model) from ``pool`` (default: a new one),
    with the endpoint's limits and breaker; one session per (in-flight cap, timeout), closed
    with ``stack``. The model of a local endpoint (:func:`~dahl.config.is_local_url`) is
    checked against its ``/models`` list once (:func:`check_model`).
    """

    def __init__(self, stack: AsyncExitStack, pool: LanePool | None = None) -> None:
        self._stack = stack
        self.pool = pool if pool is not None else LanePool()
        self._sessions: dict[tuple[int, float], aiohttp.ClientSession] = {}

    async def open(self, cfg: EndpointConfig) -> tuple[aiohttp.ClientSession, Lane]:
        """The session and the lane for ``cfg``.

        Raises:
            ConfigError: the API key variable is unset; the base URL is not a URL.
        """
        lane = self.pool.get(
            cfg.base_url, api_key_id(resolve_api_key(cfg)), cfg.model,
            LaneLimits(rpm=cfg.rpm, tpm=cfg.tpm, max_in_flight=cfg.max_in_flight),
            breaker=BreakerSettings(max_outage_s=cfg.max_outage_s),
        )
        key = (cfg.max_in_flight, cfg.timeout_s)
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = await self._stack.enter_async_context(make_session(*key))
        checked = (cfg.base_url, cfg.model)
        if checked not in self.pool.checked and cfg.provider == "openai" and is_local_url(cfg.base_url):
            self.pool.checked.add(checked)
            await check_model(session, cfg)
        return session, lane


class Endpoint:
    """One stage's requests to one LLM endpoint, through its lane.

    Args:
        task: what the stage asks (:class:`~dahl.adapters._bodies.Task`).
        completion: send ``{"prompt"}`` bodies to ``/completions`` instead of the chat route.
        spend: the run's money meter (None: calls are not metered), under ``meter_as``
            (default ``task.name``).

    Attributes:
        max_tokens: completion budget of a request, tokens (``cfg.max_tokens``, else the task's).
        fingerprint: every setting that changes a reply (:func:`~dahl.adapters._bodies.fingerprint`).
        calls: requests handed to the lane (fallbacks and re-asks included).
        system_digests: memo of system-prompt digests for cache keys.

    Raises:
        ConfigError: (on construction) the API key variable (or one a header names) is unset;
            ``completion`` on an Anthropic endpoint; a cost cap and no price for the model.
    """

    def __init__(
        self,
        cfg: EndpointConfig,
        session: aiohttp.ClientSession,
        lane: CallLane,
        task: Task,
        *,
        completion: bool = False,
        spend: Spend | None = None,
        meter_as: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.task = task
        self._session = session
        self._route = ChatRoute(cfg, completion=completion)  # key and headers: the same for every request
        self._fmt: Format = cfg.effective_format()
        self.max_tokens = budget(cfg, task.max_tokens)
        self._lane: CallLane = (
            lane if spend is None else spend.lane(lane, meter_as or task.name, cfg.model, self.max_tokens)
        )
        self.fingerprint = fingerprint(cfg, task.name, task.template, self.max_tokens)
        self.calls = 0
        self.system_digests: dict[str, str] = {}

    def __repr__(self) -> str:  # never the key
        return f"<Endpoint {self.task.name} {self._route!r} format={self._fmt}>"

    @property
    def url(self) -> str:
        """The URL requests are posted to."""
        return self._route.url

    @property
    def reply_format(self) -> Format:
        """Reply format currently requested (``text`` after a fallback)."""
        return self._fmt

    def body(self, messages: list[Message], fmt: Format | None = None) -> dict[str, Any]:
        """The chat body of ``messages`` under reply format ``fmt`` (default :attr:`reply_format`),
        with the task's schema in ``json_schema`` mode; never the API key."""
        fmt = fmt or self._fmt
        return chat_body(self.cfg, messages, max_tokens=self.max_tokens,
                         response_format=format_field(fmt, self.task.json_schema))

    def body_bytes(self, body: dict[str, Any], hole: str) -> BodyBytes | None:
        """:class:`~dahl.adapters._bodies.BodyBytes` of ``body`` (one message's content is ``hole``)
        as this endpoint's route encodes it; None when that cannot be split."""
        encoded = BodyBytes(body, hole, self._route.encode)
        return encoded if encoded.usable else None

    async def send(self, body: dict[str, Any]) -> ChatReply:
        """Send ``body`` (encoded once) through the lane; its reply.

        Raises:
            AdapterError: the call failed after the lane's retries.
        """
        return await self.send_bytes(self._route.encode(body), estimate_tokens(body))

    async def send_bytes(self, data: bytes, estimated_tokens: int) -> ChatReply:
        """Send the encoded body ``data`` (``estimated_tokens`` as :func:`estimate_tokens` counts
        it) through the lane; its reply.

        Raises:
            AdapterError: the call failed after the lane's retries.
        """
        route, session = self._route, self._session

        def attempt() -> Awaitable[ChatReply]:
            return route.post(session, data)

        self.calls += 1
        return await self._lane.call(attempt, estimated_tokens=estimated_tokens)

    async def request(self, build: Callable[[Format], dict[str, Any]]) -> tuple[ChatReply, dict[str, Any], Format]:
        """Send ``build(format)``; after a rejection of the reply format, switch to text mode for
        good and send ``build("text")``; returns ``(reply, body sent, its format)``.

        Raises:
            AdapterError: the call failed after the lane's retries.
        """
        fmt = self._fmt
        body = build(fmt)
        try:
            return await self.send(body), body, fmt
        except PermanentAPIError as exc:
            return await self._in_text(build, fmt, exc)

    async def _in_text(
        self, build: Callable[[Format], dict[str, Any]], fmt: Format, exc: PermanentAPIError
    ) -> tuple[ChatReply, dict[str, Any], Format]:
        """After ``exc`` answered a request in ``fmt``: re-raise it, or (a rejection of the reply
        format) switch to text mode for good and send ``build("text")``."""
        if fmt == "text" or not rejects_format(exc, anthropic=self.cfg.provider == "anthropic"):
            raise exc
        if self._fmt == fmt:
            log.warning(
                "%s rejected response_format=%s (%s); using text mode for the rest of the run",
                self.cfg.base_url, fmt, exc,
            )
            self._fmt = "text"
        body = build("text")
        return await self.send(body), body, "text"

    async def ask(
        self, build: Callable[[Format], dict[str, Any]], parse: Callable[[str], T], *, reask: bool = True,
        encoded: tuple[Format, bytes, int] | None = None,
    ) -> Parsed[T]:
        """Send ``build(format)`` (as :meth:`request`) and parse the reply with ``parse``; re-ask
        once with the parse error when it fails (unless ``reask`` is False or it is a
        ``CountMismatch``). The result holds the value or the last parse error.

        Args:
            encoded: ``(format, bytes of build(format), their estimate_tokens)`` when the stage
                has them (:class:`~dahl.adapters._bodies.BodyBytes`): sent as they are while the
                endpoint asks in that format; ``build`` then runs only for a re-ask or a fallback.

        Raises:
            ModelRefused: the model refused (:attr:`ChatReply.refused`); never re-asked.
            ReplyCut: the reply ended at the token limit; never parsed, never re-asked.
            AdapterError: a call failed after the lane's retries.
        """
        body: dict[str, Any] | None
        if encoded is not None and encoded[0] == self._fmt:
            fmt, data, estimated = encoded
            body = None
            try:
                reply = await self.send_bytes(data, estimated)
            except PermanentAPIError as exc:
                reply, body, fmt = await self._in_text(build, fmt, exc)
        else:
            reply, body, fmt = await self.request(build)
        _check_refusal(reply, self.max_tokens)
        try:
            return Parsed(parse(reply.content), None, reply, reply.usage)
        except OutputParseError as first:
            if not reask or isinstance(first, CountMismatch):
                return Parsed(None, first, reply, reply.usage)
            error = first
        task = self.task
        expected = task.reask_json if fmt != "text" else task.reask_text
        if body is None:
            body = build(fmt)
        messages = reask_messages(body["messages"], reply.content, str(error), expected, neutralize=task.neutralize)
        usage = reply.usage
        reply = await self.send({**body, "messages": messages})
        _check_refusal(reply, self.max_tokens)
        usage = total_usage(usage, reply.usage)
        try:
            return Parsed(parse(reply.content), None, reply, usage)
        except OutputParseError as second:
            return Parsed(None, second, reply, usage)
