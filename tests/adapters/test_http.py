"""Tests for dahl.adapters._http: one request, every failure mapped to the dahl error tree."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime

import pytest

from dahl.adapters._http import encode_body, make_session, parse_duration_s, parse_reply, post_chat, retry_after_s
from dahl.errors import (
    ConnectError,
    FatalAPIError,
    PermanentAPIError,
    QuotaExhausted,
    RateLimited,
    TransientAPIError,
)
from dahl.records import Usage

KEY = "sk-test-SECRETKEY123456"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def url(server) -> str:
    return f"{server.base_url}/chat/completions"


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [
            ("1s", 1.0),
            ("350ms", 0.35),
            ("6m0s", 360.0),
            ("1h2m3.5s", 3723.5),
            ("0.5", 0.5),
            ("20ms", 0.02),
        ],
        ids=["1s", "350ms", "6m0s", "1h2m3.5s", "bare-number", "20ms"],
    )
    def test_durations(self, text: str, seconds: float) -> None:
        """OpenAI reset durations convert to seconds."""
        assert parse_duration_s(text) == pytest.approx(seconds)

    @pytest.mark.parametrize("text", ["", "soon", "5x", "1s junk"], ids=["empty", "word", "bad-unit", "trailing"])
    def test_not_a_duration(self, text: str) -> None:
        """Text that is not a duration gives None."""
        assert parse_duration_s(text) is None


class TestRetryAfter:
    def test_seconds(self) -> None:
        """Retry-After in (fractional) seconds is returned as is."""
        assert retry_after_s({"retry-after": "0.35"}) == pytest.approx(0.35)

    def test_milliseconds_win(self) -> None:
        """retry-after-ms is preferred over Retry-After (it is more precise)."""
        assert retry_after_s({"retry-after-ms": "1500", "retry-after": "2"}) == pytest.approx(1.5)

    def test_http_date(self) -> None:
        """An HTTP-date Retry-After gives the seconds from now until that date."""
        now = datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC).timestamp()
        headers = {"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}
        assert retry_after_s(headers, now=now) == pytest.approx(30.0)

    def test_http_date_in_past(self) -> None:
        """A date already past means no wait (0 s), never a negative wait."""
        now = datetime(2015, 10, 21, 8, 0, 0, tzinfo=UTC).timestamp()
        assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:30 GMT"}, now=now) == 0.0

    def test_reset_of_exhausted_budget(self) -> None:
        """Only the exhausted budget's reset counts: requests at 0 -> 1 s, not the 6 min token reset."""
        headers = {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",
            "x-ratelimit-remaining-tokens": "500",
            "x-ratelimit-reset-tokens": "6m0s",
        }
        assert retry_after_s(headers) == pytest.approx(1.0)

    def test_reset_none_exhausted(self) -> None:
        """With no budget at 0, the longest reset is used (2 s over 20 ms)."""
        headers = {
            "x-ratelimit-remaining-requests": "3",
            "x-ratelimit-reset-requests": "2s",
            "x-ratelimit-remaining-tokens": "10",
            "x-ratelimit-reset-tokens": "20ms",
        }
        assert retry_after_s(headers) == pytest.approx(2.0)

    def test_nothing_said(self) -> None:
        """No rate headers gives None (the lane picks its default)."""
        assert retry_after_s({"content-type": "application/json"}) is None


class TestPostChat:
    async def test_success(self, server, session) -> None:
        """A 200 reply yields content, usage, total tokens and lowercase headers."""
        reply = server.chat("Supported", prompt_tokens=30, completion_tokens=4)
        reply.headers = {"X-RateLimit-Remaining-Requests": "99"}
        server.push(reply)
        result = await post_chat(session, url(server), KEY, BODY)
        assert result.content == "Supported"
        assert result.usage == Usage(prompt_tokens=30, completion_tokens=4)
        assert result.usage_tokens == 34
        assert result.headers["x-ratelimit-remaining-requests"] == "99"
        assert result.finish_reason == "stop"

    def test_cached_prompt_tokens(self) -> None:
        """usage.prompt_tokens_details.cached_tokens is the part of prompt_tokens read from the cache."""
        data = {"choices": [{"message": {"content": "ok"}}],
                "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                          "prompt_tokens_details": {"cached_tokens": 1920}}}
        assert parse_reply(data, {}).usage == Usage(prompt_tokens=2006, completion_tokens=300, cached_tokens=1920)

    async def test_sends_body_and_bearer(self, server, session) -> None:
        """The body is sent as JSON and the key only in the Authorization header."""
        server.push(server.chat("ok"))
        await post_chat(session, url(server), KEY, BODY)
        assert server.requests == [BODY]
        assert server.request_headers[0]["Authorization"] == f"Bearer {KEY}"

    async def test_no_key_no_header(self, server, session) -> None:
        """An empty key (local server) sends no Authorization header."""
        server.push(server.chat("ok"))
        await post_chat(session, url(server), "", BODY)
        assert "Authorization" not in server.request_headers[0]

    async def test_citations(self, server, session) -> None:
        """Perplexity citations and search_results URLs are kept in order, deduplicated."""
        server.push(
            server.chat(
                "Supported",
                citations=["https://a.example", "https://b.example"],
                search_results=[{"title": "B", "url": "https://b.example"}, {"url": "https://c.example"}],
            )
        )
        result = await post_chat(session, url(server), KEY, BODY)
        assert result.citations == ("https://a.example", "https://b.example", "https://c.example")

    async def test_null_content(self, server, session) -> None:
        """A null message content becomes an empty string (the parser then rejects it)."""
        server.push(server.chat(None))  # type: ignore[arg-type]
        result = await post_chat(session, url(server), KEY, BODY)
        assert result.content == ""

    @pytest.mark.parametrize(("message", "finish", "content", "reason"), [
        ({"role": "assistant", "content": None, "refusal": "I can't help."}, "stop", "I can't help.", "refusal"),
        ({"role": "assistant", "content": "Partial"}, "content_filter", "Partial", "content_filter"),
    ], ids=["message-refusal", "content-filter"])
    def test_refusals_are_flagged(self, message: dict, finish: str, content: str, reason: str) -> None:  # type: ignore[type-arg]
        """OpenAI's message.refusal (content null) and finish_reason content_filter: a refused reply."""
        reply = parse_reply({"choices": [{"index": 0, "message": message, "finish_reason": finish}]}, {})
        assert (reply.content, reply.finish_reason, reply.refused) == (content, reason, True)
        assert not parse_reply({"choices": [{"message": {"content": "ok", "refusal": None}}]}, {}).refused

    async def test_rate_limited(self, server, session) -> None:
        """429 with Retry-After: 2 raises RateLimited(retry_after_s=2.0, status=429)."""
        server.push(server.error(429, "Rate limit reached for requests", code="rate_limit_exceeded",
                                 headers={"Retry-After": "2"}))
        with pytest.raises(RateLimited) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.retry_after_s == 2.0
        assert info.value.status == 429

    async def test_rate_limited_ms(self, server, session) -> None:
        """429 with retry-after-ms: 250 waits 0.25 s."""
        server.push(server.error(429, "slow down", headers={"retry-after-ms": "250"}))
        with pytest.raises(RateLimited) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.retry_after_s == pytest.approx(0.25)

    @pytest.mark.parametrize(
        ("status", "type_", "message"),
        [
            (429, "insufficient_quota", "You exceeded your current quota, please check your plan and billing details."),
            (403, "error", "Your billing account is inactive."),
            (402, "error", "Payment required"),
        ],
        ids=["429-insufficient-quota", "403-billing", "402"],
    )
    async def test_quota(self, server, session, status: int, type_: str, message: str) -> None:
        """Quota and billing failures raise QuotaExhausted, not RateLimited."""
        server.push(server.error(status, message, type_=type_, code=type_))
        with pytest.raises(QuotaExhausted) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.status == status

    @pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504])
    async def test_transient_status(self, server, session, status: int) -> None:
        """408, 409 and 5xx raise TransientAPIError carrying the status."""
        server.push(server.error(status, "try again"))
        with pytest.raises(TransientAPIError) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.status == status

    @pytest.mark.parametrize("status", [400, 404, 413, 422])
    async def test_permanent_status(self, server, session, status: int) -> None:
        """Other 4xx (incl. 413 too large) raise PermanentAPIError(status)."""
        server.push(server.error(status, "bad request"))
        with pytest.raises(PermanentAPIError) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.status == status
        assert "bad request" in str(info.value)

    async def test_non_json_error_body(self, server, session) -> None:
        """A 502 whose body is an HTML proxy page still maps to TransientAPIError."""
        server.push(server.Reply(status=502, body=b"<html>Bad Gateway</html>"))
        with pytest.raises(TransientAPIError, match="HTTP 502"):
            await post_chat(session, url(server), KEY, BODY)

    async def test_malformed_json(self, server, session) -> None:
        """A 200 with a truncated JSON body raises TransientAPIError('malformed JSON ...')."""
        server.push(server.Reply(status=200, body=b'{"choices": [{"message": {"content": "Sup'))
        with pytest.raises(TransientAPIError, match="malformed JSON"):
            await post_chat(session, url(server), KEY, BODY)

    async def test_json_without_choices(self, server, session) -> None:
        """A 200 JSON body without choices raises TransientAPIError."""
        server.push(server.Reply(status=200, body={"object": "chat.completion"}))
        with pytest.raises(TransientAPIError, match="malformed reply"):
            await post_chat(session, url(server), KEY, BODY)

    async def test_connection_reset(self, server, session) -> None:
        """A connection closed without a reply raises TransientAPIError."""
        server.push(server.Reply(reset=True))
        with pytest.raises(TransientAPIError):
            await post_chat(session, url(server), KEY, BODY)

    async def test_timeout(self, server) -> None:
        """A reply slower than the session timeout (0.2 s) raises TransientAPIError."""
        server.push(server.Reply(body={"choices": []}, delay_s=1.0))
        session = make_session(max_in_flight=2, timeout_s=0.2)
        try:
            with pytest.raises(TransientAPIError, match="timed out"):
                await post_chat(session, url(server), KEY, BODY)
        finally:
            await session.close()

    async def test_connection_refused(self, session) -> None:
        """Nobody listening raises ConnectError (transient: a server may be starting) naming the URL."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        target = f"http://127.0.0.1:{port}/v1/chat/completions"
        with pytest.raises(ConnectError, match=f"cannot connect to {target}") as info:
            await post_chat(session, target, KEY, BODY)
        assert isinstance(info.value, TransientAPIError)

    async def test_unresolvable_host(self) -> None:
        """A host name that does not resolve raises ConnectError naming the URL (resolver fails offline)."""
        import aiohttp
        from aiohttp.abc import AbstractResolver

        class NoSuchHost(AbstractResolver):
            async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list:  # type: ignore[override]
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

            async def close(self) -> None:
                pass

        target = "http://no-such-host.invalid/v1/chat/completions"
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(resolver=NoSuchHost()))
        try:
            with pytest.raises(ConnectError, match=f"^cannot connect to {target}: gaierror"):
                await post_chat(session, target, KEY, BODY)
        finally:
            await session.close()

    @pytest.mark.parametrize(
        ("status", "message"),
        [(401, "Incorrect API key provided."), (403, "You are not allowed to sample from this model.")],
        ids=["401", "403-not-billing"],
    )
    async def test_auth_is_fatal(self, server, session, status: int, message: str) -> None:
        """401, and 403 without a quota/billing message, raise FatalAPIError naming the endpoint and the key check."""
        server.push(server.error(status, message, type_="invalid_request_error", code="invalid_api_key"))
        with pytest.raises(FatalAPIError) as info:
            await post_chat(session, url(server), KEY, BODY)
        text = str(info.value)
        assert info.value.status == status
        assert text == f"HTTP {status} from {url(server)}: {message} Check the API key (and its access to this model)."
        assert "SECRETKEY" not in text

    async def test_request_too_large_429_is_permanent(self, server, session) -> None:
        """OpenAI's 429 'Request too large ... on tokens per min' (no Retry-After) raises PermanentAPIError."""
        message = ("Request too large for gpt-4o in organization org-abc on tokens per min (TPM): "
                   "Limit 30000, Requested 50000. The input or output tokens must be reduced in order to run successfully.")
        server.push(server.error(429, message, type_="tokens", code="rate_limit_exceeded"))
        with pytest.raises(PermanentAPIError) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert info.value.status == 429
        assert "Request too large" in str(info.value)

    async def test_key_echoed_in_content_is_redacted(self, server, session) -> None:
        """A 200 whose content and body echo the key carry '***' instead, in content and raw."""
        server.push(server.chat(f"Supported. (Authorization: Bearer {KEY})"))
        reply = await post_chat(session, url(server), KEY, BODY)
        assert reply.content == "Supported. (Authorization: Bearer ***)"
        assert "SECRETKEY" not in repr(reply.raw)

    @pytest.mark.parametrize("short_key", ["k", "o", "test"])
    async def test_short_key_leaves_the_reply_whole(self, server, session, short_key: str) -> None:
        """A short key (a local server's) matches ordinary words and JSON names: the reply is parsed untouched."""
        server.push(server.chat("Unknown: the tokens do not say."))
        reply = await post_chat(session, url(server), short_key, BODY)
        assert reply.content == "Unknown: the tokens do not say."
        assert reply.usage is not None and reply.usage.prompt_tokens > 0  # "prompt_tokens" holds a "k" and an "o"

    async def test_key_redacted(self, server, session, caplog) -> None:
        """A 401 echoing the key never puts the key in the error message or the log."""
        server.push(server.error(401, f"Incorrect API key provided: {KEY}. Bearer {KEY}"))
        caplog.set_level(logging.DEBUG, logger="dahl")
        with pytest.raises(FatalAPIError) as info:
            await post_chat(session, url(server), KEY, BODY)
        assert "SECRETKEY" not in str(info.value)
        assert "Incorrect API key provided" in str(info.value)
        assert "SECRETKEY" not in caplog.text


class TestEncodedBody:
    async def test_bytes_sent_verbatim(self, server, session) -> None:
        """Bytes from encode_body are sent as they are, as JSON, and decode to the body."""
        server.push(server.chat("ok"))
        data = encode_body(BODY)
        assert data == b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
        await post_chat(session, url(server), KEY, data)
        assert server.requests == [BODY]
        assert server.request_headers[0]["Content-Type"] == "application/json"
        assert server.request_headers[0]["Accept"] == "application/json"

    async def test_headers_follow_the_key(self, server, session) -> None:
        """Headers built once per key: a second key sends its own bearer, no key sends none."""
        server.push(server.chat("a"), server.chat("b"), server.chat("c"))
        await post_chat(session, url(server), KEY, BODY)
        await post_chat(session, url(server), "sk-other-KEY987654", BODY)
        await post_chat(session, url(server), "", BODY)
        auth = [headers.get("Authorization") for headers in server.request_headers]
        assert auth == [f"Bearer {KEY}", "Bearer sk-other-KEY987654", None]
