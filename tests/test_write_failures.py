"""Output that cannot be written ends a run with one line and exit 8, losing nothing finished.

Disk full is real: the file written is a symlink to ``/dev/full``, whose writes fail
with ENOSPC. A read-only ``answers.jsonl`` is read-only for root too (``chattr +i``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.exit_status import ExitStatus

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DEV_FULL = Path("/dev/full")
needs_dev_full = pytest.mark.skipif(not DEV_FULL.exists(), reason="/dev/full is Linux-only")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def score(out: Path, *inputs: Path) -> tuple[int, str]:
    return run("score", *(str(p) for p in inputs or (EXAMPLES / "answers.jsonl",)), "--checker", "fake",
               "-o", str(out), "--no-progress")


def answer_ids(out: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]


@pytest.fixture
def read_only() -> Iterator[list[Path]]:
    """Make files read-only for this process (root included); undone after the test."""
    made: list[Path] = []
    yield made
    for path in made:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=False)
        path.chmod(0o644)


def make_read_only(path: Path, made: list[Path]) -> None:
    path.chmod(0o444)
    made.append(path)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("running as root without chattr +i: no file is read-only")


@needs_dev_full
class TestDiskFull:
    def test_full_disk_while_appending_answers_exits_8(self, tmp_path: Path) -> None:
        """answers.jsonl on a full disk: exit 8, one line naming it, no ExceptionGroup traceback."""
        out = tmp_path / "out"
        out.mkdir()
        (out / "answers.jsonl").symlink_to(DEV_FULL)
        code, text = score(out)
        assert code == ExitStatus.WRITE_FAILED, text
        assert f"error: cannot write {out / 'answers.jsonl'}: No space left on device." in text.replace("\n", "")
        assert "Traceback" not in text and "ExceptionGroup" not in text

    def test_full_disk_at_the_summary_keeps_every_answer(self, tmp_path: Path) -> None:
        """summary.json cannot be written: exit 8 naming it; all 8 answers are in answers.jsonl."""
        out = tmp_path / "out"
        out.mkdir()
        (out / "summary.json.tmp").symlink_to(DEV_FULL)
        code, text = score(out)
        assert code == ExitStatus.WRITE_FAILED, text
        assert f"cannot write {out / 'summary.json'}: No space left on device" in text.replace("\n", "")
        assert len(answer_ids(out)) == 8
        assert not (out / "summary.json").exists()


class TestReadOnly:
    def test_read_only_answers_on_resume_exits_8_unchanged(self, tmp_path: Path, read_only: list[Path]) -> None:
        """Resuming into a read-only answers.jsonl: exit 8, one line naming it; its 4 answers stay as they were."""
        out = tmp_path / "out"
        assert score(out)[0] == ExitStatus.OK
        answers = out / "answers.jsonl"
        kept = b"".join(answers.read_bytes().splitlines(keepends=True)[:4])
        answers.write_bytes(kept)
        make_read_only(answers, read_only)
        code, text = score(out)
        assert code == ExitStatus.WRITE_FAILED, text
        flat = text.replace("\n", "")
        assert f"error: cannot write {answers}: " in flat and "Nothing finished is lost" in flat
        assert "Traceback" not in text
        assert answers.read_bytes() == kept


class TestFileNames:
    def test_input_name_that_is_not_utf8(self, tmp_path: Path) -> None:
        """An input named a\\xff.jsonl is scored; summary and manifest name it with a \\xff escape."""
        path = Path(os.fsdecode(bytes(tmp_path) + b"/a\xff.jsonl"))
        path.write_bytes((EXAMPLES / "answers.jsonl").read_bytes())
        out = tmp_path / "out"
        code, text = score(out, path)
        assert code == ExitStatus.OK, text
        expected = str(tmp_path) + "/a\\xff.jsonl"
        manifest = json.loads((out / "manifest.json").read_text())
        assert [entry["path"] for entry in manifest["inputs"]] == [expected]
        assert json.loads((out / "summary.json").read_text())["config"]["inputs"] == [expected]
        assert score(out, path)[0] == ExitStatus.OK  # and again, resumed
