"""The input options of ``dahl score`` and ``dahl inspect``: --field, the TOML fields table, --response-column."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dahl.cli import main

FELM = (
    '{"prompt": "Which country has most plants?", "response": "The US. France too.",'
    ' "segmented_response": ["The US.", "France too."], "labels": [false, true]}\n'
)
REPLAY = ["--splitter", "given", "--checker", "replay", "--no-progress"]


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


class TestFieldOption:
    def test_config_file_fields(self, tmp_path: Path) -> None:
        """fields in the --config TOML map the input like --field, and --field wins over it."""
        data = tmp_path / "felm.jsonl"
        data.write_text(FELM, encoding="utf-8")
        config = tmp_path / "dahl.toml"
        config.write_text('[fields]\nquestion = "prompt"\nclaims = "response"\n', encoding="utf-8")
        out = tmp_path / "out"
        code, text = invoke("score", str(data), "-o", str(out), "--config", str(config),
                            "--field", "claims=segmented_response", "--field", "claim_labels=labels", *REPLAY)
        assert code == 0, text
        labels = json.loads((out / "summary.json").read_text())["models"]["unknown"]["labels"]
        assert (labels["supported"], labels["unsupported"]) == (1, 1)

    def test_unknown_target_is_a_usage_error(self, tmp_path: Path) -> None:
        """--field with a target dahl does not have exits 2 naming the field."""
        data = tmp_path / "felm.jsonl"
        data.write_text(FELM, encoding="utf-8")
        code, text = invoke("score", str(data), "-o", str(tmp_path / "out"), "--field", "prompt=question", *REPLAY)
        assert code == 2
        assert "unknown field 'prompt' in the field mapping" in text

    def test_inspect_with_columns(self, tmp_path: Path) -> None:
        """dahl inspect counts one model per --response-column, reading a mapped question."""
        data = tmp_path / "runs.csv"
        data.write_text("prompt,gpt,llama\nQ1?,A.,B.\nQ2?,C.,D.\n", encoding="utf-8")
        code, text = invoke("inspect", str(data), "--field", "question=prompt",
                            "--response-column", "gpt", "--response-column", "llama")
        assert code == 0, text
        assert "rows: 4" in text and "unique questions: 2" in text
        assert "  gpt: 2" in text and "  llama: 2" in text
