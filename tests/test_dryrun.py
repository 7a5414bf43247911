"""``--dry-run`` counts calls and tokens and bounds the time from the limits, calling nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dahl import AdapterSettings, EndpointConfig, ScoreConfig
from dahl.adapters._bodies import check_request_body, estimate_tokens
from dahl.run._dryrun import dry_run


def write(path: Path) -> None:
    rows = [
        {"id": "a", "question": "Q1?", "response": "A. B.", "claims": [{"text": "A."}, {"text": "B."}]},
        {"id": "b", "question": "Q2?", "response": "C.", "claims": [{"text": "C."}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


class TestDryRun:
    def test_given_claims_counted_exactly_and_bounded_by_rpm(self, tmp_path: Path) -> None:
        """3 given claims at 2 requests/min: 3 calls, 90 s bound, tokens from the real request bodies."""
        write(tmp_path / "a.jsonl")
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="DAHL_UNSET_KEY", rpm=2)
        report = dry_run(ScoreConfig(
            inputs=(tmp_path / "a.jsonl",), out_dir=tmp_path / "o",
            adapters=AdapterSettings(splitter="given", checker="openai", check_endpoint=cfg),
        ))
        expected_tokens = sum(
            estimate_tokens(check_request_body(cfg, q, c)) for q, c in (("Q1?", "A."), ("Q1?", "B."), ("Q2?", "C."))
        )
        assert (report.answers, report.claims, report.claims_exact) == (2, 3, True)
        (stage,) = report.stages
        assert (stage.stage, stage.calls) == ("check", 3)
        assert stage.tokens_upper == pytest.approx(expected_tokens, abs=1)
        assert report.time_bound_s == pytest.approx(90.0)
        assert not (tmp_path / "o").exists()

    def test_offline_adapters_need_no_calls(self, tmp_path: Path) -> None:
        """With the fake Checker there are no stages and no time bound."""
        write(tmp_path / "a.jsonl")
        report = dry_run(ScoreConfig(inputs=(tmp_path / "a.jsonl",), out_dir=tmp_path / "o",
                                     adapters=AdapterSettings(splitter="given", checker="fake")))
        assert (report.stages, report.time_bound_s) == ((), None)


class TestDryRunScale:
    def test_past_the_sample_without_a_cache_the_count_is_scaled(self, tmp_path: Path) -> None:
        """250 answers of 3 distinct rule claims, no cache: 200 are split (600 checks), the other 50
        scaled from them (150 more, marked estimated); 750 in all, as a real run would send."""
        from dahl.run._dryrun import SAMPLE

        assert SAMPLE == 200
        rows = [{"id": f"a{i}", "question": f"What does drug {i} do?",
                 "response": f"Drug {i} lowers blood pressure. It was approved in {1900 + i}. It costs {i} dollars."}
                for i in range(250)]
        (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="gpt-4o-mini", api_key_env="DAHL_UNSET_KEY")
        report = dry_run(ScoreConfig(
            inputs=(tmp_path / "a.jsonl",), out_dir=tmp_path / "o", use_cache=False,
            adapters=AdapterSettings(splitter="rules", checker="openai", check_endpoint=cfg),
        ))
        (stage,) = report.stages
        assert (report.answers, report.claims, report.claims_exact) == (250, 750, False)
        assert (stage.calls, stage.estimated_calls, stage.cached, report.cache) == (750, 150, 0, "off")
        assert stage.usd == pytest.approx((stage.prompt_tokens * 0.15 + 750 * 40 * 0.60) / 1e6)
        assert stage.usd_upper == pytest.approx((stage.prompt_tokens * 0.15 + 750 * 128 * 0.60) / 1e6)
