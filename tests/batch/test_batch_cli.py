"""dahl batch's commands on their edges: prices of ``status``, bad folders, files and lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dahl.batch._ledger import LEDGER_NAME
from tests.batch.batch_runs import (
    batch_stats,
    dahl,
    endpoint,
    ledger_events,
    shard_ids,
    submit_and_collect,
    write_answers,
)


def _prepared(tmp_path: Path, url: str, provider: str = "openai") -> Path:
    """A batch folder of 2 answers x 3 claims prepared for ``provider`` (6 check requests)."""
    source = str(write_answers(tmp_path / "answers.jsonl", 2, 3))
    folder = tmp_path / "batch"
    code, text = dahl("batch", "prepare", source, "-o", str(folder), "--provider", provider, "--checker", "openai",
                      *endpoint(url), "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "6 check requests" in text, text
    return folder


def _collected(tmp_path: Path, url: str) -> Path:
    """A batch folder of 2 answers x 3 claims checked through the mock, submitted and collected."""
    folder = _prepared(tmp_path, url)
    submit_and_collect(folder)
    return folder


def _tokens(text: str) -> tuple[int, int]:
    found = re.search(r"tokens collected: ([\d,]+) prompt \+ ([\d,]+) completion", text)
    assert found is not None, text
    return int(found[1].replace(",", "")), int(found[2].replace(",", ""))


class TestStatusPrices:
    def test_price_option_and_config_prices_give_the_batch_cost_of_an_unlisted_model(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """Model ``mock`` has no shipped price: unknown; --price mock=1,2,0.5 or [prices] in --config: the cost."""
        folder = _collected(tmp_path, mocks.start())
        code, text = dahl("batch", "status", str(folder))
        assert code == 0, text
        assert "cost at batch price: unknown (no batch price for mock: give --price mock=IN,OUT,BATCH_DISCOUNT)" in text
        prompt, completion = _tokens(text)
        assert ledger_events(folder, "collected")[0]["prompt_tokens"] == prompt > 0
        expected = f"cost at batch price: ${(prompt * 0.5 + completion * 1.0) / 1e6:,.6f}"
        code, text = dahl("batch", "status", str(folder), "--price", "mock=1,2,0.5")
        assert code == 0 and expected in text, text
        config = tmp_path / "prices.toml"
        config.write_text('[prices."mock"]\ninput = 1.0\noutput = 2.0\nbatch_discount = 0.5\n')
        code, text = dahl("batch", "status", str(folder), "--config", str(config))
        assert code == 0 and expected in text, text
        code, text = dahl("batch", "status", str(folder), "--price", "mock=x")
        assert code == 2 and "--price must be MODEL=INPUT,OUTPUT" in text, text


class TestBadFolders:
    def test_submit_names_a_missing_prepared_file_and_exits_2(self, tmp_path: Path, mocks: Any) -> None:
        """The ledger's shard file deleted: exit 2 naming it, no traceback, nothing created at the provider."""
        url = mocks.start()
        folder = _prepared(tmp_path, url)
        (folder / "wave-01" / "check-0001.jsonl").unlink()
        code, text = dahl("batch", "submit", str(folder))
        assert code == 2, text
        assert "check-0001.jsonl: cannot read the prepared batch file the ledger names: No such file" in text
        assert "batches_created" not in batch_stats(url)

    def test_status_of_a_folder_that_does_not_exist_exits_2(self, tmp_path: Path) -> None:
        """``dahl batch status nowhere``: exit 2, the folder named (not 0 with an empty table)."""
        code, text = dahl("batch", "status", str(tmp_path / "nowhere"))
        assert code == 2 and f"batch folder {tmp_path / 'nowhere'} does not exist" in text, text

    def test_a_ledger_cut_mid_line_is_named_and_its_whole_lines_are_kept(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Only line 1 (the wave), cut: exit 2 naming line 1 as truncated; whole wave + cut line 2: it reads."""
        folder = _prepared(tmp_path, mocks.start())
        whole = (folder / LEDGER_NAME).read_bytes()
        (folder / LEDGER_NAME).write_bytes(whole[:40])
        code, text = dahl("batch", "status", str(folder))
        assert code == 2, text
        assert f"{folder} has no prepared batches: {folder / LEDGER_NAME} line 1 is truncated" in text
        (folder / LEDGER_NAME).write_bytes(whole + b'{"event": "submitted", "shard": "wave-01/check-00')
        code, text = dahl("batch", "status", str(folder))
        assert code == 0, text
        assert f"{folder / LEDGER_NAME} line 2 is truncated (a write cut short): ignored" in caplog.text
        assert "wave-01/check-0001.jsonl check 6 requests -: not submitted" in text

    def test_unknown_ledger_events_and_foreign_results_are_named(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """An event ``frobbed`` warns with its line; a result line of an id in no request warns with the id."""
        folder = _prepared(tmp_path, mocks.start(), provider="file")
        with (folder / LEDGER_NAME).open("a") as handle:
            handle.write(json.dumps({"event": "frobbed", "shard": "wave-01/check-0001.jsonl"}) + "\n")
        ids = shard_ids(folder / "wave-01" / "check-0001.jsonl")
        body = {"choices": [{"message": {"role": "assistant", "content": "Supported"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}
        results = tmp_path / "out.jsonl"
        results.write_text("".join(json.dumps({"custom_id": i, "response": {"status_code": 200, "body": body},
                                               "error": None}) + "\n" for i in [*ids, "foreign-1"]))
        code, text = dahl("batch", "collect", str(folder), "--from-file", str(results))
        assert code == 0, text
        assert f"{folder / LEDGER_NAME} line 2: unknown event 'frobbed' ignored" in caplog.text
        assert (f"{results}: 1 results ignored, their custom_id is in no request of the batch files not yet "
                "collected: foreign-1") in caplog.text
        assert "collected 1 batches: 6 results stored" in text


class TestPrepareBadInput:
    def test_a_bad_first_line_gives_the_exit_status_of_dahl_score(
        self, tmp_path: Path, mocks: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Line 1 not JSON, line 2 good: score exits 6 naming line 1; prepare too, and still writes line 2's checks."""
        url = mocks.start()
        source = tmp_path / "answers.jsonl"
        good = write_answers(tmp_path / "good.jsonl", 1, 3).read_text()
        source.write_text("{not json\n" + good)
        options = ["--checker", "openai", *endpoint(url), "--cache-dir", str(tmp_path / "cache")]
        score_code, score_text = dahl("score", str(source), "-o", str(tmp_path / "run"), "--no-progress", *options,
                                      "--no-cache")
        assert score_code == 6 and f"{source}:1" in score_text, score_text
        caplog.clear()
        code, text = dahl("batch", "prepare", str(source), "-o", str(tmp_path / "batch"), *options)
        assert code == score_code, text
        assert f"skipped input record: {source}:1: malformed JSON" in caplog.text
        assert "wrote wave-01/check-0001.jsonl: 3 check requests" in text
        assert "1 input records skipped (exit status 6)" in text
        source.write_text("{not json\n")
        code, text = dahl("batch", "prepare", str(source), "-o", str(tmp_path / "batch2"), *options)
        assert code == 5, text


def _stage_tokens(folder: Path) -> dict[str, tuple[int, int, int]]:
    """stage -> (prompt, cached, completion) tokens of its collected shards, from the ledger."""
    stage_of = {s["path"]: s["stage"] for wave in ledger_events(folder, "wave") for s in wave["shards"]}
    out: dict[str, tuple[int, int, int]] = {}
    for event in ledger_events(folder, "collected"):
        p, c, n = out.get(stage_of[event["shard"]], (0, 0, 0))
        out[stage_of[event["shard"]]] = (p + event["prompt_tokens"], c + event.get("cached_tokens", 0),
                                         n + event["completion_tokens"])
    return out


class TestStatusPricesEachStage:
    @pytest.mark.parametrize("provider", ["openai", "anthropic"])
    def test_split_and_check_are_priced_at_their_own_models_batch_price_with_cached_tokens_cheaper(
        self, tmp_path: Path, mocks: Any, provider: str
    ) -> None:
        """Split on gpt-4o, check on gpt-4o-mini, half of every prompt read from the cache (the mock's
        --cached-prompt): the cost is each stage's tokens at its model's batch price, cached at the cached rate."""
        url = mocks.start("--cached-prompt")
        config = tmp_path / "dahl.toml"
        config.write_text(f'[split]\nbase_url = "{url}"\nmodel = "gpt-4o"\napi_key_env = ""\n\n'
                          f'[check]\nbase_url = "{url}"\nmodel = "gpt-4o-mini"\napi_key_env = ""\n')
        source = str(write_answers(tmp_path / "answers.jsonl", 2, 3))
        folder = tmp_path / "batch"
        prepare = ("batch", "prepare", source, "-o", str(folder), "--provider", provider, "--splitter", "openai",
                   "--checker", "openai", "--config", str(config), "--cache-dir", str(tmp_path / "cache"))
        for _ in range(2):  # wave 1 splits; wave 2 checks the claims it gave
            code, text = dahl(*prepare)
            assert code == 0, text
            submit_and_collect(folder)
        tokens = _stage_tokens(folder)
        assert set(tokens) == {"split", "check"}
        for prompt, cached, _ in tokens.values():
            assert 0 < 2 * cached <= prompt  # each request reports floor(half) of its prompt as cached
        (sp, sc, sn), (cp, cc, cn) = tokens["split"], tokens["check"]
        # USD per million tokens x 0.5 (batch): gpt-4o 2.50 in, 1.25 cached, 10.00 out; gpt-4o-mini 0.15, 0.075, 0.60.
        usd = 0.5 * ((sp - sc) * 2.50 + sc * 1.25 + sn * 10.00 + (cp - cc) * 0.15 + cc * 0.075 + cn * 0.60) / 1e6
        code, text = dahl("batch", "status", str(folder))
        assert code == 0, text
        assert f"tokens collected: {sp + cp:,} prompt ({sc + cc:,} cached) + {sn + cn:,} completion; " \
               f"cost at batch price: ${usd:,.6f}" in text
        one_price = 0.5 * ((sp + cp) * 0.15 + (sn + cn) * 0.60) / 1e6  # every token at the check model's full rate
        assert f"${one_price:,.6f}" not in text
