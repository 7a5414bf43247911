"""Real labelled data through the real wire path: the openai Checker against the oracle mock."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.formats import read_answers
from dahl.records import normalize_text

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")


@pytest.fixture
def factscore_files(shared_data: Path) -> list[Path]:
    files = [shared_data / "factscore" / "labeled" / f"{m}.jsonl" for m in MODELS]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        pytest.skip(f"FActScore labeled files not found: {missing}")
    return files


@pytest.fixture
def oracle_url(factscore_files: list[Path], mocks: Any) -> str:
    """The mock answering check prompts with the files' human labels (tests/conftest.py's MockServers)."""
    url: str = mocks.start("--oracle", *map(str, factscore_files))
    return url


class TestFActScoreThroughTheWire:
    def test_same_scores_as_replay_and_one_request_per_unique_claim(
        self, tmp_path: Path, factscore_files: list[Path], oracle_url: str, mocks: Any
    ) -> None:
        """factscore_init 41.9/57.5/69.3 as with replay, and exactly one check per unique (question, claim)."""
        files = [str(f) for f in factscore_files]
        code, text = _score(files, tmp_path / "wire", "--checker", "openai", "--base-url", oracle_url,
                            "--model", "mock", "--api-key-env", "")
        assert code == 0, text
        code, text = _score(files, tmp_path / "replay", "--checker", "replay")
        assert code == 0, text
        wire = json.loads((tmp_path / "wire" / "summary.json").read_text())["models"]
        replay = json.loads((tmp_path / "replay" / "summary.json").read_text())["models"]
        for model, expected in zip(MODELS, (41.9, 57.5, 69.3), strict=True):
            assert 100 * wire[model]["factscore_init"] == pytest.approx(expected, abs=0.05)
            assert wire[model]["factscore_init"] == pytest.approx(replay[model]["factscore_init"], abs=5e-4)
        unique = {
            (normalize_text(a.question), normalize_text(c.text))
            for f in factscore_files for a in read_answers(f, "factscore") for c in a.claims or ()
        }
        assert mocks.stats(oracle_url)["check"] == len(unique)


def _score(files: list[str], out: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["score", *files, "--format", "factscore", "--splitter", "given",
                                       "-o", str(out), "--no-progress", *args])
    return result.exit_code, result.output
