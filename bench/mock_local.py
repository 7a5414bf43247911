"""What a local server (llama.cpp's Python server, as measured) does that a hosted API does not.

- ``--llama``: a request body that fails validation (not an object, ``messages`` not a list) and
  a ``response_format`` of a type other than ``text`` or ``json_object`` (``json_schema``) are
  answered by **HTTP 500** with FastAPI/pydantic's validation message (type
  ``internal_server_error``); a body that is not JSON by a 500 whose body is the plain text
  ``Internal Server Error``.
- ``--slots N``: N requests are computed at once and the rest wait in a queue (never a 429 or
  503); a request the client gave up on is still computed.
- ``--n-ctx N``: a prompt above N tokens is refused (400 ``context_length_exceeded``); a reply
  that would take prompt + completion past N is cut there, ``finish_reason: "length"``.
- ``--models NAME ...``: ``GET /v1/models`` lists these (llama.cpp lists the model file's path,
  or ``--model_alias``); without them it answers FastAPI's JSON 404 ``{"detail": "Not Found"}``.
  The model name of a request is echoed back whatever it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

__all__ = ["context_exceeded", "cut_to_context", "format_rejection", "models_handler", "rejection",
           "validation_error"]



def validation_error(loc: tuple[Any, ...], kind: str, msg: str, value: Any) -> web.Response:
    """The 500 llama.cpp's server answers a request that fails validation with."""
    detail = {"type": kind, "loc": loc, "msg": msg, "input": value}
    message = f"1 validation error:\n  {detail!r}"
    body = {"error": {"message": message, "type": "internal_server_error", "param": None, "code": None}}
    return web.json_response(body, status=500)


def rejection(body: Any) -> web.Response | None:
    """The 500 of a decoded body that fails validation (see :func:`format_rejection`); None when valid."""
    if not isinstance(body, Mapping):
        return validation_error(("body",), "model_attributes_type",
                                "Input should be a valid dictionary or object to extract fields from", body)
    if "messages" in body and not isinstance(body["messages"], list):
        return validation_error(("body", "messages"), "list_type", "Input should be a valid list", body["messages"])
    return format_rejection(body)


def format_rejection(body: Mapping[str, Any]) -> web.Response | None:
    """The 500 of a ``response_format`` other than ``text`` / ``json_object``; None when accepted."""
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, Mapping) else None
    if fmt is None or kind in ("text", "json_object"):
        return None
    return validation_error(("body", "response_format", "type"), "literal_error",
                            "Input should be 'text' or 'json_object'", kind)


def context_exceeded(prompt_tokens: int, n_ctx: int | None) -> web.Response | None:
    """The 400 of a prompt longer than the context window; None when it fits (or no window)."""
    if n_ctx is None or prompt_tokens <= n_ctx:
        return None
    message = f"Requested tokens ({prompt_tokens}) exceed context window of {n_ctx}"
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}
    return web.json_response(body, status=400)


def cut_to_context(content: str, prompt_tokens: int, n_ctx: int | None, chars_per_token: int = 4) -> str | None:
    """``content`` cut where prompt + completion reach ``n_ctx`` tokens; None when it fits.

    Args:
        content: the full reply text.
        prompt_tokens: estimated prompt tokens.
        n_ctx: context window, tokens; None: no window.
        chars_per_token: characters per token of the mock's estimate.
    """
    if n_ctx is None:
        return None
    room = max(n_ctx - prompt_tokens, 0) * chars_per_token
    return content[:room] if len(content) > room else None


def models_handler(names: Sequence[str]) -> web.Response:
    """``GET /v1/models``: OpenAI's list of ``names``; a JSON 404 when there are none."""
    if not names:
        return web.json_response({"detail": "Not Found"}, status=404)
    return web.json_response({"object": "list", "data": [
        {"id": name, "object": "model", "owned_by": "me", "permissions": []} for name in names]})
