"""Prompt templates replaceable by files (issue 17 §3): loading, validation, and their effect on
cache keys, summaries and comparability, end to end against the loopback mock.

``mocks`` is the MockServers fixture of tests/conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.adapters import _prompts as prompts
from dahl.cli import main
from dahl.config import load_templates
from dahl.errors import ConfigError
from dahl.exit_status import ExitStatus
from dahl.generate._templates import shipped_prompt_templates
from dahl.records import content_id
from dahl.analysis._runs import differences, run_info
from dahl.templates import PromptTemplate, load_prompt_template, to_toml

ANSWERS = [
    {"id": "a1", "question": "What is metformin?", "model": "m",
     "response": "Metformin is a drug for type 2 diabetes. It lowers glucose production in the liver."},
    {"id": "a2", "question": "Who was Marie Curie?", "model": "m",
     "response": "Marie Curie was a physicist. She won the Nobel prize in physics. She was born in Warsaw."},
]


def _edited(stage: str, tmp_path: Path, note: str = "Be careful.") -> Path:
    """The shipped ``stage`` template as a file, its system part with one more sentence."""
    shipped = next(t for t in shipped_prompt_templates() if t.stage == stage)
    text = to_toml(shipped)
    assert text.count("system = '''\n") == 1
    path = tmp_path / f"{stage}-{abs(hash(note))}.toml"
    path.write_text(text.replace("system = '''\n", f"system = '''\n{note}\n"), encoding="utf-8")
    return path


def _with_user_sentence(stage: str, tmp_path: Path, tag: str, sentence: str = "Aspirin is an analgesic.") -> Path:
    """The shipped ``stage`` template as a file whose ``<tag>`` data block starts with ``sentence``."""
    shipped = next(t for t in shipped_prompt_templates() if t.stage == stage)
    text = to_toml(shipped)
    assert text.count(f"<{tag}>\n{{") == 1
    path = tmp_path / f"{stage}-user.toml"
    path.write_text(text.replace(f"<{tag}>\n{{", f"<{tag}>\n{sentence} {{"), encoding="utf-8")
    return path


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


class TestPromptTemplate:
    @pytest.mark.parametrize("template", shipped_prompt_templates(), ids=lambda t: t.version)
    def test_shown_template_loads_back_to_the_shipped_text(self, template: PromptTemplate, tmp_path: Path) -> None:
        """dahl templates --show output (to_toml) loads as a file with the shipped parts, versioned by content."""
        path = tmp_path / "t.toml"
        path.write_text(to_toml(template), encoding="utf-8")
        loaded = load_prompt_template(template.stage, path)
        assert (loaded.system, loaded.user, loaded.source) == (template.system, template.user, "file")
        assert loaded.version.startswith("file:") and len(loaded.version) == 5 + 16

    @pytest.mark.parametrize(("version", "how"), [
        ("generate-completion/v1", "pass dahl generate --template FILE"),
        ("check/v1", "pass --template check=FILE")], ids=["generate", "check"])
    def test_shown_template_says_how_to_pass_it(self, version: str, how: str) -> None:
        """The first line names the option as the command takes it (dahl generate --template FILE, not generate=FILE)."""
        template = next(t for t in shipped_prompt_templates() if t.version == version)
        assert to_toml(template).splitlines()[0] == f"# {template.stage} template {version}; edit it and {how}"

    def test_plain_text_is_the_user_part_alone(self, tmp_path: Path) -> None:
        """A .txt file is the user message; no system message is sent."""
        path = tmp_path / "check.txt"
        path.write_text("Q: {question}\nIs this true? <claim>{claim}</claim> {{claim}} {\"label\": 1}")
        template = load_prompt_template("check", path)
        assert template.messages({"question": "Why {answer}?", "claim": "X"}) == [
            {"role": "user", "content": "Q: Why {answer}?\nIs this true? <claim>X</claim> {claim} {\"label\": 1}"}]

    def test_same_text_same_version_edit_changes_it(self, tmp_path: Path) -> None:
        """Two files with one text share a version (the path is not in it); one more character changes it."""
        a, b = tmp_path / "a.txt", tmp_path / "sub-b.txt"
        a.write_text("<claim>{claim}</claim> {question}")
        b.write_text("<claim>{claim}</claim> {question}")
        assert load_prompt_template("check", a).version == load_prompt_template("check", b).version
        b.write_text("<claim>{claim}</claim> {question}.")
        assert load_prompt_template("check", a).version != load_prompt_template("check", b).version

    @pytest.mark.parametrize(("stage", "text", "message"), [
        ("split", "<answer>{answer}</answer> {question} {claim}",
         r"unknown placeholder \{claim\} in the user part \(the split template takes \{question\}, \{answer\}, "
         r"\{output\}, \{demos\}\)"),
        ("split", "<answer>{answer}</answer>", r"missing placeholder \{question\}"),
        ("rate", 'system = "{facts}"\nuser = "{question} {facts}"',
         r"placeholder \{facts\} is data under evaluation and belongs in the user part"),
        ("cover", 'user = "{question}"\nsytem = "x"', r"unknown key 'sytem'"),
    ], ids=["unknown", "missing", "data-in-system", "toml-key"])
    def test_bad_template_names_file_and_placeholder(self, stage: str, text: str, message: str,
                                                     tmp_path: Path) -> None:
        """A bad template is a ConfigError naming the option, the stage, the file and the fault."""
        path = tmp_path / ("bad.toml" if "user =" in text else "bad.txt")
        path.write_text(text)
        with pytest.raises(ConfigError, match=rf"--template {stage}=.*{path.name}: {message}"):
            load_prompt_template(stage, path)

    def test_config_templates_table_is_relative_to_the_config(self, tmp_path: Path) -> None:
        """[templates] split = "t/split.toml" in a config file loads tmp/t/split.toml."""
        (tmp_path / "t").mkdir()
        split = _edited("split", tmp_path / "t")
        config = tmp_path / "run.toml"
        config.write_text(f'[templates]\nsplit = "t/{split.name}"\n')
        loaded = load_templates(config)
        assert list(loaded) == ["split"] and loaded["split"].system is not None
        assert loaded["split"].system.startswith("Be careful.\nYou split")


class TestBodies:
    @pytest.mark.parametrize("stage", ["split", "check", "check-evidence", "cover"])
    def test_endpoint_template_is_in_the_body_and_fingerprint(self, stage: str, tmp_path: Path) -> None:
        """An EndpointConfig's template for the stage is the body's system message and the fingerprint's version."""
        from dahl.adapters._bodies import check_request_body, endpoint_fingerprint, split_request_body
        from dahl.adapters._coverage import cover_request_body
        from dahl.config import EndpointConfig

        template = load_prompt_template(stage, _edited(stage, tmp_path, "Note 17."))
        cfg = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="", templates={stage: template})
        if stage == "split":
            body = split_request_body(cfg, "Q?", "A.")
        elif stage == "cover":
            body = cover_request_body(cfg, "Q?", "A.", ["F."], fmt="text")
        else:
            evidence = [("d1", "T", "Text.")] if stage == "check-evidence" else None
            body = check_request_body(cfg, "Q?", "C.", evidence=evidence)
            assert f"|template={template.version}|" in endpoint_fingerprint(
                cfg, "check", with_evidence=evidence is not None)
        assert body["messages"][0]["content"].startswith("Note 17.\n")
        assert len(body["messages"]) == 2


class TestScoreTemplates:
    @pytest.fixture(autouse=True)
    def api_key(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("DAHL_TEST_KEY", "sk-test-key-one")

    @staticmethod
    def _score(answers: Path, out: Path, url: str, *extra: str) -> tuple[int, str]:
        args = ["score", str(answers), "-o", str(out), "--no-progress", "--splitter", "openai", "--checker",
                "openai", "--base-url", url, "--model", "mock", "--api-key-env", "DAHL_TEST_KEY", *extra]
        result = CliRunner().invoke(main, args)
        return result.exit_code, result.output

    @staticmethod
    def _sent(mocks: Any, url: str, before: dict[str, int]) -> tuple[int, int]:
        """(split, check) requests since ``before``."""
        stats = mocks.stats(url)
        return stats["split"] - before["split"], stats["check"] - before["check"]

    def test_split_and_check_templates_change_their_keys_only(self, mocks: Any, tmp_path: Path) -> None:
        """A split template that adds a sentence to each answer block re-sends the 2 splits and checks only
        the 2 new claims; a check template re-sends all 7 checks; the same files again send 0; the
        summary names each stage's template."""
        url = mocks.start()
        answers = _write(tmp_path / "answers.jsonl", ANSWERS)
        split, check = _with_user_sentence("split", tmp_path, "answer"), _edited("check", tmp_path)
        code, text = self._score(answers, tmp_path / "shipped", url)
        assert code == ExitStatus.OK, text
        assert self._sent(mocks, url, {"split": 0, "check": 0}) == (2, 5)
        before = mocks.stats(url)
        code, text = self._score(answers, tmp_path / "own-split", url, "--template", f"split={split}")
        assert code == ExitStatus.OK, text
        assert self._sent(mocks, url, before) == (2, 2)  # the 5 old claims' checks are cached
        rows = [json.loads(line) for line in (tmp_path / "own-split" / "answers.jsonl").read_text().splitlines()]
        assert [c["text"] for c in rows[0]["claims"]][0] == "Aspirin is an analgesic."
        assert sum(len(r["claims"]) for r in rows) == 7
        before = mocks.stats(url)
        code, text = self._score(answers, tmp_path / "both", url, "--template", f"split={split}",
                                 "--template", f"check={check}")
        assert code == ExitStatus.OK, text
        assert self._sent(mocks, url, before) == (0, 7)
        before = mocks.stats(url)
        code, text = self._score(answers, tmp_path / "again", url, "--template", f"split={split}",
                                 "--template", f"check={check}")
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["requests"] == before["requests"]
        summary = json.loads((tmp_path / "both" / "summary.json").read_text())
        split_version = load_prompt_template("split", split).version
        assert summary["config"]["templates"] == [
            {"stage": "split", "version": split_version, "source": "file"},
            {"stage": "check", "version": load_prompt_template("check", check).version, "source": "file"}]
        shipped = json.loads((tmp_path / "shipped" / "summary.json").read_text())["config"]["templates"]
        assert shipped == [{"stage": "split", "version": "split/v1", "source": "shipped"},
                           {"stage": "check", "version": "check/v1", "source": "shipped"}]
        found = differences([run_info(tmp_path / "shipped"), run_info(tmp_path / "own-split")])
        assert any(line.startswith("runs differ in split prompt template: ") and split_version in line
                   for line in found)
        assert not any("check prompt template" in line for line in found)

    def test_bad_placeholder_exits_2_naming_the_file_before_any_call(self, mocks: Any, tmp_path: Path) -> None:
        """--template check=FILE with {answer} exits 2 naming the file and placeholder; nothing is sent."""
        url = mocks.start()
        answers = _write(tmp_path / "answers.jsonl", ANSWERS)
        bad = tmp_path / "bad-check.txt"
        bad.write_text("<claim>{claim}</claim> {question} {answer}")
        code, text = self._score(answers, tmp_path / "out", url, "--template", f"check={bad}")
        assert code == ExitStatus.USAGE
        assert "bad-check.txt: unknown placeholder {answer} in the user part" in " ".join(text.split())
        assert mocks.stats(url)["requests"] == 0
        assert not (tmp_path / "out" / "answers.jsonl").exists()

    @pytest.mark.parametrize(("args", "message"), [
        (["--splitter", "rules", "--template", "split=SPLIT"], "the rules Splitter uses no prompt"),
        (["--template", "extract=SPLIT"], "this command has no 'extract' prompt"),
        (["--template", "cover=COVER"], "--template cover needs --refs"),
    ], ids=["offline-splitter", "other-command", "cover-without-refs"])
    def test_template_of_an_unprompted_stage_is_refused(self, args: list[str], message: str, tmp_path: Path) -> None:
        """A template the run would not use exits 2 saying why."""
        answers = _write(tmp_path / "answers.jsonl", ANSWERS)
        split, cover = _edited("split", tmp_path), _edited("cover", tmp_path)
        args = [a.replace("SPLIT", str(split)).replace("COVER", str(cover)) for a in args]
        result = CliRunner().invoke(main, ["score", str(answers), "-o", str(tmp_path / "out"), "--checker", "fake",
                                           "--no-progress", *args])
        assert result.exit_code == ExitStatus.USAGE, result.output
        assert message in " ".join(result.output.split())

    def test_cover_template_changes_the_coverage_keys(self, mocks: Any, tmp_path: Path) -> None:
        """recall's cover stage: a template file re-sends the 1 cover call, the same file again sends 0,
        a bad placeholder exits 2 naming the file."""
        url = mocks.start()
        question = "Who was Marie Curie?"
        inputs = _write(tmp_path / "in.jsonl", [{
            "id": "a", "question": question, "response": ANSWERS[1]["response"], "model": "m",
            "claims": [{"text": "Marie Curie was a physicist.", "label": "supported"}]}])
        refs = _write(tmp_path / "refs.jsonl", [{"question_id": content_id(question), "question": question,
                                                  "facts": [{"id": "f1", "text": "Marie Curie was a physicist."},
                                                            {"id": "f2", "text": "Curie was born in Warsaw."}]}])
        cover = _edited("cover", tmp_path)

        def run(out: str, *extra: str) -> tuple[int, str]:
            result = CliRunner().invoke(main, [
                "score", str(inputs), "--splitter", "given", "--checker", "replay", "-o", str(tmp_path / out),
                "--no-progress", "--refs", str(refs), "--coverage", "openai", "--base-url", url, "--model", "mock",
                "--api-key-env", "", *extra])
            return result.exit_code, result.output

        assert run("shipped")[0] == ExitStatus.OK
        assert mocks.stats(url)["cover"] == 1
        code, text = run("own", "--template", f"cover={cover}")
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["cover"] == 2
        assert run("again", "--template", f"cover={cover}")[0] == ExitStatus.OK
        assert mocks.stats(url)["cover"] == 2
        summary = json.loads((tmp_path / "own" / "summary.json").read_text())
        assert summary["config"]["templates"] == [
            {"stage": "cover", "version": load_prompt_template("cover", cover).version, "source": "file"}]
        found = differences([run_info(tmp_path / "shipped"), run_info(tmp_path / "own")])
        assert [line.split(":")[0] for line in found] == ["runs differ in cover prompt template"]
        bad = tmp_path / "cover.txt"
        bad.write_text("<response>{response}</response> {facts}")
        code, text = run("bad", "--template", f"cover={bad}")
        assert code == ExitStatus.USAGE
        assert "cover.txt: missing placeholder {question}" in " ".join(text.split())
        assert mocks.stats(url)["requests"] == 2


class TestBuildTemplates:
    def test_judge_template_re_judges_and_reruns_send_nothing(self, mocks: Any, tmp_path: Path) -> None:
        """questions build --template judge=FILE: 0 generation and 3 judge calls again, the CSV's prompt
        version names the file's hash; the same file again sends 0; a bad placeholder exits 2."""
        url = mocks.start()
        articles = _write(tmp_path / "articles.jsonl", [
            {"id": "a1", "title": "Metformin", "text": "Metformin lowers glucose production. It is first-line "
             "therapy for type 2 diabetes."}])
        judge = _edited("judge", tmp_path)

        def build(out: str, *extra: str) -> tuple[int, str]:
            result = CliRunner().invoke(main, [
                "questions", "build", str(articles), "-o", str(tmp_path / out), "--per-article", "3",
                "--base-url", url, "--model", "mock", "--api-key-env", "", "--no-progress", *extra])
            return result.exit_code, result.output

        assert build("shipped.csv")[0] == ExitStatus.OK
        assert mocks.stats(url)["kinds"] == {"questions": 1, "judge": 3}
        code, text = build("own.csv", "--template", f"judge={judge}")
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["kinds"] == {"questions": 1, "judge": 6}
        rows = (tmp_path / "own.csv").read_text().splitlines()
        version = load_prompt_template("judge", judge).version
        assert f"questions-generate/v1+{version}" in rows[1]
        assert build("again.csv", "--template", f"judge={judge}")[0] == ExitStatus.OK
        assert mocks.stats(url)["requests"] == 4 + 3
        bad = tmp_path / "judge.txt"
        bad.write_text("<exam_question>{question}</exam_question> {category}")
        code, text = build("bad.csv", "--template", f"judge={bad}")
        assert code == ExitStatus.USAGE
        assert "judge.txt: unknown placeholder {category}" in " ".join(text.split())

    def test_extract_template_reaches_the_request(self, mocks: Any, tmp_path: Path) -> None:
        """refs build --template extract=FILE whose source block starts with one more sentence: the mock
        extracts it as a 4th fact (1 new call); the same file again sends 0."""
        url = mocks.start()
        corpus = _write(tmp_path / "corpus.jsonl", [{"id": "curie", "title": "Marie Curie", "text": ANSWERS[1]["response"]}])
        questions = _write(tmp_path / "q.jsonl", [{"question_id": "q1", "question": "Who was Marie Curie?",
                                                    "doc_ids": ["curie"]}])
        extract = _with_user_sentence("extract", tmp_path, "source_text")

        def build(out: str, *extra: str) -> list[str]:
            result = CliRunner().invoke(main, [
                "refs", "build", str(questions), "-o", str(tmp_path / out), "--evidence", str(corpus),
                "--extractor", "openai", "--base-url", url, "--model", "mock", "--api-key-env", "",
                "--no-progress", *extra])
            assert result.exit_code == ExitStatus.OK, result.output
            return [f["text"] for f in json.loads((tmp_path / out).read_text())["facts"]]

        assert build("shipped.jsonl") == ["Marie Curie was a physicist.", "She won the Nobel prize in physics.",
                                          "She was born in Warsaw."]
        assert build("own.jsonl", "--template", f"extract={extract}")[0] == "Aspirin is an analgesic."
        assert mocks.stats(url)["kinds"] == {"extract": 2}
        build("again.jsonl", "--template", f"extract={extract}")
        assert mocks.stats(url)["requests"] == 2

    def test_refs_extract_template_on_the_rule_extractor_is_refused(self, tmp_path: Path) -> None:
        """refs build --template extract=FILE with the offline rule extractor exits 2 saying so."""
        questions = _write(tmp_path / "q.jsonl", [{"question_id": "q1", "question": "Who?"}])
        extract = _edited("extract", tmp_path)
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "-o", str(tmp_path / "refs.jsonl"),
                                           "--template", f"extract={extract}", "--no-progress"])
        assert result.exit_code == ExitStatus.USAGE, result.output
        assert "the rules extractor uses no prompt" in " ".join(result.output.split())


class TestTemplatesCommand:
    def test_show_prints_a_loadable_file_and_check_validates_it(self, tmp_path: Path) -> None:
        """dahl templates --show check prints the shipped check template; --check accepts it and names its version."""
        result = CliRunner().invoke(main, ["templates", "--show", "check"])
        assert result.exit_code == 0
        path = tmp_path / "check.toml"
        path.write_text(result.output)
        assert load_prompt_template("check", path).system == prompts.CHECK_TEMPLATE.system
        checked = CliRunner().invoke(main, ["templates", "--check", f"check={path}"])
        assert checked.exit_code == 0
        version = load_prompt_template("check", path).version
        assert f"is a check template, version {version}, with system and user parts" in checked.output

    def test_check_of_a_bad_file_exits_2(self, tmp_path: Path) -> None:
        """dahl templates --check split=FILE with a missing {answer} exits 2 naming the file."""
        path = tmp_path / "split.txt"
        path.write_text("{question}")
        result = CliRunner().invoke(main, ["templates", "--check", f"split={path}"])
        assert result.exit_code == ExitStatus.USAGE
        assert "split.txt: missing placeholder {answer}" in " ".join(result.output.split())
