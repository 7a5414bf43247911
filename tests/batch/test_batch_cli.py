"""dahl batch's commands on their edges: prices of ``status``, bad folders, files and lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.batch.batch_runs import dahl, endpoint, ledger_events, submit_and_collect, write_answers


def _collected(tmp_path: Path, url: str) -> Path:
    """A batch folder of 2 answers x 3 claims checked through the mock, submitted and collected."""
    source = str(write_answers(tmp_path / "answers.jsonl", 2, 3))
    folder = tmp_path / "batch"
    code, text = dahl("batch", "prepare", source, "-o", str(folder), "--checker", "openai", *endpoint(url),
                      "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "6 check requests" in text, text
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
