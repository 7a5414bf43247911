"""OpenAI adapters against the bench mock server (bench/mockserver.py) and the engine lane."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dahl.adapters._http import make_session
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.config import EndpointConfig
from dahl.records import Answer, Claim, Label

mockserver = pytest.importorskip("bench.mockserver", reason="bench/mockserver.py not available")
lane_module = pytest.importorskip("dahl.lanes._lane", reason="dahl/engine/lane.py not available")

ANSWER = Answer(
    id="a1",
    question="Tell me about metformin.",
    response="Metformin treats type 2 diabetes. Metformin was approved in 1994. It is taken orally.",
)


async def started(**config: object) -> AsyncIterator[object]:
    server = await mockserver.start_mock(mockserver.MockConfig(**config))
    try:
        yield server
    finally:
        await server.close()


def endpoint(url: str, **kwargs: object) -> EndpointConfig:
    return EndpointConfig(base_url=url, model="mock", api_key_env="", **kwargs)  # type: ignore[arg-type]


class TestAgainstMock:
    async def test_split_then_check_text_and_json(self) -> None:
        """Split gives one claim per sentence in text and JSON mode, and each claim gets a real label."""
        async for server in started():
            session = make_session(8, 5.0)
            try:
                lane = lane_module.Lane("mock", lane_module.LaneLimits())
                for fmt in ("text", "json_object"):
                    cfg = endpoint(server.url, response_format=fmt)
                    claims = await OpenAISplitter(cfg, session, lane).split(ANSWER)
                    assert [c.text for c in claims] == [
                        "Metformin treats type 2 diabetes.",
                        "Metformin was approved in 1994.",
                        "It is taken orally.",
                    ]
                    verdict = await OpenAIChecker(cfg, session, lane).check(claims[0], ANSWER)
                    assert verdict.label in (Label.SUPPORTED, Label.UNSUPPORTED, Label.UNKNOWN)
                stats = server.stats()
                assert (stats["split"], stats["check"]) == (2, 2)
            finally:
                await session.close()

    async def test_offformat_reasked_once(self) -> None:
        """With every reply off-format, a check costs exactly 2 requests and ends as label error."""
        async for server in started(faults=(("offformat", 1.0),)):
            session = make_session(8, 5.0)
            try:
                lane = lane_module.Lane("mock", lane_module.LaneLimits())
                claim = Claim(text="Metformin treats type 2 diabetes.", index=0)
                verdict = await OpenAIChecker(endpoint(server.url), session, lane).check(claim, ANSWER)
                assert verdict.label == Label.ERROR
                assert verdict.error is not None and verdict.error.startswith("OutputParseError")
                stats = server.stats()
                assert (stats["requests"], stats["check"]) == (2, 2)
            finally:
                await session.close()
