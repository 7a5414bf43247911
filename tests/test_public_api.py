"""The public surface: ``dahl.__all__`` is sorted, complete and importable."""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dahl


class TestPublicAPI:
    def test_all_is_sorted_and_unique(self) -> None:
        """__all__ is sorted (case-sensitive) with no duplicates."""
        assert list(dahl.__all__) == sorted(set(dahl.__all__))

    def test_every_exported_name_exists(self) -> None:
        """Each name in __all__ is an attribute of the package."""
        missing = [name for name in dahl.__all__ if not hasattr(dahl, name)]
        assert missing == []

    def test_every_public_attribute_is_exported(self) -> None:
        """Every public class or function defined in dahl's namespace is listed in __all__."""
        public = {
            name
            for name, value in vars(dahl).items()
            if not name.startswith("_") and getattr(value, "__module__", "").startswith("dahl")
        }
        assert public - set(dahl.__all__) == set()


REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
GOOD = {"id": "a1", "model": "m", "question": "What does aspirin do?", "response": "Aspirin inhibits COX-1."}


def fake(out: Path, inputs: object) -> dahl.ScoreConfig:
    return dahl.ScoreConfig(inputs=inputs, out_dir=out, adapters=dahl.AdapterSettings(checker="fake"))  # type: ignore[arg-type]


class TestPackage:
    def test_version_is_the_package_metadata(self) -> None:
        """dahl.__version__ is the installed distribution's version."""
        assert dahl.__version__ == importlib.metadata.version("dahl")

    def test_import_dahl_loads_no_engine(self) -> None:
        """import dahl is cheap: the run, the CLI and the adapters load on first use."""
        code = "import sys, dahl; print(sorted(m for m in ('dahl.run._score', 'dahl.cli', 'anyio') if m in sys.modules))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.stdout.strip() == "[]", proc.stderr

    def test_exit_status_and_new_errors_are_exported(self) -> None:
        """ExitStatus, FatalAPIError and OutputWriteError are part of the public surface."""
        assert dahl.ExitStatus.PARTIAL == 6 and issubclass(dahl.FatalAPIError, dahl.AdapterError)
        assert issubclass(dahl.OutputWriteError, dahl.DahlError)


class TestScoreInALoop:
    def test_score_inside_a_running_loop_points_to_score_async(self, tmp_path: Path) -> None:
        """dahl.score() under asyncio.run raises RuntimeError naming score_async; awaiting score_async works."""
        config = fake(tmp_path / "out", EXAMPLES / "answers.jsonl")

        async def notebook_cell() -> int:
            with pytest.raises(RuntimeError, match=r"use `report = await dahl.score_async\(config\)` there"):
                dahl.score(config)
            report = await dahl.score_async(config)
            return int(report.summary["run"]["answers_done"])

        assert asyncio.run(notebook_cell()) == 8


class TestRecordInputs:
    def test_dicts_are_checked_like_jsonl_lines(self, tmp_path: Path) -> None:
        """A list of dicts is scored; a bad item is skipped and named <records>[i] with its field."""
        bad = {"id": "a2", "model": "m", "question": "Q?", "response": "   "}
        report = dahl.score(fake(tmp_path / "out", [GOOD, bad, {**GOOD, "id": "a3"}]))
        assert [str(e) for e in report.input_errors] == ["<records>[1], field 'response': response is empty"]
        assert report.exit_status == dahl.ExitStatus.PARTIAL
        ids = [json.loads(line)["id"] for line in (tmp_path / "out" / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a1", "a3"]
        assert report.summary["inputs"][0]["path"] == "<records>" and report.summary["inputs"][0]["bytes"] is None

    def test_a_deep_dict_is_a_bad_item(self, tmp_path: Path) -> None:
        """A meta nested 1,000 levels deep is a bad item named by its index, not a RecursionError; the rest is scored."""
        deep: dict[str, object] = {"a": 1}
        for _ in range(1000):
            deep = {"a": deep}
        report = dahl.score(fake(tmp_path / "out", [{**GOOD, "id": "d", "meta": deep}, GOOD]))
        assert [str(e) for e in report.input_errors] == [
            "<records>[0]: nested too deeply (JSON arrays/objects more than ~1,000 levels deep)"]
        assert report.summary["models"]["m"]["n_answers"] == 1

    def test_answers_and_files_mix(self, tmp_path: Path) -> None:
        """Answer objects in dahl.Records beside a file: 8 + 1 answers, in input order."""
        answer = dahl.Answer(id="x1", question="What is metformin for?", response="It lowers glucose.", model="x")
        report = dahl.score(fake(tmp_path / "out", [EXAMPLES / "answers.jsonl", dahl.Records([answer])]))
        assert report.exit_status == dahl.ExitStatus.OK
        assert report.summary["models"]["x"]["n_answers"] == 1
        assert report.summary["config"]["inputs"] == [str(EXAMPLES / "answers.jsonl"), "<records>"]

    def test_a_generator_is_read_once_and_kept(self, tmp_path: Path) -> None:
        """A generator of dicts is materialised: the run reads it twice (check, then score) and gets all 3."""
        report = dahl.score(fake(tmp_path / "out", ({**GOOD, "id": f"g{i}"} for i in range(3))))
        assert report.summary["models"]["m"]["n_answers"] == 3

    def test_other_items_are_a_config_error(self, tmp_path: Path) -> None:
        """An input that is neither a path, Records nor an Answer/dict raises ConfigError naming its index."""
        with pytest.raises(dahl.ConfigError, match=r"inputs\[1\] is a int"):
            fake(tmp_path, [EXAMPLES / "answers.jsonl", 3])


class TestProvenance:
    def test_summary_and_manifest_record_version_times_and_hashes(self, tmp_path: Path) -> None:
        """Both files hold dahl's version, UTC ISO 8601 start/end and the blake2b-128 of the input file."""
        path = EXAMPLES / "answers.jsonl"
        before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        dahl.score(fake(tmp_path / "out", path))
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        expected = {"path": str(path), "bytes": path.stat().st_size,
                    "blake2b": hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()}
        assert summary["inputs"] == manifest["inputs"] == [expected]
        assert summary["run"]["dahl_version"] == manifest["dahl_version"] == dahl.__version__
        started = dt.datetime.fromisoformat(manifest["started_at"])
        finished = dt.datetime.fromisoformat(manifest["finished_at"])
        assert started.utcoffset() == dt.timedelta(0) and before <= started <= finished
        assert (summary["run"]["started_at"], summary["run"]["finished_at"]) == (manifest["started_at"],
                                                                                 manifest["finished_at"])
        assert summary["question_set"] == manifest["question_set"]
        assert summary["question_set"]["questions"] == 4


class TestDocsExample:
    def test_python_api_example_runs(self, tmp_path: Path) -> None:
        """examples/python_api.py (docs/python-api.md's example) prints what docs/python-api.md shows."""
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, str(EXAMPLES / "python_api.py")], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines() == [
            "PARTIAL 6",
            "<records>[2], field 'response': Object missing required field `response`",
            "2 answers, 4 claims, DAHL Score 1.0",
        ]

    def test_docs_show_the_example_and_its_output(self) -> None:
        """docs/python-api.md's Python API block is examples/python_api.py (less its docstring), then its output."""
        page = (REPO / "docs" / "python-api.md").read_text()
        code = (EXAMPLES / "python_api.py").read_text().split('"""', 2)[2].strip()
        assert f"```python\n{code}\n```" in page
        section = page.split("# Python API", 1)[1]
        assert "PARTIAL 6\n<records>[2], field 'response'" in section.split("```python", 1)[1]
