"""Acceptance: each shared data set scores with one ``dahl score`` command and no conversion script.

The commands are docs/inputs.md's ("Scoring the shared data sets"); the counts are what
they printed when written down, so a regression in any reader shows here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.exit_status import ExitStatus
from tests.conftest import require_data

pytestmark = pytest.mark.data

REPLAY = ("--splitter", "given", "--checker", "replay", "--no-progress")


def score(out: Path, *args: str, status: ExitStatus = ExitStatus.OK) -> dict[str, Any]:
    """Run ``dahl score ARGS -o OUT``, check its exit status and return its summary.json."""
    result = CliRunner().invoke(main, ["score", *args, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == status, result.output
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return summary


def counts(summary: dict[str, Any]) -> dict[str, tuple[int, int, int]]:
    """model -> (answers, scored, claims)."""
    return {
        name: (m["n_answers"], m["n_scored"], sum(m["labels"].values()))
        for name, m in summary["models"].items()
    }


class TestSharedSets:
    def test_felm(self, tmp_path: Path) -> None:
        """FELM as shipped (question under 'prompt', segment labels): 838 of 847 answers, 4,381 segments.

        Skipped, each named: 2 lines with a bare NaN response (not JSON), 2 duplicate
        answers, 1 answer under another's derived id (line 528 repeats line 502's prompt
        and response in another domain), 4 answers with an empty segment.
        """
        path = require_data("felm/eval/all.jsonl")
        summary = score(tmp_path / "felm", str(path), "--field", "question=prompt",
                        "--field", "claims=segmented_response", "--field", "claim_labels=labels",
                        "--field", "category=domain", *REPLAY, status=ExitStatus.PARTIAL)
        assert counts(summary) == {"unknown": (838, 838, 4381)}
        assert summary["run"]["input_errors"] == 9
        assert set(summary["models"]["unknown"]["categories"]) == {"wk", "science", "math", "reasoning", "writing_rec"}

    def test_felm_world_knowledge(self, tmp_path: Path) -> None:
        """FELM's wk split, the one that scored 0 of 184: 183 scored (line 22's response is NaN)."""
        path = require_data("felm/data/test/wk.jsonl")
        summary = score(tmp_path / "wk", str(path), "--field", "question=prompt",
                        "--field", "claims=segmented_response", "--field", "claim_labels=labels", *REPLAY,
                        status=ExitStatus.PARTIAL)
        assert counts(summary) == {"unknown": (183, 183, 519)}
        assert summary["input_errors"] == [
            f"{path}:22: malformed JSON: JSON is malformed: invalid character (byte 164) (a bare NaN or Infinity,"
            " as pandas writes for a missing value, is not JSON; write null)"
        ]

    def test_factbench(self, tmp_path: Path) -> None:
        """FactBench: one model per source; HaluEval rows have no claims, so they are excluded, not scored."""
        path = require_data("factcheck-gpt/Factbench.jsonl")
        summary = score(tmp_path / "fb", str(path), "--field", "question=prompt", "--field", "model=source", *REPLAY,
                        status=ExitStatus.PARTIAL)
        assert counts(summary) == {
            "factcheckgpt": (94, 63, 678),
            "factool-qa": (50, 50, 233),
            "felm-wk": (183, 183, 519),
            "halueval-dolly15k": (4507, 0, 0),
        }
        assert summary["run"]["input_errors"] == 1  # line 72: response is null

    def test_medhallu(self, tmp_path: Path) -> None:
        """MedHallu's save_to_disk folder: both answers of each of the 1,000 questions, one model per column."""
        folder = require_data("medhallu/MedHallu_pqa_labeled")
        summary = score(tmp_path / "mh", str(folder), "--field", "question=Question",
                        "--response-column", "Ground Truth", "--response-column", "Hallucinated Answer",
                        "--splitter", "rules", "--checker", "fake", "--no-progress")
        assert counts(summary) == {
            "Ground Truth": (1000, 759, 5186),
            "Hallucinated Answer": (1000, 821, 3791),
        }

    def test_veriscore_sample(self, tmp_path: Path) -> None:
        """VeriScore's sample replays its own verdicts: 24 of 25 claims supported, DAHL Score 0.96."""
        path = require_data("veriscore/data/data_sample.jsonl")
        summary = score(tmp_path / "vs", str(path), *REPLAY)
        assert counts(summary) == {"gpt-4o": (1, 1, 25)}
        assert summary["models"]["gpt-4o"]["dahl_score"] == pytest.approx(24 / 25)

    def test_factscore(self, tmp_path: Path) -> None:
        """FActScore's three labelled files replay the human labels (FActScore 57.5 / 41.9 / 69.3 as in the data README)."""
        files = [str(require_data(f"factscore/labeled/{m}.jsonl")) for m in ("ChatGPT", "InstructGPT", "PerplexityAI")]
        summary = score(tmp_path / "fs", *files, *REPLAY)
        assert {m: c[:2] for m, c in counts(summary).items()} == {
            "ChatGPT": (128, 110), "InstructGPT": (128, 125), "PerplexityAI": (128, 106),
        }
        assert sum(c[2] for c in counts(summary).values()) == 11815
        assert [round(100 * summary["models"][m]["factscore_init"], 1) for m in ("ChatGPT", "InstructGPT", "PerplexityAI")] == [57.5, 41.9, 69.3]
