"""The FActScore replay figures through batch mode: prepare, submit, collect, then score from the cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.batch.batch_runs import batch_stats, dahl, endpoint, submit_and_collect
from tests.conftest import require_data

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_factscore_figures_through_batch_mode_with_zero_online_requests(
    provider: str, tmp_path: Path, mocks: Any
) -> None:
    """factscore_init 41.9 / 57.5 / 69.3 from batch results; score sends 0 requests; prepare then writes 0."""
    files = [str(require_data(f"factscore/labeled/{m}.jsonl")) for m in MODELS]
    url = mocks.start("--oracle", *files)
    folder = tmp_path / "batch"
    options = ["--format", "factscore", "--splitter", "given", "--checker", "openai", *endpoint(url)]
    code, text = dahl("batch", "prepare", *files, "-o", str(folder), "--provider", provider, *options)
    assert code == 0, text
    requests = batch_stats_requests = int(text.split("requests written: ")[1].split()[0].replace(",", ""))
    text = submit_and_collect(folder)
    assert f"{requests:,} results stored, 0 unfinished" in text
    code, text = dahl("score", *files, "-o", str(tmp_path / "out"), "--no-progress", *options)
    assert code == 0, text
    assert mocks.stats(url)["requests"] == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["models"]
    for model, expected in zip(MODELS, (41.9, 57.5, 69.3), strict=True):
        assert 100 * summary[model]["factscore_init"] == pytest.approx(expected, abs=0.05)
    assert batch_stats(url)["requests_check"] == batch_stats_requests
    code, text = dahl("batch", "prepare", *files, "-o", str(folder), "--provider", provider, *options)
    assert "requests written: 0" in text
