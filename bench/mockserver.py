"""Mock OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Command line::

    python -m bench.mockserver --port PORT [--oracle INPUT_FILE ...] [--latency-ms MS]
        [--latency lognormal:MEDIAN_MS[:SIGMA]] [--rpm N] [--tpm N] [--window-s S]
        [--fault KIND=RATE ...] [--seed N] [--echo-auth] [--oracle-answers [MODEL=]FILE ...] [--finish-length]
        [--llama] [--slots N] [--n-ctx N] [--models NAME ...]

prints ``ready http://127.0.0.1:PORT`` (flushed) once listening, serves
``POST /v1/chat/completions`` (and ``/chat/completions``), Anthropic's ``POST /v1/messages``
(:mod:`bench.mock_anthropic`), ``POST /v1/completions``
(generation, :mod:`bench.mock_generate`), NCBI's ``GET /entrez/eutils/efetch.fcgi``
(:func:`bench.mock_questions.efetch_xml`), ``GET /v1/models`` (:mod:`bench.mock_local`), ``GET /stats`` and
``POST /stats/reset``, and prints the final stats as one JSON line on SIGINT/SIGTERM.

In-process use (tests)::

    server = await start_mock(MockConfig(rpm=120, window_s=1))
    ...  # talk to server.url
    await server.close()
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import math
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from bench.mock_config import FAULT_KINDS, Latency, MockConfig, parse_fault, parse_latency
from bench import mock_batches, mock_generate, mock_local
from bench.mock_anthropic import serve_messages
from bench.mock_oracle import Oracle
from bench.mock_questions import efetch_xml
from bench.mock_reply import OFFFORMAT_TEXT, REFUSAL_TEXT, estimate_tokens, parse_prompt, reply_content
from bench.mock_stats import MockStats
from bench.mock_window import RateWindow, format_seconds
from bench.mock_wire import completion_bytes, decode_body
from dahl.errors import ConfigError

__all__ = ["STATE", "MockConfig", "MockServer", "config_from_args", "create_app", "main", "start_mock"]

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"


@dataclass
class _State:
    """Mutable per-app state; one instance per application."""

    config: MockConfig
    oracle: Oracle | None
    window: RateWindow | None
    stats: MockStats
    latency_rng: random.Random
    fault_rng: random.Random
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    ids: itertools.count[int] = field(default_factory=itertools.count)
    #: ``config.fault_rates()`` computed once (the config is frozen), read per request.
    fault_rates: dict[str, float] = field(default_factory=dict)
    answers: mock_generate.AnswerOracle | None = None
    #: ``config.slots`` requests computed at once (None: no limit).
    slots: asyncio.Semaphore | None = None


STATE = web.AppKey("dahl_mock_state", _State)


def _error(
    status: int, message: str, kind: str, code: str | None, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


async def _pause(state: _State, seconds: float) -> None:
    """Sleep ``seconds`` unless the server starts closing first (keeps shutdown prompt)."""
    if seconds <= 0:
        return
    try:
        async with asyncio.timeout(seconds):
            await state.closing.wait()
    except TimeoutError:
        pass


def _draw_fault(state: _State) -> str | None:
    rates = state.fault_rates
    if not rates:
        return None
    draw = state.fault_rng.random()
    total = 0.0
    for kind in FAULT_KINDS:
        total += rates.get(kind, 0.0)
        if draw < total:
            return kind
    return None




async def _chat(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    stats = state.stats
    stats.enter()
    try:
        if state.slots is None:
            response = await _serve(request, state)
        else:
            async with state.slots:  # a queue, never a 429 or 503
                response = await _serve(request, state)
        if response is not None:
            stats.status[str(response.status)] += 1
            return response
        # Connection reset fault: the transport is gone; nothing can be sent.
        raise asyncio.CancelledError
    finally:
        stats.leave()


async def _serve(request: web.Request, state: _State) -> web.Response | None:
    stats = state.stats
    config = state.config
    try:
        body = decode_body(await request.read())
    except (ValueError, UnicodeDecodeError):
        stats.kinds["other"] += 1
        if config.llama:
            return web.Response(status=500, text="Internal Server Error")
        return _error(400, "We could not parse the JSON body of your request.", "invalid_request_error", None)
    rejected = mock_local.rejection(body) if config.llama else None
    if rejected is not None:
        stats.kinds["other"] += 1
        return rejected
    if not isinstance(body, dict):
        stats.kinds["other"] += 1
        return _error(400, "The request body must be a JSON object.", "invalid_request_error", None)
    completion = request.path.endswith("/completions") and not request.path.endswith("chat/completions")
    prompt = mock_generate.completion_prompt(body) if completion else parse_prompt(body)
    stats.kinds[prompt.kind] += 1
    too_long = mock_local.context_exceeded(prompt.prompt_tokens, config.n_ctx)
    if too_long is not None:
        return too_long
    headers: dict[str, str] = {}
    if state.window is not None:
        cost = prompt.prompt_tokens + prompt.max_tokens
        admission = state.window.admit(cost)
        headers = admission.headers
        if not admission.admitted:
            assert admission.reason is not None
            stats.rate_limited[admission.reason] += 1
            if admission.too_large:
                limit = state.window.headers().get("x-ratelimit-limit-tokens", "?")
                message = f"Request too large for {prompt.model}: Limit {limit}, Requested {cost}."
                return _error(429, message, "tokens", "rate_limit_exceeded", headers)
            headers["Retry-After"] = format_seconds(max(admission.reset_s, 0.001))
            headers["retry-after-ms"] = str(max(math.ceil(admission.reset_s * 1000), 1))
            message = (
                f"Rate limit reached for {prompt.model} on {admission.reason} per window: "
                f"please try again in {headers['Retry-After']}s."
            )
            return _error(429, message, admission.reason, "rate_limit_exceeded", headers)
        stats.admitted_tokens += cost
    fault = _draw_fault(state)
    if fault is not None:
        stats.faults[fault] += 1
    if fault == "quota":
        stats.rate_limited["quota"] += 1
        message = "You exceeded your current quota, please check your plan and billing details."
        return _error(429, message, "insufficient_quota", "insufficient_quota", headers)
    if fault == "timeout":
        await _pause(state, state.config.timeout_fault_s)
        return _error(504, "Mock timeout fault elapsed.", "server_error", None, headers)
    await _pause(state, state.config.latency.sample_s(state.latency_rng))
    if fault == "reset":
        if request.transport is not None:
            request.transport.abort()
        return None
    if fault in ("500", "503", "529"):
        status = int(fault)
        return _error(status, f"Mock fault {status}.", "server_error", None, headers)
    if fault == "401":
        message = "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
        return _error(401, message, "invalid_request_error", "invalid_api_key", headers)
    if fault == "400":
        return _error(400, "Mock fault 400: unsupported parameter.", "invalid_request_error", None, headers)
    if fault == "refusal":
        refused = {"id": f"chatcmpl-mock-{next(state.ids)}", "object": "chat.completion", "created": int(time.time()),
                   "model": prompt.model, "choices": [{"index": 0, "message": {
                       "role": "assistant", "content": None, "refusal": REFUSAL_TEXT}, "finish_reason": "stop"}],
                   "usage": {"prompt_tokens": prompt.prompt_tokens, "completion_tokens": 9,
                             "total_tokens": prompt.prompt_tokens + 9}}
        return web.json_response(refused, headers=headers)
    finish = "stop"
    if fault == "offformat":
        content = OFFFORMAT_TEXT
    elif prompt.kind == "generate" or (prompt.kind == "other" and not prompt.json_mode):
        question = prompt.question if prompt.question is not None else mock_generate.chat_question(body)
        temperature, seed = mock_generate.sampling_of(body)
        text = mock_generate.generated_text(question, prompt.model, state.answers, temperature=temperature, seed=seed)
        content, finish = mock_generate.truncate(text, prompt.max_tokens, state.config.finish_length)
    else:
        content = reply_content(prompt, state.oracle)
    cut = mock_local.cut_to_context(content, prompt.prompt_tokens, config.n_ctx)
    if cut is not None:
        content, finish = cut, "length"
    if state.config.echo_auth:
        content = f"{content}\nAuthorization: {request.headers.get('Authorization', '')}"
        content += "".join(f"\n{k.lower()}: {v}" for k, v in request.headers.items()
                           if k.lower() == "api-key" or k.lower().startswith("x-"))
    completion_tokens = estimate_tokens(len(content))
    if completion:
        raw = mock_generate.completion_text_bytes(f"cmpl-mock-{next(state.ids)}", int(time.time()), prompt.model,
                                                  content, finish, prompt.prompt_tokens, completion_tokens)
    else:
        raw = completion_bytes(
            f"chatcmpl-mock-{next(state.ids)}",
            int(time.time()),
            prompt.model,
            content,
            prompt.prompt_tokens,
            completion_tokens,
            finish,
            prompt.prompt_tokens // 2 if state.config.cached_prompt else None,
        )
    stats.prompt_tokens += prompt.prompt_tokens
    stats.completion_tokens += completion_tokens
    if fault == "malformed":
        raw = raw[: len(raw) // 2]
    return web.Response(body=raw, content_type="application/json", headers=headers)


async def _messages(request: web.Request) -> web.StreamResponse:
    """Anthropic ``POST /v1/messages`` (:func:`bench.mock_anthropic.serve_messages`)."""
    state = request.app[STATE]
    state.stats.enter()
    try:
        response = await serve_messages(request, state, pause=_pause, draw_fault=_draw_fault)
        if response is None:
            raise asyncio.CancelledError  # connection reset fault
        state.stats.status[str(response.status)] += 1
        return response
    finally:
        state.stats.leave()


async def _efetch(request: web.Request) -> web.Response:
    """NCBI E-utilities ``efetch`` for ``db=pmc`` (bench.mock_questions.efetch_xml's rule)."""
    request.app[STATE].stats.kinds["efetch"] += 1
    return web.Response(body=efetch_xml(request.query.get("id", "")), content_type="text/xml")


async def _models(request: web.Request) -> web.Response:
    return mock_local.models_handler(request.app[STATE].config.models)


async def _get_stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE].stats.as_dict())


async def _reset_stats(request: web.Request) -> web.Response:
    stats = request.app[STATE].stats
    stats.reset()
    return web.json_response(stats.as_dict())


def create_app(
    config: MockConfig,
    *,
    oracle: Oracle | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> web.Application:
    """Build the aiohttp application of the mock server.

    Args:
        config: latency, limits, faults and seed.
        oracle: labels and claim lists; None answers with the deterministic defaults.
            ``config.oracle_files`` is not read here (see :func:`start_mock`).
        clock: monotonic clock in seconds driving the rate-limit windows.

    Returns:
        The application; its state is ``app[STATE]``.
    """
    app = web.Application(client_max_size=mock_batches.MAX_BODY_BYTES)  # batch files: up to 256 MB
    window = None
    if config.rpm is not None or config.tpm is not None:
        window = RateWindow(config.requests_per_window, config.tokens_per_window, config.window_s, clock)
    app[STATE] = _State(
        config=config,
        oracle=oracle,
        window=window,
        stats=MockStats(oracle.conflicts if oracle is not None else 0),
        latency_rng=random.Random(f"{config.seed}:latency"),
        fault_rng=random.Random(f"{config.seed}:faults"),
        fault_rates=config.fault_rates(),
        answers=mock_generate.AnswerOracle.load_all(config.oracle_answers, config.model_answers)
        if config.oracle_answers or config.model_answers else None,
        slots=asyncio.Semaphore(config.slots) if config.slots is not None else None,
    )
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/chat/completions", _chat)
    app.router.add_post("/v1/messages", _messages)
    app.router.add_get("/entrez/eutils/efetch.fcgi", _efetch)
    app.router.add_post("/v1/completions", _chat)
    app.router.add_post("/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/models", _models)
    app.router.add_get("/stats", _get_stats)
    app.router.add_post("/stats/reset", _reset_stats)
    mock_batches.register(app, config.batches, oracle, clock)
    return app


class MockServer:
    """A running mock server; create with :func:`start_mock`.

    Attributes:
        url: base URL including ``/v1``, e.g. ``http://127.0.0.1:41234/v1``.
        port: the TCP port it listens on.
        app: the aiohttp application.
    """

    def __init__(self, app: web.Application, runner: web.AppRunner, port: int) -> None:
        self.app = app
        self._runner = runner
        self.port = port
        self.url = f"http://{HOST}:{port}/v1"

    @property
    def root(self) -> str:
        """Base URL without ``/v1`` (where ``/stats`` lives)."""
        return f"http://{HOST}:{self.port}"

    def stats(self) -> dict[str, Any]:
        """Snapshot of the counters, the same JSON as ``GET /stats``."""
        return self.app[STATE].stats.as_dict()

    def reset_stats(self) -> None:
        """Zero the counters, like ``POST /stats/reset``."""
        self.app[STATE].stats.reset()

    async def close(self) -> None:
        """Wake every sleeping handler, stop listening and drop connections (bounded, ~1 s max)."""
        self.app[STATE].closing.set()
        await self._runner.cleanup()

    async def __aenter__(self) -> MockServer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def start_mock(
    config: MockConfig,
    *,
    oracle: Oracle | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> MockServer:
    """Start the mock server on 127.0.0.1 in the running event loop.

    Args:
        config: server configuration; ``config.oracle_files`` are loaded unless ``oracle`` is given.
        oracle: a prebuilt oracle (overrides ``config.oracle_files``).
        clock: monotonic clock in seconds for the rate-limit windows.

    Returns:
        The running server; call ``await server.close()`` when done.

    Raises:
        ConfigError: an oracle file cannot be read.
        OSError: the port cannot be bound.
    """
    if oracle is None and config.oracle_files:
        oracle = Oracle.load(config.oracle_files)
    app = create_app(config, oracle=oracle, clock=clock)
    # handler_cancellation: a client that hangs up cancels its handler (timeout faults).
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, HOST, config.port, backlog=4096)  # 1,000+ clients connect at once
    await site.start()
    port = int(runner.addresses[0][1])
    return MockServer(app, runner, port)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mockserver", description="Mock OpenAI-compatible server on 127.0.0.1."
    )
    parser.add_argument("--port", type=int, required=True, help="TCP port; 0 picks a free one")
    parser.add_argument("--oracle", nargs="+", action="extend", default=[], type=Path, metavar="INPUT_FILE")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--latency-ms", type=float, help="fixed latency in milliseconds")
    group.add_argument("--latency", help="lognormal:MEDIAN_MS[:SIGMA] (sigma 0.5 by default)")
    parser.add_argument("--rpm", type=int, help="requests per minute")
    parser.add_argument("--tpm", type=int, help="tokens per minute (prompt estimate + max_tokens)")
    parser.add_argument("--window-s", type=float, default=60.0, help="rate-limit window, seconds")
    parser.add_argument("--fault", nargs="+", action="extend", default=[], metavar="KIND=RATE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--echo-auth", action="store_true",
                        help="append the auth headers (Authorization, api-key, x-*) to replies")
    parser.add_argument("--oracle-answers", action="append", default=[], metavar="[MODEL=]FILE",
                        help="JSONL {question, response}: answers to generation requests; MODEL=FILE "
                             "(repeatable) answers that model's requests only")
    parser.add_argument("--finish-length", action="store_true",
                        help='cut generated replies in their last sentence, finish_reason "length"')
    parser.add_argument("--cached-prompt", action="store_true",
                        help="report half of every prompt's tokens as read from the provider's prompt cache")
    parser.add_argument("--llama", action="store_true",
                        help="answer a json_schema reply format and a non-JSON body with llama.cpp's HTTP 500")
    parser.add_argument("--slots", type=int, help="requests computed at once; the rest queue (no 429/503)")
    parser.add_argument("--n-ctx", type=int, help="context window, tokens: longer prompts refused, replies cut")
    parser.add_argument("--models", nargs="+", default=[], metavar="NAME", help="names GET /v1/models lists")
    mock_batches.add_arguments(parser)
    return parser


def _oracle_answers(values: Sequence[str]) -> tuple[Path | None, list[tuple[str, Path]]]:
    """Split ``--oracle-answers`` values into the file for every model and ``(model, file)`` pairs.

    ``MODEL=FILE`` names a model unless the whole value is an existing file (a path may hold ``=``).

    Raises:
        ConfigError: two files for every model.
    """
    general: Path | None = None
    by_model: list[tuple[str, Path]] = []
    for value in values:
        model, sep, file = value.partition("=")
        if sep and model and file and not Path(value).is_file():
            by_model.append((model, Path(file)))
        elif general is not None:
            raise ConfigError("--oracle-answers: one FILE for every model (name others MODEL=FILE)")
        else:
            general = Path(value)
    return general, by_model


def config_from_args(argv: Sequence[str] | None = None) -> MockConfig:
    """Build a :class:`MockConfig` from command-line arguments.

    Raises:
        ConfigError: an invalid value (argparse itself exits with status 2 on bad syntax).
    """
    args = _parser().parse_args(argv)
    if args.latency is not None:
        latency = parse_latency(args.latency)
    elif args.latency_ms is not None:
        latency = Latency(median_ms=args.latency_ms)
    else:
        latency = Latency()
    general, by_model = _oracle_answers(args.oracle_answers)
    return MockConfig(
        port=args.port,
        oracle_files=tuple(args.oracle),
        latency=latency,
        rpm=args.rpm,
        tpm=args.tpm,
        window_s=args.window_s,
        faults=tuple(parse_fault(spec) for spec in args.fault),
        seed=args.seed,
        echo_auth=args.echo_auth,
        oracle_answers=general,
        model_answers=tuple(by_model),
        finish_length=args.finish_length,
        cached_prompt=args.cached_prompt,
        llama=args.llama,
        slots=args.slots,
        n_ctx=args.n_ctx,
        models=tuple(args.models),
        batches=mock_batches.config_from(args),
    )


async def _run(config: MockConfig) -> dict[str, Any]:
    server = await start_mock(config)
    state = server.app[STATE]
    if state.oracle is not None:
        logger.info(
            "oracle: %d labelled (question, claim) pairs, %d answers, %d conflicts",
            len(state.oracle),
            state.oracle.answers,
            state.oracle.conflicts,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    sys.stdout.write(f"ready {server.root}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        final = server.stats()
        await server.close()
    return final


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status (0, or 2 on bad options)."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    try:
        config = config_from_args(argv)
        final = asyncio.run(_run(config))
    except ConfigError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(final) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
