"""Where and how one endpoint's chat requests go: URL, headers, key and wire protocol.

``openai``: the chat-completions body as built, to ``/chat/completions`` (or ``{"prompt"}``
bodies to ``/completions``); ``anthropic``: converted by :mod:`dahl.adapters._anthropic_wire`,
to ``/messages``, the reply and its rate-limit headers converted back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from dahl.adapters._anthropic_wire import ANTHROPIC_VERSION, chat_reply, messages_body, ratelimit_headers
from dahl.adapters._http import ChatReply, decode_json, encode_body, parse_reply, post_bytes, request_headers
from dahl.config import EndpointConfig, resolve_api_key, resolve_headers
from dahl.errors import ConfigError, TransientAPIError

__all__ = ["ChatRoute"]


class ChatRoute:
    """One endpoint's request route, built once per adapter (key and headers read here).

    Attributes:
        url: the POST URL (``{base_url}/completions`` with ``completion``).
        api_key: the key (redacted from replies and messages; never logged or cached).
        headers: ``cfg.auth``'s key header, ``anthropic-version`` for anthropic, ``cfg.headers``.
        secrets: resolved ``cfg.headers`` values read from the environment, redacted as the key.

    Raises:
        ConfigError: the key variable or a variable a header names is unset; ``completion``
            on an anthropic endpoint.
    """

    def __init__(self, cfg: EndpointConfig, *, completion: bool = False) -> None:
        self.anthropic = cfg.provider == "anthropic"
        if completion and self.anthropic:
            raise ConfigError(f"{cfg.base_url} is an anthropic endpoint: it has no /completions; use chat mode")
        self.url = f"{cfg.base_url}/completions" if completion else cfg.request_url
        self.api_key = resolve_api_key(cfg)
        extra = resolve_headers(cfg)
        # Values read from the environment may be tokens: redacted from replies like the key.
        self.secrets = tuple(extra[name] for name, text in cfg.headers.items() if "${" in text)
        if self.anthropic:
            extra = {"anthropic-version": ANTHROPIC_VERSION, **extra}
        self.headers = request_headers(self.api_key, auth=cfg.auth or "bearer", extra=extra)

    def __repr__(self) -> str:  # never the key or header values
        return f"<ChatRoute {self.url} {'anthropic' if self.anthropic else 'openai'}>"

    def encode(self, body: Mapping[str, Any]) -> bytes:
        """The bytes to send for the chat-completions ``body`` (converted for anthropic).

        Raises:
            ValueError: the body has a message role Anthropic has no equivalent for.
        """
        return encode_body(messages_body(body) if self.anthropic else body)

    async def post(self, session: aiohttp.ClientSession, data: bytes) -> ChatReply:
        """Send ONE request of :meth:`encode`'s ``data``; the reply in chat-completion form.

        Raises:
            AdapterError: as :func:`dahl.adapters._http.post_chat`; ``TransientAPIError`` for
                an anthropic 200 that is not a Message.
        """
        status, raw_headers, payload = await post_bytes(session, self.url, data, self.headers)
        if not self.anthropic:  # post_chat's steps, one coroutine frame fewer on every resume
            reply = decode_json(status, raw_headers, payload, self.api_key, self.url, secrets=self.secrets)
            return parse_reply(reply, raw_headers)
        headers = ratelimit_headers(raw_headers)
        message = decode_json(status, headers, payload, self.api_key, self.url, secrets=self.secrets)
        try:
            chat = chat_reply(message) if isinstance(message, dict) else chat_reply({})
        except ValueError as exc:
            raise TransientAPIError(f"malformed reply: {exc}") from exc
        return parse_reply(chat, headers)
