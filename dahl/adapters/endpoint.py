"""One LLM endpoint as the adapters use it: settings, session, lane, route (key, provider), reply format.

Shared by the Splitter (:mod:`dahl.adapters.openai`) and the Checker
(:mod:`dahl.adapters.openai_check`): it sends a body through the engine's lane
(one HTTP attempt per lane try), falls back to text mode once when the server
rejects ``response_format`` (HTTP 400 or 422 naming it; logged once), and sends
the single re-ask after an unparseable reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiohttp

from dahl.adapters import prompts
from dahl.adapters.bodies import Format, Kind, endpoint_fingerprint, estimate_tokens
from dahl.adapters.http import ChatReply
from dahl.adapters.route import ChatRoute
from dahl.config import EndpointConfig
from dahl.errors import OutputParseError, PermanentAPIError
from dahl.records import Usage

__all__ = ["CallLane", "Endpoint", "total_usage"]

log = logging.getLogger(__name__)


class CallLane(Protocol):
    """What the adapters need from ``dahl.lanes._lane.Lane``: run one attempt under its limits."""

    async def call(
        self, attempt: Callable[[], Awaitable[ChatReply]], *, estimated_tokens: int
    ) -> ChatReply:
        """Run ``attempt`` (one HTTP request) with rate limits and retries; return its reply."""
        ...


def total_usage(*usages: Usage | None) -> Usage | None:
    """Sum of the reported usages (a re-asked verdict costs both calls); None if none reported."""
    known = [u for u in usages if u is not None]
    if not known:
        return None
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in known),
        completion_tokens=sum(u.completion_tokens for u in known),
    )


class Endpoint:
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
        self._route = ChatRoute(cfg)  # key and headers: the same for every request
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
        route, session = self._route, self._session
        data = route.encode(body)

        def attempt() -> Awaitable[ChatReply]:
            return route.post(session, data)

        return await self._lane.call(attempt, estimated_tokens=estimate_tokens(body))

    def _rejects_format(self, exc: PermanentAPIError) -> bool:
        return self._fmt != "text" and exc.status in (400, 422) and self._route.rejects_format(str(exc))

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
