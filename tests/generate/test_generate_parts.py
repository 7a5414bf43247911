"""dahl generate's parts without a server: templates, questions, ids, the answers file, the mock's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.mock_generate import AnswerOracle, generated_text, question_of, truncate
from dahl.config import EndpointConfig
from dahl.errors import ConfigError, InputError
from dahl.generate._answers import answer_id, cache_key
from dahl.generate._sampler import Sampler
from dahl.generate._output import AnswerLog, finished_ids
from dahl.generate._questions import GenQuestion, read_questions
from dahl.generate._templates import GENERATE_TEMPLATES, load_template, shipped_templates
from dahl.preprocess import preprocess
from tests.conftest import require_data

SAMPLING = {"mode": "completion", "temperature": 0.6, "max_tokens": 256, "top_p": None, "seed": None}


class TestTemplates:
    def test_completion_template_is_the_papers_plain_prompt(self) -> None:
        """The shipped completion template wraps the question as 'Question: ...\\nAnswer:'."""
        assert GENERATE_TEMPLATES["completion"].render("Why {x}?") == "Question: Why {x}?\nAnswer:"
        assert GENERATE_TEMPLATES["chat"].render("Why?") == "Why?"

    def test_file_template_is_versioned_by_its_content(self, tmp_path: Path) -> None:
        """Two files with the same text share a version; an edit changes it."""
        a, b = tmp_path / "a.txt", tmp_path / "b.txt"
        a.write_text("Q: {question}\nA:", encoding="utf-8")
        b.write_text("Q: {question}\nA:", encoding="utf-8")
        first = load_template(a)
        assert first.version == load_template(b).version
        assert first.version.startswith("file:") and len(first.version) == 5 + 16
        b.write_text("Q: {question}\nA: ", encoding="utf-8")
        assert load_template(b).version != first.version

    def test_template_without_placeholder_is_refused(self, tmp_path: Path) -> None:
        """A template file with no {question} is a ConfigError naming the file."""
        path = tmp_path / "t.txt"
        path.write_text("Answer this:", encoding="utf-8")
        with pytest.raises(ConfigError, match=r"t\.txt: missing placeholder \{question\}"):
            load_template(path)

    def test_shipped_list_names_every_stage(self) -> None:
        """dahl templates lists every prompted stage (generate, split, check, cover, refs, questions) with its version."""
        listed = [(stage, version) for stage, version, _ in shipped_templates()]
        assert listed == [
            ("generate", "generate-completion/v1"), ("generate", "generate-chat/v1"), ("split", "split/v1"),
            ("check", "check/v1"), ("check-evidence", "check-evidence/v1"), ("cover", "cover/v1"),
            ("extract", "refs-extract/v1"), ("rate", "refs-rate/v1"),
            ("questions", "questions-generate/v1"), ("judge", "questions-judge/v1"),
        ]


    def test_templates_command_prints_the_list(self) -> None:
        """dahl templates prints one line per shipped template, stage first."""
        from click.testing import CliRunner

        from dahl.cli import main

        result = CliRunner().invoke(main, ["templates"])
        assert result.exit_code == 0
        lines = result.output.splitlines()
        assert len(lines) == 10
        assert lines[0].split()[:2] == ["generate", "generate-completion/v1"]
        assert lines[5].split()[:2] == ["cover", "cover/v1"]


class TestQuestions:
    def test_csv_with_category(self, tmp_path: Path) -> None:
        """A DAHL-style CSV gives question and category, rows numbered as the file's lines."""
        path = tmp_path / "q.csv"
        path.write_text('\ufeffquestion,category\n"What is A, really?",pediatrics\nWhy B?,surgery\n', encoding="utf-8")
        assert list(read_questions(path)) == [
            GenQuestion("What is A, really?", "pediatrics", None, 2), GenQuestion("Why B?", "surgery", None, 3),
        ]

    def test_longfact_prompt_jsonl(self, tmp_path: Path) -> None:
        """LongFact's {"prompt": ...} lines are questions of category 'all'; ids are kept."""
        path = tmp_path / "q.jsonl"
        path.write_text('{"prompt": "Tell me about X.", "canary": "c"}\n\n{"question": "Y?", "question_id": 7}\n')
        assert list(read_questions(path)) == [
            GenQuestion("Tell me about X.", "all", None, 1), GenQuestion("Y?", "all", "7", 3),
        ]

    def test_missing_question_names_file_line_and_field(self, tmp_path: Path) -> None:
        """A record without question or prompt is an InputError at its line."""
        path = tmp_path / "q.jsonl"
        path.write_text('{"question": "A?"}\n{"text": "B?"}\n')
        with pytest.raises(InputError) as caught:
            list(read_questions(path))
        assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 2, "question")

    def test_malformed_csv_names_file_and_line(self, tmp_path: Path) -> None:
        """A CSV field over csv's 131,072-character limit is an InputError naming file and line (was a csv.Error traceback)."""
        path = tmp_path / "q.csv"
        path.write_text("question,category\nWhat?,x\n" + "Q" * 200_000 + "?,y\n", encoding="utf-8")
        questions = read_questions(path)
        assert next(questions).question == "What?"
        with pytest.raises(InputError) as info:
            next(questions)
        assert str(info.value) == f"{path}:3: malformed CSV: field larger than field limit (131072)"

    def test_reads_the_dahl_questions(self) -> None:
        """The shared DAHL questions.csv reads whole: 8,573 questions, each with a category."""
        path = require_data("dahl/questions.csv")
        questions = list(read_questions(path))
        assert len(questions) == 8573
        assert all(q.category != "all" for q in questions)


class TestIds:
    def test_answer_id_is_stable_and_changes_with_each_setting(self) -> None:
        """Same inputs, same id; a changed temperature, sample, template or model gives a new one."""
        base = answer_id("Q?", "m", "generate-completion/v1", SAMPLING, 0)
        assert base == answer_id("Q?", "m", "generate-completion/v1", dict(SAMPLING), 0)
        others = {
            answer_id("Q?", "m", "generate-completion/v1", {**SAMPLING, "temperature": 0.7}, 0),
            answer_id("Q?", "m", "generate-completion/v1", SAMPLING, 1),
            answer_id("Q?", "m", "file:0123456789abcdef", SAMPLING, 0),
            answer_id("Q?", "m2", "generate-completion/v1", SAMPLING, 0),
        }
        assert len(others) == 4 and base not in others and len(base) == 32

    def test_cache_key_separates_samples_with_equal_bodies(self) -> None:
        """Samples without a seed send the same body; the sample index keeps their replies apart."""
        body = {"model": "m", "prompt": "Question: Q?\nAnswer:", "temperature": 0.6, "max_tokens": 256}
        assert cache_key("u", "t", body, 0) != cache_key("u", "t", body, 1)
        assert cache_key("u", "t", body, 0) == cache_key("u", "t", dict(reversed(list(body.items()))), 0)


class TestBody:
    def test_completion_and_chat_bodies(self) -> None:
        """Completion mode sends the rendered prompt, chat mode one user message; seed is seed + sample."""
        cfg = EndpointConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key_env="", temperature=0.6, seed=3)
        completion = Sampler(cfg, None, None, "completion", GENERATE_TEMPLATES["completion"],  # type: ignore[arg-type]
                             0.9, ("\nQuestion:",))
        assert completion.url == "http://127.0.0.1:1/v1/completions"
        assert completion.body("Why?", 2) == {
            "model": "m", "prompt": "Question: Why?\nAnswer:", "temperature": 0.6, "max_tokens": 256,
            "top_p": 0.9, "seed": 5, "stop": ["\nQuestion:"],
        }
        chat = Sampler(cfg, None, None, "chat", GENERATE_TEMPLATES["chat"], None)  # type: ignore[arg-type]
        assert chat.url == "http://127.0.0.1:1/v1/chat/completions"
        assert chat.body("Why?", 0) == {
            "model": "m", "messages": [{"role": "user", "content": "Why?"}], "temperature": 0.6,
            "max_tokens": 256, "seed": 3,
        }


class TestAnswerLog:
    def test_a_line_cut_by_a_kill_is_dropped_on_reopen(self, tmp_path: Path) -> None:
        """An unfinished last line is not counted as done and is cut off before appending."""
        path = tmp_path / "a.jsonl"
        path.write_bytes(b'{"id": "a", "question": "Q"}\n{"id": "b", "quest')
        assert finished_ids(path) == {"a"}
        log = AnswerLog(path)
        log.write({"id": "c"})
        log.close()
        assert path.read_bytes() == b'{"id": "a", "question": "Q"}\n{"id":"c"}\n'

    def test_another_file_is_refused(self, tmp_path: Path) -> None:
        """An output whose lines have no id is an InputError naming its line."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"id": "a"}\n{"question": "Q"}\n')
        with pytest.raises(InputError) as caught:
            finished_ids(path)
        assert (caught.value.line, caught.value.field) == (2, "id")


class TestFinishReason:
    LIST = "Risk factors are:\n- Smoking.\n- Obesity"

    def test_without_a_reason_a_list_item_is_kept(self) -> None:
        """Text alone: a last list item without a period is a legitimate ending."""
        assert preprocess("Q?", self.LIST).removed == ()

    def test_length_removes_the_cut_last_item(self) -> None:
        """finish_reason length: the last sentence without a terminal mark was cut off."""
        pre = preprocess("Q?", self.LIST, finish_reason="length")
        assert [(r.kind, r.text) for r in pre.removed] == [("truncated", "- Obesity")]
        assert pre.text == "Risk factors are:\n- Smoking."

    def test_stop_keeps_a_sentence_without_a_period(self) -> None:
        """finish_reason stop: the model ended on its own, nothing was cut."""
        text = "Aspirin thins the blood. It is taken daily by many"
        assert [r.kind for r in preprocess("Q?", text).removed] == ["truncated"]
        assert preprocess("Q?", text, finish_reason="stop").removed == ()

    def test_length_keeps_a_complete_last_sentence(self) -> None:
        """A reply cut exactly at a sentence end loses nothing."""
        assert preprocess("Q?", "A is B. C is D.", finish_reason="length").removed == ()


class TestMockText:
    def test_question_is_unwrapped_from_the_completion_prompt(self) -> None:
        """'Question: X\\nAnswer:' gives X; any other prompt is the question itself."""
        assert question_of("Question: Why?\nAnswer:") == "Why?"
        assert question_of("  Why?  ") == "Why?"

    def test_truncation(self) -> None:
        """--finish-length cuts the last sentence in half; a long reply is cut at 4 * max_tokens chars."""
        assert truncate("A b. C d e f.", 256, cut_last=True) == ("A b. C d", "length")
        assert truncate("A b. C d e f.", 256, cut_last=False) == ("A b. C d e f.", "stop")
        assert truncate("abcdefghij", 2, cut_last=False) == ("abcdefgh", "length")

    def test_oracle_answers_and_default_text(self, tmp_path: Path) -> None:
        """A known question gets its given text (compared normalized); others three deterministic sentences."""
        path = tmp_path / "o.jsonl"
        path.write_text('{"question": "Is  X good?", "response": "X is good."}\n')
        oracle = AnswerOracle.load(path)
        assert generated_text("Is X good?", "m", oracle) == "X is good."
        other = generated_text("Is Y good?", "m", oracle)
        assert other == generated_text("Is Y good?", "m", None) and other.count(". ") == 2
