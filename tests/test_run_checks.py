"""Run folders reported together: stale folders are refused, runs scored differently are flagged."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from dahl import AdapterSettings, ScoreConfig, score_async
from dahl.cli import main
from dahl.exit_status import ExitStatus
from dahl.records import AnswerResult

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def score(out: Path, *inputs: Path, checker: str = "fake") -> None:
    extra = ("--evidence", str(EXAMPLES / "corpus.jsonl")) if checker == "evidence" else ()
    code, text = run("score", *map(str, inputs), "--checker", checker, *extra, "-o", str(out), "--no-progress")
    assert code == ExitStatus.OK, text


def renamed(tmp_path: Path, name: str, *, models: str, keep_questions: int | None = None) -> Path:
    """The example answers with every model renamed ``{models}-<model>``, optionally only the first questions."""
    rows = [json.loads(line) for line in (EXAMPLES / "answers.jsonl").read_text().splitlines()]
    if keep_questions is not None:
        questions = list(dict.fromkeys(r["question"] for r in rows))[:keep_questions]
        rows = [r for r in rows if r["question"] in questions]
    path = tmp_path / name
    path.write_text("".join(json.dumps({**r, "id": f"{models}-{r['id']}", "model": f"{models}-{r['model']}"}) + "\n"
                            for r in rows))
    return path


class Stop(Exception):
    """Raised from on_result to stop a run after its first new answer, as a Ctrl-C would."""


def interrupted_run(out: Path, *inputs: Path) -> None:
    """Score ``inputs`` into ``out`` but stop once the first new answer is written."""
    config = ScoreConfig(inputs=inputs, out_dir=out, adapters=AdapterSettings(checker="fake"))

    def stop(_result: AnswerResult) -> None:
        raise Stop

    with pytest.raises(Stop):
        anyio.run(lambda: score_async(config, on_result=stop))


class TestStaleFolders:
    def test_interrupted_rerun_is_refused(self, tmp_path: Path) -> None:
        """A re-run stopped midway leaves the old summary beside a longer answers.jsonl: leaderboard exits 2."""
        out = tmp_path / "out"
        score(out, EXAMPLES / "answers.jsonl")
        before = (out / "answers.jsonl").stat().st_size
        interrupted_run(out, EXAMPLES / "answers.jsonl", renamed(tmp_path, "more.jsonl", models="x"))
        assert (out / "answers.jsonl").stat().st_size > before
        assert json.loads((out / "manifest.json").read_text())["state"] == "in progress"
        code, text = run("leaderboard", str(out))
        flat = text.replace("\n", "")
        assert code == ExitStatus.USAGE
        assert f"error: {out}: the run started there at " in flat and "did not finish (interrupted?)" in flat
        assert "--allow-stale" in flat

    def test_allow_stale_ranks_with_a_warning(self, tmp_path: Path) -> None:
        """--allow-stale ranks the stale folder's numbers and warns that they are stale."""
        out = tmp_path / "out"
        score(out, EXAMPLES / "answers.jsonl")
        interrupted_run(out, EXAMPLES / "answers.jsonl", renamed(tmp_path, "more.jsonl", models="x"))
        code, text = run("leaderboard", str(out), "--allow-stale")
        assert code == 0, text
        assert f"warning: {out} is stale: the run started there at " in text.replace("\n", "")
        assert "| model-a |" in text

    def test_finishing_the_run_makes_it_fresh(self, tmp_path: Path) -> None:
        """Re-running the interrupted command completes the folder; leaderboard then ranks all four models."""
        out = tmp_path / "out"
        more = renamed(tmp_path, "more.jsonl", models="x")
        score(out, EXAMPLES / "answers.jsonl")
        interrupted_run(out, EXAMPLES / "answers.jsonl", more)
        score(out, EXAMPLES / "answers.jsonl", more)
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["state"] == "complete"
        assert manifest["answers_file"] == {"bytes": (out / "answers.jsonl").stat().st_size, "lines": 16}
        code, text = run("leaderboard", str(out))
        assert code == 0, text
        assert "warning" not in text
        assert all(f"| {m} |" in text for m in ("model-a", "model-b", "x-model-a", "x-model-b"))

    def test_answers_changed_after_the_summary(self, tmp_path: Path) -> None:
        """A complete folder whose answers.jsonl lost a line since is refused, naming both sizes."""
        out = tmp_path / "out"
        score(out, EXAMPLES / "answers.jsonl")
        answers = out / "answers.jsonl"
        size = answers.stat().st_size
        lines = answers.read_bytes().splitlines(keepends=True)
        answers.write_bytes(b"".join(lines[:-1]))
        code, text = run("leaderboard", str(out))
        assert code == ExitStatus.USAGE
        shorter = size - len(lines[-1])
        assert f"answers.jsonl has {shorter} bytes but its summary.json and verdicts/ were written for {size} bytes" \
            in text.replace("\n", "")


class TestDifferentRuns:
    def test_checkers_differ_warns_and_shows_each_rows_checker(self, tmp_path: Path) -> None:
        """Two runs by the fake and the evidence Checker: a warning naming both, and a Checker column."""
        fake, evidence = tmp_path / "fake", tmp_path / "evidence"
        score(fake, EXAMPLES / "answers.jsonl")
        score(evidence, renamed(tmp_path, "e.jsonl", models="e"), checker="evidence")
        code, text = run("leaderboard", str(fake), str(evidence))
        assert code == 0, text
        flat = text.replace("\n", "")
        assert f"warning: runs differ in Checker: {fake}: fake/v1:s=0.7:u=0.05:f=0.0; {evidence}: evidence/" in flat
        assert "question set" not in flat  # the same four questions
        cells = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| ")]
        rows = {c[1]: c[-1] for c in cells if c[0].isdigit()}  # rank, model, ..., Checker
        assert rows["model-a"] == "fake/v1" and rows["e-model-a"].startswith("evidence/")

    def test_strict_refuses_runs_that_differ(self, tmp_path: Path) -> None:
        """--strict turns the difference into a usage error (exit 2)."""
        fake, evidence = tmp_path / "fake", tmp_path / "evidence"
        score(fake, EXAMPLES / "answers.jsonl")
        score(evidence, renamed(tmp_path, "e.jsonl", models="e"), checker="evidence")
        code, text = run("leaderboard", str(fake), str(evidence), "--strict")
        assert code == ExitStatus.USAGE
        assert "--strict refuses runs that differ" in text

    def test_question_sets_differ(self, tmp_path: Path) -> None:
        """Same Checker, but the second run answers 2 of the 4 questions: a question-set warning only."""
        full, half = tmp_path / "full", tmp_path / "half"
        score(full, EXAMPLES / "answers.jsonl")
        score(half, renamed(tmp_path, "h.jsonl", models="h", keep_questions=2))
        code, text = run("leaderboard", str(full), str(half))
        assert code == 0, text
        flat = text.replace("\n", "")
        assert "warning: runs differ in question set:" in flat and "Checker:" not in flat
        assert json.loads((half / "summary.json").read_text())["question_set"]["questions"] == 2

    def test_same_setup_gives_no_warning(self, tmp_path: Path) -> None:
        """Two runs scored alike over the same questions rank without a warning."""
        a, b = tmp_path / "a", tmp_path / "b"
        score(a, EXAMPLES / "answers.jsonl")
        score(b, renamed(tmp_path, "b.jsonl", models="b"))
        code, text = run("leaderboard", str(a), str(b))
        assert code == 0 and "warning" not in text


class TestRefusedRunKeepsFolderFresh:
    def test_a_run_refused_for_its_settings_leaves_the_folder_fresh(self, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """A re-run that stops before touching answers.jsonl (missing API key) does not mark the folder stale."""
        out = tmp_path / "out"
        score(out, EXAMPLES / "answers.jsonl")
        monkeypatch.delenv("DAHL_TEST_KEY", raising=False)
        code, _ = run("score", str(EXAMPLES / "answers.jsonl"), "-o", str(out), "--checker", "openai",
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key-env", "DAHL_TEST_KEY")
        assert code == ExitStatus.USAGE
        assert json.loads((out / "manifest.json").read_text())["state"] == "complete"
        assert run("leaderboard", str(out))[0] == 0


class TestBoardFile:
    @pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux-only")
    def test_board_file_on_a_full_disk_exits_8(self, tmp_path: Path) -> None:
        """leaderboard -o onto a full disk: exit 8 and one line naming the file, no traceback."""
        out = tmp_path / "out"
        score(out, EXAMPLES / "answers.jsonl")
        board = tmp_path / "board.md"
        board.symlink_to("/dev/full")
        code, text = run("leaderboard", str(out), "-o", str(board))
        assert code == ExitStatus.WRITE_FAILED
        assert f"error: cannot write {board}: No space left on device." in text.replace("\n", "")
