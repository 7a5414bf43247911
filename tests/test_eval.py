"""``dahl eval CONFIG.toml``: the whole benchmark in one command, against the loopback mock."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dahl.cli import main
from dahl.errors import ConfigError
from dahl.run._eval_config import load_eval_config
from dahl.exit_status import ExitStatus
from tests.conftest import REPO, MockServers, require_data
from tests.eval_data import HALLUCINATING, TRUTHFUL, oracle_args, write_benchmark, write_config

EXAMPLE = REPO / "examples" / "eval"


def _eval(*args: str) -> Result:
    return CliRunner().invoke(main, ["eval", *args, "--no-progress"], catch_exceptions=False)


def _precision_by_answer(score_answers: Path) -> dict[str, dict[str, float]]:
    """Independently of dahl's metrics: model -> question id -> S / (S + U) of each answer
    whose claims are all supported, unsupported or irrelevant, with S + U > 0 (DAHL §3.3)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for line in score_answers.read_text(encoding="utf-8").split("\n"):
        if not line:
            continue
        answer = json.loads(line)
        labels = [claim["label"] for claim in answer.get("claims") or []]
        s, u = labels.count("supported"), labels.count("unsupported")
        if answer.get("abstained") or s + u == 0 or any(lbl in ("unknown", "error") for lbl in labels):
            continue
        out[answer["model"]][answer["question_id"]] = s / (s + u)
    return out


@pytest.fixture(autouse=True)
def mock_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example config's models read their server from DAHL_MOCK_URL: the docs' mock unless a test starts one."""
    monkeypatch.setenv("DAHL_MOCK_URL", "http://127.0.0.1:8765")


@pytest.fixture
def example(tmp_path: Path, mocks: MockServers, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The example config (examples/eval) copied to ``tmp_path``, both models on one fresh mock."""
    folder = tmp_path / "eval"
    shutil.copytree(EXAMPLE, folder)
    shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "corpus.jsonl")
    url = mocks.start(*(arg for m in ("model-a", "model-b") for arg in
                        ("--oracle-answers", f"{m}={folder / m}.answers.jsonl")))
    monkeypatch.setenv("DAHL_MOCK_URL", url.removesuffix("/v1"))
    return folder / "eval.toml", url


class TestEvalPubMedQA:
    """The acceptance run: PubMedQA questions, a truthful and a hallucinating mock model."""

    def test_one_command_ranks_truthful_above_hallucinating(self, tmp_path: Path, mocks: MockServers) -> None:
        """One dahl eval writes the leaderboard and plot; DAHL Scores match an independent count; a re-run sends 0 requests."""
        pubmedqa = require_data("pubmedqa/ori_pqal.json")
        medhallu = require_data("medhallu/medhallu_pqa_labeled.jsonl")
        assert write_benchmark(tmp_path, pubmedqa, medhallu, limit=150) == 150
        url = mocks.start(*oracle_args(tmp_path))
        config = write_config(tmp_path, url)
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.OK, result.output
        out = tmp_path / "out"
        board_dir = out / "leaderboard"
        assert sorted(p.name for p in board_dir.iterdir()) == ["board.csv", "board.json", "board.md", "board.png",
                                                               "stamp.json"]
        assert board_dir.joinpath("board.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert mocks.stats(url)["requests"] == 300  # 150 questions x 2 models, nothing else (offline scoring)

        board = json.loads((board_dir / "board.json").read_text(encoding="utf-8"))
        rows = {row["model"]: row for row in board["models"]}
        independent = _precision_by_answer(out / "score" / "answers.jsonl")
        for model in (TRUTHFUL, HALLUCINATING):
            values = independent[model].values()
            assert rows[model]["n_scored"] == len(values)
            assert rows[model]["dahl_score"] == pytest.approx(sum(values) / len(values), abs=1e-12)
        assert [row["model"] for row in board["models"]] == [TRUTHFUL, HALLUCINATING]
        assert (rows[TRUTHFUL]["n_scored"], rows[HALLUCINATING]["n_scored"]) == (PINNED["n_scored"])
        assert rows[TRUTHFUL]["dahl_score"] == pytest.approx(PINNED["truthful"], abs=5e-5)
        assert rows[HALLUCINATING]["dahl_score"] == pytest.approx(PINNED["hallucinating"], abs=5e-5)
        assert rows[TRUTHFUL]["dahl_score"] > rows[HALLUCINATING]["dahl_score"]

        (pair,) = board["comparisons"]
        both = sorted(set(independent[TRUTHFUL]) & set(independent[HALLUCINATING]))
        diffs = [independent[TRUTHFUL][q] - independent[HALLUCINATING][q] for q in both]
        assert (pair["a"], pair["b"], pair["n_pairs"]) == (TRUTHFUL, HALLUCINATING, len(both))
        assert pair["mean_diff"] == pytest.approx(sum(diffs) / len(diffs), abs=1e-12)
        assert (pair["n_pairs"], round(pair["p_value"], 4)) == PINNED["pair"]
        assert "| truthful | hallucinating |" in (board_dir / "board.md").read_text(encoding="utf-8")

        again = _eval(str(config))
        assert again.exit_code == ExitStatus.OK, again.output
        assert mocks.stats(url)["requests"] == 300  # the re-run sent 0 requests
        assert "0 answers written of 150 (150 resumed)" in again.output
        assert "0 answers scored now, 300 resumed" in again.output
        assert "leaderboard up to date" in again.output


#: Measured on the first 150 PubMedQA pmids (sorted); checked above by the independent count.
PINNED: dict[str, Any] = {"n_scored": (132, 132), "truthful": 0.477089, "hallucinating": 0.294877, "pair": (126, 0.001)}


class TestEvalExitStatus:
    """The exit status is dahl score's: a failed answer makes the eval partial."""

    def test_failed_generation_is_partial_and_the_rest_is_ranked(self, tmp_path: Path, mocks: MockServers,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """A 400 for one of 8 requests (seeded fault draws): exit 6, the other 7 answers scored and ranked."""
        folder = tmp_path / "eval"
        shutil.copytree(EXAMPLE, folder)
        shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "corpus.jsonl")
        url = mocks.start("--fault", "400=0.3", "--seed", "3")
        monkeypatch.setenv("DAHL_MOCK_URL", url.removesuffix("/v1"))
        config = folder / "eval.toml"
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.PARTIAL, result.output
        assert "partly done: 1 answer failed to generate (exit status 6; re-running retries them)" in result.output
        summary = json.loads((folder / "eval-out" / "score" / "summary.json").read_text(encoding="utf-8"))
        assert sum(b["n_answers"] for b in summary["models"].values()) == 7
        assert (folder / "eval-out" / "leaderboard" / "board.md").is_file()


class TestEvalResume:
    """Each step resumes; a changed setting redoes only the steps it affects."""

    def test_rerun_of_a_finished_eval_sends_nothing(self, example: tuple[Path, str], mocks: MockServers) -> None:
        """A finished eval run again: 0 requests, 0 answers scored, the leaderboard kept as it was."""
        config, url = example
        first = _eval(str(config), "-o", str(config.parent / "out"))
        assert first.exit_code == ExitStatus.OK, first.output
        assert mocks.stats(url)["requests"] == 8
        board = config.parent / "out" / "leaderboard" / "board.json"
        written = board.stat().st_mtime_ns
        second = _eval(str(config), "-o", str(config.parent / "out"))
        assert second.exit_code == ExitStatus.OK, second.output
        assert mocks.stats(url)["requests"] == 8
        assert "0 answers scored now, 8 resumed" in second.output
        assert board.stat().st_mtime_ns == written
        assert second.output.count("| model-a |") == first.output.count("| model-a |") == 2

    def test_sigkill_mid_eval_then_rerun_resends_nothing_written(self, tmp_path: Path, mocks: MockServers) -> None:
        """Killed while the second model generates: the re-run asks only the answers not yet written."""
        import os
        import signal
        import subprocess
        import sys
        import time

        url = mocks.start("--latency-ms", "40")
        n = 30
        (tmp_path / "q.jsonl").write_text("".join(json.dumps({"question": f"What is finding number {i}?"}) + "\n"
                                                  for i in range(n)), encoding="utf-8")
        shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "corpus.jsonl")
        config = tmp_path / "eval.toml"
        config.write_text(
            '[questions]\nfile = "q.jsonl"\n[generate]\nmode = "chat"\napi_key_env = ""\nmax_in_flight = 1\n'
            f'[[models]]\nname = "a"\nbase_url = "{url}"\n[[models]]\nname = "b"\nbase_url = "{url}"\n'
            '[check]\nevidence = "corpus.jsonl"\n', encoding="utf-8")
        answers = tmp_path / "eval-out" / "answers"
        proc = subprocess.Popen([sys.executable, "-m", "dahl", "eval", str(config), "--no-progress"], cwd=REPO,
                                env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(1500):  # poll the output, not the clock: kill once b has a few answers
                b = list(answers.glob("b.*.jsonl")) if answers.is_dir() else []
                if b and b[0].read_bytes().count(b"\n") >= 3:
                    break
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        written = sum(p.read_bytes().count(b"\n") for p in answers.glob("*.jsonl"))
        assert n + 3 <= written < 2 * n
        assert not (tmp_path / "eval-out" / "leaderboard").exists()
        sent_before = mocks.stats(url)["requests"]
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.OK, result.output
        assert f"0 answers written of {n} ({n} resumed)" in result.output  # model a: nothing asked again
        assert mocks.stats(url)["requests"] - sent_before <= 2 * n - written
        assert f"{2 * n} answers scored now" in result.output
        assert (tmp_path / "eval-out" / "leaderboard" / "board.md").is_file()

    def test_lost_score_step_is_redone_without_generating(self, example: tuple[Path, str], mocks: MockServers) -> None:
        """Stopped after generating (no score/ folder): the re-run scores every answer and asks the model nothing."""
        config, url = example
        assert _eval(str(config)).exit_code == ExitStatus.OK
        shutil.rmtree(config.parent / "eval-out" / "score")
        shutil.rmtree(config.parent / "eval-out" / "leaderboard")
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.OK, result.output
        assert mocks.stats(url)["requests"] == 8
        assert "8 answers scored now, 0 resumed" in result.output
        assert (config.parent / "eval-out" / "leaderboard" / "board.png").is_file()

    def test_changed_temperature_regenerates_that_model_only(self, example: tuple[Path, str],
                                                             mocks: MockServers) -> None:
        """One model's temperature changed: 4 new requests, its 4 answers scored anew, the other's resumed."""
        config, url = example
        assert _eval(str(config)).exit_code == ExitStatus.OK
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace('name = "model-b"\n', 'name = "model-b"\ntemperature = 0.9\n'), encoding="utf-8")
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.OK, result.output
        assert mocks.stats(url)["requests"] == 12
        assert "4 answers scored now, 4 resumed" in result.output
        answers = sorted(p.name.split(".")[0] for p in (config.parent / "eval-out" / "answers").glob("*.jsonl"))
        assert answers == ["model-a", "model-b", "model-b"]  # the superseded file is kept
        summary = json.loads((config.parent / "eval-out" / "score" / "summary.json").read_text(encoding="utf-8"))
        assert summary["changes"]["answers_dropped"] == 4
        assert {m: b["n_answers"] for m, b in summary["models"].items()} == {"model-a": 4, "model-b": 4}

    def test_changed_leaderboard_setting_recomputes_only_the_board(self, example: tuple[Path, str],
                                                                   mocks: MockServers) -> None:
        """Another n_boot: no request, nothing re-scored, the leaderboard written again."""
        config, url = example
        assert _eval(str(config)).exit_code == ExitStatus.OK
        config.write_text(config.read_text(encoding="utf-8") + "n_boot = 200\n", encoding="utf-8")
        result = _eval(str(config))
        assert result.exit_code == ExitStatus.OK, result.output
        assert mocks.stats(url)["requests"] == 8
        assert "0 answers scored now, 8 resumed" in result.output
        assert "leaderboard written" in result.output
        board = json.loads((config.parent / "eval-out" / "leaderboard" / "board.json").read_text(encoding="utf-8"))
        assert board["settings"]["n_boot"] == 200


class TestEvalSteps:
    """The questions sample and the answers files of the steps."""

    def test_sampled_questions_are_answered_and_kept(self, example: tuple[Path, str], mocks: MockServers) -> None:
        """fraction = 0.5 of 4 questions in 3 categories: OUT/questions/questions.csv holds the sample,
        each model answers only it, and a re-run leaves the file as it was."""
        config, url = example
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace('file = "questions.csv"', 'file = "questions.csv"\nfraction = 0.5'),
                          encoding="utf-8")
        assert _eval(str(config)).exit_code == ExitStatus.OK
        sample = config.parent / "eval-out" / "questions" / "questions.csv"
        rows = sample.read_text(encoding="utf-8").splitlines()
        assert rows[0] == "question,category" and len(rows) - 1 == 2
        assert mocks.stats(url)["requests"] == 2 * 2
        written = sample.stat().st_mtime_ns
        assert _eval(str(config)).exit_code == ExitStatus.OK
        assert sample.stat().st_mtime_ns == written and mocks.stats(url)["requests"] == 4

    def test_answers_file_follows_the_answer_ids_not_the_server(self, tmp_path: Path) -> None:
        """Another server keeps a model's answers file; another template or max_tokens starts a new one."""
        import dataclasses

        from dahl.generate._templates import load_template
        from dahl.run._eval import answers_file

        (model, _) = load_eval_config(EXAMPLE / "eval.toml").models
        path = answers_file(tmp_path, model, "ab" * 32)
        assert path.parent == tmp_path / "answers" and path.name.startswith("model-a.")
        moved = dataclasses.replace(model, endpoint=dataclasses.replace(model.endpoint, base_url="http://x:1/v1"))
        assert answers_file(tmp_path, moved, "ab" * 32) == path
        longer = dataclasses.replace(model, endpoint=dataclasses.replace(model.endpoint, max_tokens=512))
        template = tmp_path / "t.txt"
        template.write_text("Answer briefly: {question}", encoding="utf-8")
        others = {answers_file(tmp_path, longer, "ab" * 32), answers_file(tmp_path, model, "cd" * 32),
                  answers_file(tmp_path, model, "ab" * 32, load_template(template))}
        assert len(others) == 3 and path not in others


class TestEvalConfig:
    """The config file: relative paths, defaults, and errors naming the file and key."""

    def test_paths_are_relative_to_the_config_folder(self) -> None:
        """questions, evidence and output resolve beside the config; the DAHL paper's sampling is the default."""
        config = load_eval_config(EXAMPLE / "eval.toml")
        assert config.questions.file == EXAMPLE / "questions.csv"
        assert config.adapters.evidence == REPO / "examples" / "corpus.jsonl"
        assert config.out_dir == EXAMPLE / "eval-out"
        assert [(m.name, m.mode, m.endpoint.temperature, m.endpoint.max_tokens, m.endpoint.api_key_env)
                for m in config.models] == [("model-a", "chat", 0.6, 256, ""), ("model-b", "chat", 0.6, 256, "")]
        assert (config.leaderboard.metric, config.leaderboard.compare) == ("dahl_score", "all")

    @pytest.mark.parametrize(
        ("edit", "message"),
        [
            pytest.param(lambda t: t + "\n[score]\nlambda = 1\n", "[score]: unknown key 'lambda' (known: gamma, k)",
                         id="unknown-key"),
            pytest.param(lambda t: "colour = 1\n" + t, "unknown key or table 'colour'", id="unknown-table"),
            pytest.param(lambda t: t.replace('file = "questions.csv"', 'file = "nope.csv"'),
                         "[questions]: file: ", id="missing-file"),
            pytest.param(lambda t: t.replace("temperature = 0.6", 'temperature = "hot"'),
                         "[generate]: temperature must be a number, got 'hot'", id="wrong-type"),
            pytest.param(lambda t: t.replace('name = "model-b"', 'name = "model-a"'),
                         "[[models]] name given twice: model-a", id="duplicate-model"),
            pytest.param(lambda t: t.replace('mode = "chat"', 'mode = "base"'),
                         "[[models]] 'model-a': mode must be one of completion, chat, got 'base'", id="bad-mode"),
            pytest.param(lambda t: t.replace('kind = "evidence"', 'kind = "replay"'),
                         "[check]: kind must be one of evidence, nli, openai, fake, got 'replay'", id="bad-checker"),
            pytest.param(lambda t: t.replace('metric = "dahl_score"', 'metric = "accuracy"'),
                         "[leaderboard]: metric must be one of dahl_score", id="bad-metric"),
            pytest.param(lambda t: t.replace("[questions]", "[questions]\nfraction = 1.5"),
                         "[questions]: fraction must be in (0, 1], got 1.5", id="bad-fraction"),
            pytest.param(lambda t: t + '\n[refs]\nfile = "refs.jsonl"\n', "[refs]: file: ", id="missing-refs"),
            pytest.param(lambda t: t.replace('name = "model-a"\n', 'name = "model-a"\nsamples = 0\n'),
                         "[[models]] 'model-a': samples must be >= 1, got 0", id="bad-samples"),
            pytest.param(lambda t: t.replace("[questions]", "[questions]\nseed = -1"),
                         "[questions]: seed must be >= 0, got -1", id="negative-sample-seed"),
            pytest.param(lambda t: t.replace('compare = "all"', 'compare = "all"\nseed = -3'),
                         "[leaderboard]: seed must be >= 0, got -3", id="negative-bootstrap-seed"),
            pytest.param(lambda t: t.replace('compare = "all"', 'compare = "all"\nn_boot = 100000000000'),
                         "[leaderboard]: n_boot must be in [1, 10,000,000], got 100,000,000,000", id="huge-n-boot"),
            pytest.param(lambda t: t + "\n[score]\nk = 99999999999999999999\n",
                         "[score]: gamma must be a finite number >= 0 and k in [1, 2**63)", id="huge-k"),
            pytest.param(lambda t: t + "\n[score]\ngamma = nan\n", "[score]: gamma must be a finite number >= 0 and k in [1, 2**63)",
                         id="nan-gamma"),
            pytest.param(lambda t: t.replace('kind = "rules"', 'kind = "rules"\nmodel = "gpt"'),
                         '[split]: model: endpoint keys need kind = "openai"', id="endpoint-without-openai"),
        ],
    )
    def test_bad_config_names_file_and_key(self, tmp_path: Path, edit: Any, message: str) -> None:
        """Each mistake is one ConfigError naming the config file and the key."""
        folder = tmp_path / "eval"
        shutil.copytree(EXAMPLE, folder)
        shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "corpus.jsonl")
        path = folder / "eval.toml"
        path.write_text(edit(path.read_text(encoding="utf-8")), encoding="utf-8")
        with pytest.raises(ConfigError) as info:
            load_eval_config(path)
        assert str(info.value).startswith(f"{path}: ")
        assert message in str(info.value)

    def test_example_reads_the_mock_url_from_the_environment(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The example hard-codes no port: its models' base_url is ${DAHL_MOCK_URL}/v1; unset, the error names it."""
        monkeypatch.setenv("DAHL_MOCK_URL", "http://127.0.0.1:4321")
        assert [m.endpoint.base_url for m in load_eval_config(EXAMPLE / "eval.toml").models] == [
            "http://127.0.0.1:4321/v1", "http://127.0.0.1:4321/v1"]
        monkeypatch.delenv("DAHL_MOCK_URL")
        with pytest.raises(ConfigError) as info:
            load_eval_config(EXAMPLE / "eval.toml")
        assert str(info.value) == (f"{EXAMPLE / 'eval.toml'}: [[models]] 'model-a': base_url needs environment "
                                   "variable DAHL_MOCK_URL, which is not set")

    def test_check_table_takes_provider_auth_and_headers(self, tmp_path: Path) -> None:
        """[check] kind = "openai" takes provider, auth and headers as dahl score --config does (they were unknown keys)."""
        folder = tmp_path / "eval"
        shutil.copytree(EXAMPLE, folder)
        shutil.copy(REPO / "examples" / "corpus.jsonl", tmp_path / "corpus.jsonl")
        path = folder / "eval.toml"
        path.write_text(path.read_text(encoding="utf-8").replace(
            'kind = "evidence"', 'kind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "claude-3-5-haiku"\n'
            'provider = "anthropic"\nauth = "none"\nheaders = { "X-Proxy" = "${PROXY}" }'), encoding="utf-8")
        cfg = load_eval_config(path).adapters.check_endpoint
        assert cfg is not None
        assert (cfg.provider, cfg.auth, cfg.api_key_env, dict(cfg.headers), cfg.request_url) == (
            "anthropic", "none", "", {"X-Proxy": "${PROXY}"}, "http://127.0.0.1:9/v1/messages")

    def test_cli_bad_config_exits_2_with_one_line(self, tmp_path: Path) -> None:
        """dahl eval on a config without [[models]]: exit status 2 and the reason."""
        path = tmp_path / "eval.toml"
        path.write_text('[questions]\nfile = "q.csv"\n', encoding="utf-8")
        result = _eval(str(path))
        assert result.exit_code == ExitStatus.USAGE
        assert f"error: {path}: needs at least one [[models]] table (name, base_url)" in result.output
