"""Specification of the mock OpenAI-compatible server (bench/mockserver.py and its pieces)."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bench.mock_config import Latency, MockConfig, parse_fault, parse_latency
from bench.mock_oracle import Oracle
from bench.mock_reply import OFFFORMAT_TEXT, default_label, parse_prompt, sentences
from bench.mock_window import RateWindow, format_duration
from bench.mockserver import MockServer
from dahl.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
MakeServer = Callable[..., Awaitable[MockServer]]

FACTSCORE_FILES = ("ChatGPT.jsonl", "InstructGPT.jsonl", "PerplexityAI.jsonl")


def check_body(claim: str, question: str = "Q?", *, json_mode: bool = False, **extra: Any) -> dict[str, Any]:
    """A dahl-style check request body."""
    content = f"<question>\n{question}\n</question>\n<claim>\n{claim}\n</claim>"
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": content}], **extra}
    if json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def split_body(answer: str, question: str = "Q?", *, json_mode: bool = False) -> dict[str, Any]:
    """A dahl-style split request body."""
    content = f"<question>\n{question}\n</question>\n<answer>\n{answer}\n</answer>"
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": content}]}
    if json_mode:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "claims", "schema": {}}}
    return body


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, dict[str, str], str]:
    """POST a chat completion; return status, headers and body text."""
    async with session.post(f"{url}/chat/completions", json=body) as reply:
        return reply.status, dict(reply.headers), await reply.text()


def content_of(text: str) -> str:
    """The assistant message content of a chat-completion JSON body."""
    return str(json.loads(text)["choices"][0]["message"]["content"])


class FakeClock:
    """Settable monotonic clock (seconds)."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def write_dahl_oracle(path: Path) -> Path:
    """Tiny dahl JSONL: one pair labelled twice supported and once unsupported, one tie."""
    rows = [
        {"question": "What does aspirin do?", "response": "Aspirin inhibits COX-1.  It thins blood.",
         "claims": [{"text": "Aspirin inhibits COX-1.", "label": "supported"},
                    {"text": "It thins blood.", "label": "NS"}]},
        {"question": "What does aspirin do?", "response": "Aspirin inhibits COX-1.",
         "claims": [{"text": "Aspirin  inhibits COX-1.", "label": "unsupported"},
                    {"text": "Aspirin inhibits COX-1.", "label": "true"}]},
        {"question": "Who is Ann?", "response": "Ann is a nurse.",
         "claims": [{"text": "Ann is a nurse.", "label": "irrelevant"},
                    {"text": "Ann is a nurse.", "label": "supported"}]},
    ]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n", encoding="utf-8")
    return path


class TestParsePrompt:
    def test_claim_tag_makes_a_check_and_the_last_block_counts(self) -> None:
        """A user message with two <claim> blocks is a check about the second claim."""
        text = "<claim>\nfirst\n</claim> then <question>\nQ1\n</question><claim>\nsecond\n</claim>"
        prompt = parse_prompt({"messages": [{"role": "user", "content": text}]})
        assert (prompt.kind, prompt.data, prompt.question) == ("check", "second", "Q1")

    def test_answer_without_claim_is_a_split(self) -> None:
        """An <answer> block without <claim> is a split of that answer."""
        prompt = parse_prompt(split_body("A is B. C is D."))
        assert (prompt.kind, prompt.data, prompt.question) == ("split", "A is B. C is D.", "Q?")

    def test_reask_after_a_check_stays_a_check(self) -> None:
        """A follow-up user message without tags keeps the kind of the tagged message before it."""
        body = check_body("X is Y.")
        body["messages"] += [
            {"role": "assistant", "content": "Maybe"},
            {"role": "user", "content": "Your reply could not be parsed; answer with one label."},
        ]
        assert parse_prompt(body).kind == "check"

    def test_untagged_prompt_is_other_with_defaults(self) -> None:
        """No tags -> other; no max_tokens -> 16; no model -> 'mock'; text parts are counted."""
        body: dict[str, Any] = {"messages": [{"role": "user", "content": [{"type": "text", "text": "x" * 9}]}]}
        prompt = parse_prompt(body)
        assert (prompt.kind, prompt.max_tokens, prompt.model, prompt.prompt_tokens) == ("other", 16, "mock", 3)

    def test_response_format_turns_on_json_mode(self) -> None:
        """json_object and json_schema response formats select JSON replies; text does not."""
        assert parse_prompt(check_body("c", json_mode=True)).json_mode
        assert parse_prompt(split_body("a", json_mode=True)).json_mode
        assert not parse_prompt(check_body("c", response_format={"type": "text"})).json_mode


class TestDefaultReplies:
    def test_default_label_is_pinned_per_claim(self) -> None:
        """The hash label of a claim never changes between runs."""
        assert default_label("Aspirin inhibits COX-1.") == "supported"
        assert default_label("Claim number 7.") == "unsupported"
        assert default_label("Claim number 9.") == "unknown"

    def test_default_label_shares_are_near_70_25_5(self) -> None:
        """Over 10,000 claims the labels split 6968 / 2554 / 478."""
        counts = {"supported": 0, "unsupported": 0, "unknown": 0}
        for i in range(10_000):
            counts[default_label(f"Claim number {i}.")] += 1
        assert counts == {"supported": 6968, "unsupported": 2554, "unknown": 478}

    def test_sentences_split_on_terminal_punctuation(self) -> None:
        """'A is B.  C is D! E?' gives three sentences; 'e.g.x' stays whole."""
        assert sentences("A is B.  C is D!\nE?") == ["A is B.", "C is D!", "E?"]
        assert sentences("Use e.g.x here") == ["Use e.g.x here"]


class TestChatEndpoint:
    async def test_check_text_reply_and_usage(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A text-mode check answers 'Supported' plus a reason, with usage ceil(66/4)=17 and ceil(49/4)=13."""
        server = await make_server()
        status, _, text = await post(session, server.url, check_body("Aspirin inhibits COX-1."))
        reply = json.loads(text)
        assert status == 200
        assert reply["object"] == "chat.completion" and reply["model"] == "m"
        assert reply["choices"][0]["finish_reason"] == "stop"
        assert reply["choices"][0]["message"]["content"].splitlines()[0] == "Supported"
        assert reply["usage"] == {"prompt_tokens": 17, "completion_tokens": 13, "total_tokens": 30}

    async def test_check_json_reply(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """With response_format the check reply is {"label", "reason"} JSON."""
        server = await make_server()
        _, _, text = await post(session, server.url, check_body("Claim number 7.", json_mode=True))
        assert json.loads(content_of(text))["label"] == "unsupported"

    async def test_split_replies_one_claim_per_sentence(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """Split replies list each sentence: '- ' lines in text mode, {"claims"} in JSON mode."""
        server = await make_server()
        _, _, text = await post(session, server.url, split_body("A is B. C is D!"))
        assert content_of(text) == "- A is B.\n- C is D!"
        _, _, text = await post(session, server.url, split_body("A is B. C is D!", json_mode=True))
        assert json.loads(content_of(text)) == {"claims": ["A is B.", "C is D!"]}

    async def test_kinds_and_statuses_are_counted(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """2 checks, 1 split, 1 other and 1 bad body are counted by kind and status; reset zeroes them."""
        server = await make_server()
        bodies: list[dict[str, Any]] = [check_body("a"), check_body("b"), split_body("c"), {"messages": []}]
        for body in bodies:
            await post(session, server.url, body)
        async with session.post(f"{server.url}/chat/completions", data=b"{not json") as reply:
            assert reply.status == 400
        async with session.get(f"{server.root}/stats") as reply:
            stats = await reply.json()
        assert (stats["requests"], stats["check"], stats["split"], stats["other"]) == (5, 2, 1, 2)
        assert stats["status"] == {"200": 4, "400": 1}
        async with session.post(f"{server.root}/stats/reset") as reply:
            assert (await reply.json())["requests"] == 0
        assert server.stats()["status"] == {}

    async def test_path_without_v1_and_authorization_accepted(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """POST /chat/completions with a Bearer header answers 200."""
        server = await make_server()
        headers = {"Authorization": "Bearer sk-test"}
        async with session.post(f"{server.root}/chat/completions", json=check_body("a"), headers=headers) as reply:
            assert reply.status == 200

    async def test_in_flight_max_counts_concurrent_requests(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """Three requests held 200 ms each at once give in_flight_max 3."""
        server = await make_server(MockConfig(latency=Latency(median_ms=200)))
        async with asyncio.TaskGroup() as group:
            for i in range(3):
                group.create_task(post(session, server.url, check_body(f"c{i}")))
        assert server.stats()["in_flight_max"] == 3
        assert server.stats()["in_flight"] == 0


class TestLatency:
    def test_lognormal_median_matches(self) -> None:
        """10,001 draws of lognormal:200:0.5 have a median within 3% of 200 ms."""
        rng = random.Random(0)
        draws = sorted(Latency(median_ms=200, sigma=0.5).sample_s(rng) for _ in range(10_001))
        assert draws[5000] == pytest.approx(0.200, rel=0.03)

    def test_parse_latency_defaults_sigma(self) -> None:
        """'lognormal:150' means median 150 ms, sigma 0.5; a bad name is a ConfigError."""
        assert parse_latency("lognormal:150") == Latency(median_ms=150, sigma=0.5)
        assert parse_latency("lognormal:150:0.8") == Latency(median_ms=150, sigma=0.8)
        with pytest.raises(ConfigError):
            parse_latency("normal:150")

    async def test_fixed_latency_delays_reply(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """--latency-ms 150 makes a reply take at least 0.15 s."""
        server = await make_server(MockConfig(latency=Latency(median_ms=150)))
        start = time.perf_counter()
        await post(session, server.url, check_body("a"))
        assert time.perf_counter() - start >= 0.15


class TestRateWindow:
    def test_duration_strings(self) -> None:
        """Reset durations render like OpenAI: 350ms, 1s, 1.5s, 6m0s, 1m30.5s."""
        assert [format_duration(s) for s in (0.35, 1.0, 1.5, 360.0, 90.5)] == ["350ms", "1s", "1.5s", "6m0s", "1m30.5s"]

    def test_requests_refill_at_window_boundary(self) -> None:
        """3 per window: the 4th request at +0.25 s is refused with 0.75 s to reset; at +1 s it passes."""
        clock = FakeClock()
        window = RateWindow(requests=3, tokens=None, window_s=1.0, clock=clock)
        clock.now = 100.25
        assert [window.admit(10).admitted for _ in range(4)] == [True, True, True, False]
        refused = window.admit(10)
        assert refused.reason == "requests"
        assert refused.reset_s == pytest.approx(0.75)
        clock.now = 101.0
        assert window.admit(10).headers["x-ratelimit-remaining-requests"] == "2"

    def test_tokens_budget_and_too_large(self) -> None:
        """100 tokens per window: 64 passes, another 64 is refused, 101 is too large for any window."""
        window = RateWindow(requests=None, tokens=100, window_s=1.0, clock=FakeClock())
        first, second, huge = window.admit(64), window.admit(64), window.admit(101)
        assert first.admitted and first.headers["x-ratelimit-remaining-tokens"] == "36"
        assert (second.admitted, second.reason, second.too_large) == (False, "tokens", False)
        assert (huge.reason, huge.too_large) == ("tokens", True)

    def test_limit_below_one_per_window_is_rejected(self) -> None:
        """rpm 30 with a 1 s window would admit 0.5 requests per window: ConfigError."""
        with pytest.raises(ConfigError):
            MockConfig(rpm=30, window_s=1.0)


class TestRateLimitHTTP:
    async def test_rpm_429_with_retry_after_and_headers(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """--rpm 180 --window-s 1 admits 3 requests; the 4th at +0.25 s gets 429, Retry-After 0.75."""
        clock = FakeClock()
        server = await make_server(MockConfig(rpm=180, window_s=1.0), clock=clock)
        clock.now = 100.25
        statuses = [(await post(session, server.url, check_body(f"c{i}")))[0] for i in range(3)]
        status, headers, text = await post(session, server.url, check_body("c3"))
        assert statuses == [200, 200, 200] and status == 429
        assert (headers["Retry-After"], headers["retry-after-ms"]) == ("0.75", "750")
        assert headers["x-ratelimit-limit-requests"] == "180"  # per minute, as OpenAI reports it
        assert headers["x-ratelimit-remaining-requests"] == "0"
        assert headers["x-ratelimit-reset-requests"] == "750ms"
        error = json.loads(text)["error"]
        assert (error["type"], error["code"]) == ("requests", "rate_limit_exceeded")
        assert error["message"].startswith("Rate limit reached")
        stats = server.stats()
        assert (stats["status"], stats["rate_limited"]) == ({"200": 3, "429": 1}, {"requests": 1})

    async def test_real_clock_window_reopens_after_retry_after(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """--rpm 120 --window-s 1 (2 per window): 5 quick requests see a 429; waiting Retry-After reopens."""
        server = await make_server(MockConfig(rpm=120, window_s=1.0))
        results = [await post(session, server.url, check_body(f"c{i}")) for i in range(5)]
        refused = [r for r in results if r[0] == 429]
        # 5 quick requests span at most 2 windows, so one window receives 3 and refuses one.
        assert len(refused) >= 1
        wait_s = float(refused[0][1]["Retry-After"])
        assert 0 < wait_s <= 1.0
        await asyncio.sleep(wait_s + 0.02)
        assert (await post(session, server.url, check_body("after")))[0] == 200

    async def test_tpm_counts_prompt_estimate_plus_max_tokens(
        self, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """--tpm 6000 --window-s 1 (100 tokens): 5+60 passes, a second 65 is refused, 5+200 is too large."""
        server = await make_server(MockConfig(tpm=6000, window_s=1.0), clock=FakeClock())
        body = {"messages": [{"role": "user", "content": "<claim>\nx\n</claim>"}], "max_tokens": 60}
        first = await post(session, server.url, body)
        second = await post(session, server.url, body)
        huge = await post(session, server.url, {**body, "max_tokens": 200})
        assert first[0] == 200 and first[1]["x-ratelimit-remaining-tokens"] == "35"
        assert second[0] == 429 and json.loads(second[2])["error"]["type"] == "tokens"
        assert huge[0] == 429 and "Retry-After" not in huge[1]
        assert "Request too large" in json.loads(huge[2])["error"]["message"]


class TestFaults:
    def test_parse_fault(self) -> None:
        """'503=0.05' parses; an unknown kind or a rate above 1 is a ConfigError."""
        assert parse_fault("503=0.05") == ("503", 0.05)
        for bad in ("502=0.1", "reset=1.5", "reset"):
            with pytest.raises(ConfigError):
                parse_fault(bad)

    @pytest.mark.parametrize("kind", ["500", "503"])
    async def test_server_errors(self, kind: str, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A 500/503 fault at rate 1 answers that status with an error JSON."""
        server = await make_server(MockConfig(faults=((kind, 1.0),)))
        status, _, text = await post(session, server.url, check_body("a"))
        assert status == int(kind) and json.loads(text)["error"]["type"] == "server_error"
        assert server.stats()["faults"] == {kind: 1}

    async def test_reset(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A reset fault drops the connection: the client sees a disconnect, no status is counted."""
        server = await make_server(MockConfig(faults=(("reset", 1.0),)))
        with pytest.raises((aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
            await post(session, server.url, check_body("a"))
        assert (server.stats()["status"], server.stats()["faults"]) == ({}, {"reset": 1})

    async def test_timeout_fires_client_timeout(self, make_server: MakeServer) -> None:
        """A timeout fault never answers within the client's 0.2 s timeout; the handler is then released."""
        server = await make_server(MockConfig(faults=(("timeout", 1.0),)))
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.2)) as client:
            with pytest.raises(asyncio.TimeoutError):
                await post(client, server.url, check_body("a"))
        for _ in range(50):
            if server.stats()["in_flight"] == 0:
                break
            await asyncio.sleep(0.02)
        assert server.stats()["in_flight"] == 0 and server.stats()["faults"] == {"timeout": 1}

    async def test_close_releases_pending_timeout(self, make_server: MakeServer) -> None:
        """Closing the server while a timeout fault holds a request takes under 2 s."""
        server = await make_server(MockConfig(faults=(("timeout", 1.0),)))
        async with aiohttp.ClientSession() as client:
            pending = asyncio.create_task(post(client, server.url, check_body("a")))
            await asyncio.sleep(0.1)
            start = time.perf_counter()
            await server.close()
            assert time.perf_counter() - start < 2.0
            try:
                await pending
            except aiohttp.ClientError:
                pass  # a dropped connection is an acceptable end too

    async def test_malformed(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A malformed fault answers 200 with a JSON body cut short."""
        server = await make_server(MockConfig(faults=(("malformed", 1.0),)))
        status, _, text = await post(session, server.url, check_body("a"))
        assert status == 200 and text.startswith('{"id": "chatcmpl-mock-')
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)

    async def test_offformat(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """An offformat fault answers valid JSON whose content is chatty text, even in JSON mode."""
        server = await make_server(MockConfig(faults=(("offformat", 1.0),)))
        _, _, text = await post(session, server.url, check_body("a", json_mode=True))
        assert content_of(text) == OFFFORMAT_TEXT

    async def test_quota(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A quota fault answers 429 insufficient_quota without Retry-After."""
        server = await make_server(MockConfig(faults=(("quota", 1.0),)))
        status, headers, text = await post(session, server.url, check_body("a"))
        error = json.loads(text)["error"]
        assert status == 429 and "Retry-After" not in headers
        assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota")
        assert server.stats()["rate_limited"] == {"quota": 1}

    async def test_rates_are_seeded(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """503=0.5 over 100 requests gives the same statuses for the same seed, about half 503."""
        runs = []
        for _ in range(2):
            server = await make_server(MockConfig(faults=(("503", 0.5),), seed=7))
            runs.append([(await post(session, server.url, check_body("a")))[0] for _ in range(100)])
        assert runs[0] == runs[1]
        assert 30 <= runs[0].count(503) <= 70


class TestOracle:
    def test_dahl_jsonl_majority_and_conflicts(self, tmp_path: Path) -> None:
        """Majority wins (2 supported vs 1), ties keep the first, and both conflicting pairs are counted."""
        oracle = Oracle.load([write_dahl_oracle(tmp_path / "o.jsonl")])
        assert oracle.conflicts == 2
        assert oracle.label("What does aspirin do?", "Aspirin inhibits COX-1.") == "supported"
        assert oracle.label("Who is Ann?", "Ann is a nurse.") == "irrelevant"
        assert oracle.label("Another question", "It thins  blood.") == "unsupported"
        assert oracle.label("What does aspirin do?", "Unseen claim.") is None
        assert oracle.claims("Aspirin inhibits COX-1. It thins blood.") == ["Aspirin inhibits COX-1.", "It thins blood."]

    def test_unknown_format_and_label_are_config_errors(self, tmp_path: Path) -> None:
        """A file of neither format, or a label 'maybe', raises ConfigError naming the file."""
        odd = tmp_path / "odd.jsonl"
        odd.write_text('{"foo": 1}\n', encoding="utf-8")
        with pytest.raises(ConfigError, match="odd.jsonl:1"):
            Oracle.load([odd])
        bad = tmp_path / "bad.jsonl"
        bad.write_text('{"question": "q", "response": "r", "claims": [{"text": "t", "label": "maybe"}]}\n')
        with pytest.raises(ConfigError, match="bad.jsonl:1"):
            Oracle.load([bad])

    async def test_server_answers_from_dahl_oracle(
        self, tmp_path: Path, make_server: MakeServer, session: aiohttp.ClientSession
    ) -> None:
        """Oracle mode answers known claims, 'Unknown' for others, and oracle splits; /stats shows 2 conflicts."""
        config = MockConfig(oracle_files=(write_dahl_oracle(tmp_path / "o.jsonl"),))
        server = await make_server(config)
        _, _, text = await post(session, server.url, check_body("It thins blood.", "What does aspirin do?"))
        assert content_of(text).splitlines()[0] == "Unsupported"
        _, _, text = await post(session, server.url, check_body("Never seen.", "What does aspirin do?"))
        assert content_of(text).splitlines()[0] == "Unknown"
        _, _, text = await post(session, server.url, split_body("Aspirin inhibits COX-1.", json_mode=True))
        assert json.loads(content_of(text)) == {"claims": ["Aspirin  inhibits COX-1.", "Aspirin inhibits COX-1."]}
        assert server.stats()["oracle_conflicts"] == 2

    def test_factscore_labels(self, shared_data: Path) -> None:
        """FActScore human labels come back; the three files hold 7 conflicting (question, claim) pairs."""
        oracle = Oracle.load([shared_data / "factscore" / "labeled" / name for name in FACTSCORE_FILES])
        sheehan = "Question: Tell me a bio of Doug Sheehan."
        assert oracle.conflicts == 7
        assert oracle.label(sheehan, "Doug Sheehan is an American.") == "supported"
        assert oracle.label(sheehan, "Sheehan appeared in The Rockford Files.") == "unsupported"
        assert oracle.label(sheehan, "The Rockford Files was a popular television show.") == "irrelevant"
        # is-relevant=false sentence: its model atomic fact counts as irrelevant
        assert oracle.label("Question: Tell me a bio of Scientist (musician).", "The Professor is a title.") == "irrelevant"
        # ChatGPT supported vs InstructGPT unsupported: the tie keeps the first file's label
        assert oracle.label("Question: Tell me a bio of Kang Daniel.", "Kang Daniel is a dancer.") == "supported"
        # 2 supported vs 1 irrelevant
        assert oracle.label("Question: Tell me a bio of Lauren London.", "ATL was released in 2006.") == "supported"

    def test_factscore_split_lists_every_human_fact(self, shared_data: Path) -> None:
        """ChatGPT's Doug Sheehan bio splits into its 28 human atomic facts, in order."""
        path = shared_data / "factscore" / "labeled" / "ChatGPT.jsonl"
        row = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
        claims = Oracle.load([path]).claims(row["output"])
        assert claims is not None and len(claims) == 28
        assert (claims[0], claims[-1]) == ("Doug Sheehan is an American.", "Sheehan has two children.")


class TestCommandLine:
    @pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
    async def test_ready_line_stats_and_final_json(
        self, signum: int, tmp_path: Path, session: aiohttp.ClientSession
    ) -> None:
        """Port 0 prints 'ready URL'; /stats counts; the signal prints the final stats JSON line."""
        oracle = write_dahl_oracle(tmp_path / "o.jsonl")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.mockserver", "--port", "0", "--oracle", str(oracle),
            "--rpm", "600", "--window-s", "1", "--latency-ms", "1", "--seed", "3",
            cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
            assert line.startswith("ready http://127.0.0.1:")
            root = line.split()[1]
            assert int(root.rsplit(":", 1)[1]) > 0
            status, _, text = await post(session, root + "/v1", check_body("Aspirin inhibits COX-1.", "What does aspirin do?"))
            assert status == 200 and content_of(text).startswith("Supported")
            async with session.get(f"{root}/stats") as reply:
                stats = await reply.json()
            assert (stats["requests"], stats["check"], stats["oracle_conflicts"]) == (1, 1, 2)
            proc.send_signal(signum)
            out, err = await asyncio.wait_for(proc.communicate(), 20)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0
        final = json.loads(out.decode().strip().splitlines()[-1])
        assert final["status"] == {"200": 1} and final["requests"] == 1
        assert "2 conflicts" in err.decode()

    async def test_bad_fault_exits_2(self) -> None:
        """An unknown fault kind exits with status 2 and an error on stderr."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.mockserver", "--port", "0", "--fault", "teapot=0.1",
            cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 20)
        assert proc.returncode == 2 and b"teapot" in err and b"ready" not in out
