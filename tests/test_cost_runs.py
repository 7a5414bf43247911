"""Money end to end against the loopback mock: summary.json's cost block, --max-cost stop and resume,
and the dry run counting only what the cache cannot answer.

``mocks`` is tests/conftest.py's MockServers fixture; the mock reports usage (prompt = characters / 4,
completion = reply characters / 4) and counts requests and tokens in ``/stats``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl import AdapterSettings, CostCapReached, EndpointConfig, ScoreConfig, score
from dahl.cli import main
from dahl.exit_status import ExitStatus

#: gpt-4o-mini in the shipped table: USD per million input / output tokens.
IN, OUT = 0.15, 0.60


def write_answers(path: Path, n: int) -> None:
    """``n`` (even) answers of three sentences, two per question; the two answers to a question share their
    first sentence (one check for both), so there are ``n / 2 + 2 n`` distinct checks."""
    with path.open("w") as f:
        for i in range(n):
            response = f"Drug {i // 2} lowers blood pressure. It was approved in {1990 + i}. It is taken {i} times."
            f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i // 2} do?", "response": response})
                    + "\n")


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["score", *args, "--no-progress"], env=env)
    return result.exit_code, result.output


def http(url: str, splitter: str = "openai", model: str = "gpt-4o-mini") -> list[str]:
    return ["--splitter", splitter, "--checker", "openai", "--base-url", url, "--model", model, "--api-key-env", "",
            "--max-in-flight", "4"]


def money(tokens: dict[str, int], in_usd: float = IN, out_usd: float = OUT) -> float:
    """USD of the mock's token counts at the given prices, by hand."""
    return (tokens["prompt"] * in_usd + tokens["completion"] * out_usd) / 1e6


class TestMoneyInSummary:
    def test_cost_block_equals_the_servers_tokens_times_the_table(self, tmp_path: Path, mocks: Any) -> None:
        """Per stage and in all, summary.json's tokens are the mock's and its USD = tokens x $0.15 / $0.60 per M."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 12)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url))
        assert code == 0, text
        stats = mocks.stats(url)
        cost = json.loads((tmp_path / "out" / "summary.json").read_text())["run"]["cost"]
        split, check = cost["lanes"]["split"], cost["lanes"]["check"]
        assert (split["calls"], check["calls"]) == (stats["split"], stats["check"]) == (12, 6 + 24)
        assert split["input_tokens"] + check["input_tokens"] == stats["tokens"]["prompt"]
        assert split["output_tokens"] + check["output_tokens"] == stats["tokens"]["completion"]
        for lane in (split, check):
            assert lane["usd"] == pytest.approx((lane["input_tokens"] * IN + lane["output_tokens"] * OUT) / 1e6,
                                                rel=1e-12)
            assert lane["price"]["source"] == "https://openai.com/api/pricing/"
        assert cost["usd"] == pytest.approx(money(stats["tokens"]), rel=1e-12)
        assert (cost["price_table_date"], cost["max_cost_usd"], cost["batch"]) == ("2025-05-01", None, False)
        assert f"money: ${cost['usd']:.6f} (split ${split['usd']:.6f}, check ${check['usd']:.6f}; prices of " \
               "2025-05-01)" in text  # amounts under a cent: 6 decimals

    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_cached_prompt_tokens_are_priced_at_the_cached_rate(self, tmp_path: Path, mocks: Any,
                                                                provider: str) -> None:
        """Half of each prompt read from the cache (mock --cached-prompt): those tokens at the cached rate, the HTTP line names them."""
        url = mocks.start("--cached-prompt")
        write_answers(tmp_path / "a.jsonl", 4)
        model, (in_usd, cached_usd, out_usd) = (
            ("gpt-4o-mini", (0.15, 0.075, 0.60)) if provider == "openai" else ("claude-3-5-haiku", (0.80, 0.08, 4.00)))
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url, model=model),
                         "--provider", provider, "--api-key-env", "DAHL_TEST_CACHE_KEY", env={"DAHL_TEST_CACHE_KEY": "k"})
        assert code == 0, text
        stats = mocks.stats(url)
        lanes = json.loads((tmp_path / "out" / "summary.json").read_text())["run"]["cost"]["lanes"]
        assert sum(lane["input_tokens"] for lane in lanes.values()) == stats["tokens"]["prompt"]
        cached = sum(lane["cached_tokens"] for lane in lanes.values())
        assert 0 < cached <= stats["tokens"]["prompt"] // 2
        for lane in lanes.values():
            assert lane["cache_write_tokens"] == 0
            assert lane["usd"] == pytest.approx(((lane["input_tokens"] - lane["cached_tokens"]) * in_usd
                                                 + lane["cached_tokens"] * cached_usd
                                                 + lane["output_tokens"] * out_usd) / 1e6, rel=1e-12)
            assert lane["price"]["cached_input_usd_per_mtok"] == cached_usd
        assert f"({cached:,} prompt tokens read from the provider's cache, 0 written to it)" in text

    def test_price_option_prices_an_unlisted_model(self, tmp_path: Path, mocks: Any) -> None:
        """--price mock=2,8: the money is the mock's tokens x $2 / $8 per M; without it, null."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 4)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url, model="mock"),
                         "--price", "mock=2,8")
        assert code == 0, text
        cost = json.loads((tmp_path / "out" / "summary.json").read_text())["run"]["cost"]
        assert cost["usd"] == pytest.approx(money(mocks.stats(url)["tokens"], 2.0, 8.0), rel=1e-12)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out2"), *http(url, model="mock"),
                         "--no-cache")
        cost = json.loads((tmp_path / "out2" / "summary.json").read_text())["run"]["cost"]
        assert code == 0 and cost["usd"] is None and cost["lanes"]["check"]["usd"] is None
        assert cost["lanes"]["check"]["input_tokens"] > 0 and "money: $? (split $?, check $?" in text

    def test_max_cost_with_an_unknown_price_fails_before_any_call(self, tmp_path: Path, mocks: Any) -> None:
        """--max-cost and a model without a price: exit 2 naming the model and --price; the mock saw nothing."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 4)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url, model="mock"),
                         "--max-cost", "1")
        assert code == ExitStatus.USAGE, text
        assert "--max-cost needs the price of model 'mock'" in text and "--price mock=INPUT,OUTPUT" in text
        assert mocks.stats(url)["requests"] == 0


class TestMaxCost:
    def test_stops_within_one_request_of_the_cap_then_resumes_without_redoing(self, tmp_path: Path,
                                                                               mocks: Any) -> None:
        """A $0.002 cap stops with spent <= cap < spent + next bound (spent = the mock's tokens x prices);
        the dry run then counts the splits the resume makes; the resume sends exactly the rest of a full run."""
        url = mocks.start()
        answers = tmp_path / "a.jsonl"
        write_answers(answers, 30)
        full = 30 + 15 + 60  # splits, one shared claim per question, two distinct claims per answer
        cfg = EndpointConfig(base_url=url, model="gpt-4o-mini", api_key_env="", max_in_flight=4)
        config = ScoreConfig(inputs=(answers,), out_dir=tmp_path / "out", max_cost_usd=0.002,
                             adapters=AdapterSettings(splitter="openai", checker="openai", split_endpoint=cfg,
                                                      check_endpoint=cfg))
        with pytest.raises(CostCapReached) as info:
            score(config)
        stats = mocks.stats(url)
        stop = info.value
        assert stop.spent_usd == pytest.approx(money(stats["tokens"]), rel=1e-9)
        assert stop.spent_usd <= 0.002 < stop.spent_usd + stop.next_usd
        first, first_splits = stats["requests"], stats["split"]
        assert 0 < first < full

        code, text = run(str(answers), "-o", str(tmp_path / "out"), *http(url), "--dry-run")
        assert code == 0, text
        dry_splits = int(re.search(r"^split: ([\d,]+) requests", text, re.M).group(1))  # type: ignore[union-attr]
        assert mocks.stats(url)["requests"] == first  # the dry run sent nothing

        code, text = run(str(answers), "-o", str(tmp_path / "out"), *http(url), "--max-cost", "1")
        assert code == 0, text
        stats = mocks.stats(url)
        assert stats["requests"] == full  # nothing done before the stop was sent again
        assert stats["split"] - first_splits == dry_splits

    def test_cli_stop_is_exit_3_with_the_cap_in_the_message(self, tmp_path: Path, mocks: Any) -> None:
        """dahl score --max-cost: exit 3, one line naming the cap and the money spent, answers kept."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 30)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url), "--max-cost", "0.002")
        assert code == ExitStatus.QUOTA, text
        assert re.search(r"stopped: --max-cost \$0\.002 reached: this run spent \$0\.00\d{4}, and its next request "
                         r"could cost up to \$0\.\d{6}\. Finished answers are in .*; re-run the same command to "
                         r"continue\.", text.replace("\n", ""))
        assert "Traceback" not in text


class TestDryRun:
    def test_finished_folder_announces_zero_calls_and_no_money(self, tmp_path: Path, mocks: Any) -> None:
        """After a finished run, --dry-run says 0 calls and $0, and sends nothing."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 10)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url))
        assert code == 0, text
        sent = mocks.stats(url)["requests"]
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url), "--dry-run")
        assert code == 0, text
        assert "split: 0 requests" in text and "(10 answered by the cache)" in text
        assert "check: 0 requests" in text and "(30 answered by the cache)" in text
        assert "calls: 0; money: ~$0 estimated, at most $0 (prices of 2025-05-01)" in text
        assert mocks.stats(url)["requests"] == sent

    def test_fresh_input_count_is_what_a_real_run_sends(self, tmp_path: Path, mocks: Any) -> None:
        """Rule-split claims, one shared by the two answers of each question: the dry run's check calls and
        prompt tokens are the real run's (25 = 5 shared + 10 x 2 distinct), its money the tokens x the table."""
        url = mocks.start()
        write_answers(tmp_path / "a.jsonl", 10)
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url, splitter="rules"),
                         "--dry-run")
        assert code == 0, text
        assert "check: 25 requests" in text and "(5 answered by the cache)" in text
        prompt = int(re.search(r"tokens ~[\d,]+ \(([\d,]+) prompt", text).group(1).replace(",", ""))  # type: ignore[union-attr]
        estimate = (prompt * IN + 25 * 40 * OUT) / 1e6  # 40 = the default completion of a check
        upper = (prompt * IN + 25 * 128 * OUT) / 1e6
        assert f"calls: 25; money: ~${estimate:.6f} estimated, at most ${upper:.6f}" in text
        code, text = run(str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "out"), *http(url, splitter="rules"))
        assert code == 0, text
        stats = mocks.stats(url)
        assert (stats["requests"], stats["check"], stats["tokens"]["prompt"]) == (25, 25, prompt)


class TestGenerateMaxCost:
    def test_generate_stops_at_the_cap_and_resumes(self, tmp_path: Path, mocks: Any) -> None:
        """dahl generate --max-cost $0.00019, one request at a time: each answer is bounded by ~$0.000156
        (256 max_tokens x $0.60 per M) and costs ~$0.000022 (the mock's ~15 + ~33 tokens), so after
        two answers ($0.000044 + $0.000156 > $0.00019) the third does not fit: exit 3 after two
        answers; a re-run with a higher cap sends only the third."""
        url = mocks.start()
        questions = tmp_path / "q.csv"
        questions.write_text("question,category\nWhat causes iron deficiency anaemia?,h\n"
                             "How is asthma treated in children?,p\n"
                             "What is the first-line treatment of type 2 diabetes?,m\n")
        out = tmp_path / "gen.jsonl"

        def generate(cap: str) -> tuple[int, str]:
            result = CliRunner().invoke(main, ["generate", str(questions), "--base-url", url, "-o", str(out),
                                               "--api-key-env", "", "--no-progress", "--model", "gpt-4o-mini",
                                               "--max-in-flight", "1", "--max-cost", cap])
            return result.exit_code, result.output

        code, text = generate("0.00019")
        assert code == ExitStatus.QUOTA, text
        assert "stopped: --max-cost $0.00019 reached" in text
        assert len(out.read_text().splitlines()) == mocks.stats(url)["requests"] == 2
        code, text = generate("1")
        assert code == 0, text
        assert mocks.stats(url)["requests"] == 3 and len(out.read_text().splitlines()) == 3
        assert "1 answer written of 3 (2 resumed) to" in text
        assert re.search(r"^money: \$0\.0000\d\d \(prices of 2025-05-01\)$", text, re.M)


class TestRefsBuildCost:
    def test_money_line_and_a_zero_cap(self, tmp_path: Path, mocks: Any) -> None:
        """dahl refs build --max-cost 0: exit 3 before any request; with a cap it fits, it builds and prints
        the money of the mock's tokens at --price mock=1,2 ($1 / $2 per M)."""
        url = mocks.start()
        corpus, questions = tmp_path / "corpus.jsonl", tmp_path / "questions.jsonl"
        corpus.write_text(json.dumps({"id": "curie", "title": "Marie Curie", "text": "Marie Curie was a physicist. "
                                      "She won the Nobel Prize in Physics in 1903."}) + "\n")
        questions.write_text(json.dumps({"question_id": "q1", "question": "Who was Marie Curie?"}) + "\n")

        def build(cap: str) -> tuple[int, str]:
            result = CliRunner().invoke(main, [
                "refs", "build", str(questions), "-o", str(tmp_path / "refs.jsonl"), "--evidence", str(corpus),
                "--docs-per-question", "1", "--extractor", "openai", "--rater", "openai", "--base-url", url,
                "--model", "mock", "--api-key-env", "", "--no-progress", "--price", "mock=1,2", "--max-cost", cap])
            return result.exit_code, result.output

        code, text = build("0")
        assert code == ExitStatus.QUOTA, text
        assert "stopped: --max-cost $0 reached: this run spent $0.000000" in text
        assert mocks.stats(url)["requests"] == 0
        code, text = build("1")
        assert code == 0, text
        stats = mocks.stats(url)
        assert stats["requests"] == 2  # one extraction, one rating
        expected = money(stats["tokens"], 1.0, 2.0)
        assert re.search(rf"^money: \${expected:.6f} \(extract \$0\.\d{{6}}, rate \$0\.\d{{6}}; prices of 2025-05-01\)$",
                         text, re.M), text
