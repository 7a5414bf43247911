"""dahl generate end to end against the loopback mock (``mocks`` fixture): both modes,
resume, template override, a cut reply through dahl score, oracle answers."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dahl.cli import main
from tests.conftest import MockServers

QUESTIONS = [
    ("What causes iron deficiency anaemia?", "haematology"),
    ("How is asthma treated in children?", "pediatrics"),
    ("What is the first-line treatment of type 2 diabetes?", "medicine"),
]


def _questions(tmp_path: Path) -> Path:
    path = tmp_path / "questions.csv"
    path.write_text("question,category\n" + "".join(f"{q},{c}\n" for q, c in QUESTIONS), encoding="utf-8")
    return path


def _generate(questions: Path, url: str, out: Path, *extra: str) -> Any:
    return CliRunner().invoke(main, ["generate", str(questions), "--base-url", url, "-o", str(out),
                                     "--api-key-env", "", "--no-progress", *extra])


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class TestModes:
    def test_completion_mode_posts_plain_prompts(self, mocks: MockServers, tmp_path: Path) -> None:
        """Completion mode: one /completions request per (question, model, sample), dahl JSONL out."""
        url = mocks.start()
        out = tmp_path / "answers.jsonl"
        result = _generate(_questions(tmp_path), url, out, "--model", "base-a", "--model", "base-b",
                           "--samples", "2", "--seed", "7", "--stop", "\\nQuestion:")
        assert result.exit_code == 0, result.output
        assert "12 answers written of 12" in result.output
        stats = mocks.stats(url)
        assert (stats["requests"], stats["kinds"]) == (12, {"generate": 12})
        lines = _lines(out)
        assert len({line["id"] for line in lines}) == 12
        first = next(line for line in lines if line["question"] == QUESTIONS[0][0])
        assert first["category"] == "haematology"
        assert first["response"].count(". ") == 2
        assert first["meta"]["template"] == "generate-completion/v1"
        assert first["meta"]["finish_reason"] == "stop"
        assert first["meta"]["usage"]["completion_tokens"] > 0
        seeds = sorted((line["model"], line["meta"]["sample"], line["meta"]["sampling"]["seed"])
                       for line in lines if line["question"] == QUESTIONS[0][0])
        assert seeds == [("base-a", 0, 7), ("base-a", 1, 8), ("base-b", 0, 7), ("base-b", 1, 8)]
        assert {line["meta"]["sampling"]["temperature"] for line in lines} == {0.6}
        assert {line["meta"]["sampling"]["max_tokens"] for line in lines} == {256}
        assert lines[0]["meta"]["sampling"]["stop"] == ["\nQuestion:"]

    def test_chat_mode_posts_chat_requests(self, mocks: MockServers, tmp_path: Path) -> None:
        """Chat mode: /chat/completions requests (untagged: the mock's 'other' kind), chat template."""
        url = mocks.start()
        out = tmp_path / "answers.jsonl"
        result = _generate(_questions(tmp_path), url, out, "--model", "instruct", "--mode", "chat",
                           "--temperature", "0.1", "--top-p", "0.9")
        assert result.exit_code == 0, result.output
        stats = mocks.stats(url)
        assert (stats["requests"], stats["other"]) == (3, 3)
        meta = _lines(out)[0]["meta"]  # the same for every line
        assert meta["template"] == "generate-chat/v1"
        assert meta["sampling"] == {"mode": "chat", "temperature": 0.1, "max_tokens": 256, "top_p": 0.9,
                                    "seed": None, "stop": None}


class TestResume:
    def test_rerun_sends_no_request_and_writes_nothing(self, mocks: MockServers, tmp_path: Path) -> None:
        """The same command again: every answer id is found, 0 requests, the file unchanged."""
        url = mocks.start()
        questions, out = _questions(tmp_path), tmp_path / "answers.jsonl"
        assert _generate(questions, url, out, "--model", "m").exit_code == 0
        before = out.read_bytes()
        again = _generate(questions, url, out, "--model", "m")
        assert again.exit_code == 0, again.output
        assert "0 answers written of 3 (3 resumed)" in again.output
        assert mocks.stats(url)["requests"] == 3
        assert out.read_bytes() == before

    def test_a_new_file_takes_replies_from_the_cache(self, mocks: MockServers, tmp_path: Path) -> None:
        """Another output with the same settings: answers come from the cache, 0 more requests."""
        url = mocks.start()
        questions = _questions(tmp_path)
        assert _generate(questions, url, tmp_path / "a.jsonl", "--model", "m").exit_code == 0
        result = _generate(questions, url, tmp_path / "b.jsonl", "--model", "m")
        assert "3 answers written of 3 (3 from cache)" in result.output
        assert mocks.stats(url)["requests"] == 3
        def by_id(path: Path) -> list[dict[str, Any]]:  # written as replies arrive, so in any order
            return sorted(_lines(path), key=lambda line: str(line["id"]))

        assert by_id(tmp_path / "a.jsonl") == by_id(tmp_path / "b.jsonl")

    def test_changed_setting_generates_anew(self, mocks: MockServers, tmp_path: Path) -> None:
        """A changed temperature makes new answer ids and new requests, appended to the file."""
        url = mocks.start()
        questions, out = _questions(tmp_path), tmp_path / "answers.jsonl"
        assert _generate(questions, url, out, "--model", "m").exit_code == 0
        assert _generate(questions, url, out, "--model", "m", "--temperature", "0.9").exit_code == 0
        assert mocks.stats(url)["requests"] == 6
        assert len({line["id"] for line in _lines(out)}) == 6

    def test_template_override_changes_the_cache_key(self, mocks: MockServers, tmp_path: Path) -> None:
        """--template FILE: its content hash versions the answers, so every request is sent again."""
        url = mocks.start()
        questions = _questions(tmp_path)
        template = tmp_path / "mine.txt"
        template.write_text("Answer as a physician.\nQuestion: {question}\nAnswer:", encoding="utf-8")
        assert _generate(questions, url, tmp_path / "a.jsonl", "--model", "m").exit_code == 0
        result = _generate(questions, url, tmp_path / "b.jsonl", "--model", "m", "--template", str(template))
        assert result.exit_code == 0, result.output
        assert "3 answers written of 3 to" in result.output  # none from the cache
        assert mocks.stats(url)["requests"] == 6
        assert {line["meta"]["template"] for line in _lines(tmp_path / "b.jsonl")} == {
            "file:" + hashlib.blake2b(template.read_bytes(), digest_size=8).hexdigest()
        }


class TestTruncated:
    def test_cut_reply_loses_its_last_sentence_in_scoring(self, mocks: MockServers, tmp_path: Path) -> None:
        """A finish_reason length reply: dahl score drops the cut-off sentence, keeps the rest."""
        url = mocks.start("--finish-length")
        questions, out = _questions(tmp_path), tmp_path / "answers.jsonl"
        result = _generate(questions, url, out, "--model", "m", "--mode", "chat")
        assert "(3 cut at max tokens)" in result.output
        answers = _lines(out)
        assert {a["meta"]["finish_reason"] for a in answers} == {"length"}
        scored = CliRunner().invoke(main, ["score", str(out), "--splitter", "rules", "--checker", "fake",
                                           "-o", str(tmp_path / "run"), "--no-progress"])
        assert scored.exit_code == 0, scored.output
        results = {r["id"]: r for r in _lines(tmp_path / "run" / "answers.jsonl")}
        for answer in answers:
            kept, cut = answer["response"].rsplit(". ", 1)
            assert results[answer["id"]]["response"] == kept + "."
            assert all(cut not in claim["text"] for claim in results[answer["id"]]["claims"])


class TestRefused:
    def test_a_refusal_is_written_abstained_and_flagged(self, mocks: MockServers, tmp_path: Path) -> None:
        """Every reply a refusal (message.refusal): 3 answers written abstained with finish_reason refusal; dahl score abstains them."""
        url = mocks.start("--fault", "refusal=1")
        out = tmp_path / "answers.jsonl"
        result = _generate(_questions(tmp_path), url, out, "--model", "m", "--mode", "chat")
        assert result.exit_code == 0, result.output
        assert "3 answers written of 3 (3 refused (abstained))" in " ".join(result.output.split())
        answers = _lines(out)
        assert [(a["abstained"], a["meta"]["finish_reason"], a["response"]) for a in answers] == [
            (True, "refusal", "I'm sorry, but I can't help with that request.")] * 3
        scored = CliRunner().invoke(main, ["score", str(out), "--checker", "fake", "-o", str(tmp_path / "run"),
                                           "--no-progress"])
        assert {r["status"] for r in _lines(tmp_path / "run" / "answers.jsonl")} == {"abstained"}, scored.output


    def test_empty_answers_are_counted_and_warned(self, mocks: MockServers, tmp_path: Path) -> None:
        """Replies with no text: written abstained, counted in the closing line, a warning each."""
        oracle = tmp_path / "silent.jsonl"
        oracle.write_text("".join(json.dumps({"question": q, "response": " "}) + "\n" for q, _ in QUESTIONS[:2]))
        url = mocks.start("--oracle-answers", str(oracle))
        out = tmp_path / "answers.jsonl"
        result = _generate(_questions(tmp_path), url, out, "--model", "m", "--mode", "completion")
        assert result.exit_code == 0, result.output
        assert "3 answers written of 3 (2 empty (abstained))" in " ".join(result.output.split())
        assert [a.get("abstained", False) for a in _lines(out)].count(True) == 2


class TestOracleAnswers:
    def test_known_questions_get_the_given_text(self, mocks: MockServers, tmp_path: Path) -> None:
        """--oracle-answers: a known question is answered with its text, others deterministically."""
        oracle = tmp_path / "truthful.jsonl"
        oracle.write_text(json.dumps({"question": QUESTIONS[1][0], "response": "Inhaled steroids are used."}) + "\n")
        url = mocks.start("--oracle-answers", str(oracle))
        out = tmp_path / "answers.jsonl"
        assert _generate(_questions(tmp_path), url, out, "--model", "truthful").exit_code == 0
        by_question = {line["question"]: line["response"] for line in _lines(out)}
        assert by_question[QUESTIONS[1][0]] == "Inhaled steroids are used."
        assert by_question[QUESTIONS[0][0]] != "Inhaled steroids are used."


class TestErrors:
    def test_bad_questions_file_exits_2_naming_the_line(self, mocks: MockServers, tmp_path: Path) -> None:
        """A record without question is exit status 2 with file and line; no request is sent."""
        url = mocks.start()
        questions = tmp_path / "q.jsonl"
        questions.write_text('{"question": "A?"}\n{"text": "B?"}\n')
        result = _generate(questions, url, tmp_path / "a.jsonl", "--model", "m")
        assert result.exit_code == 2
        assert "q.jsonl:2" in result.output and "question" in result.output

    def test_answers_file_in_use_exits_2_and_sends_nothing(self, mocks: MockServers, tmp_path: Path) -> None:
        """A second run on the same -o file (another dahl generate, or dahl eval on the same OUT) exits 2 naming
        the holder's pid, with no request (both runs generated every answer and wrote it twice)."""
        import os

        from dahl.generate._output import lock_answers

        url = mocks.start()
        out = tmp_path / "answers.jsonl"
        lock = lock_answers(out)
        try:
            result = _generate(_questions(tmp_path), url, out, "--model", "m")
        finally:
            lock.release()
        assert result.exit_code == 2, result.output
        assert (f"error: answers file answers.jsonl in {tmp_path} is in use by another dahl run (pid {os.getpid()}); wait for it to "
                "finish, or write to another file with -o") in result.output
        assert mocks.stats(url)["requests"] == 0 and not out.exists()
        again = _generate(_questions(tmp_path), url, out, "--model", "m")
        assert again.exit_code == 0 and len(_lines(out)) == 3, again.output

    def test_unreachable_server_exits_4(self, tmp_path: Path) -> None:
        """Nothing listening: the run stops with the fatal API status."""
        result = _generate(_questions(tmp_path), "http://127.0.0.1:9/v1", tmp_path / "a.jsonl", "--model", "m",
                           "--timeout", "2")
        assert result.exit_code == 4, result.output


class TestKilled:
    def test_sigkill_then_rerun_finishes_without_resending_written_answers(
        self, mocks: MockServers, tmp_path: Path
    ) -> None:
        """A run killed mid-way: the re-run resumes the written answers and sends only the rest."""
        import os
        import signal
        import subprocess
        import sys
        import time

        from tests.conftest import REPO

        url = mocks.start("--latency-ms", "40")
        questions = tmp_path / "q.jsonl"
        questions.write_text("".join(json.dumps({"question": f"What is finding number {n}?"}) + "\n"
                                     for n in range(60)))
        out = tmp_path / "answers.jsonl"
        args = [sys.executable, "-m", "dahl", "generate", str(questions), "--model", "m", "--base-url", url,
                "-o", str(out), "--api-key-env", "", "--no-progress", "--max-in-flight", "1"]
        proc = subprocess.Popen(args, cwd=REPO, env={**os.environ}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):  # poll the output, not the clock: kill once a few answers are written
                if out.exists() and out.read_bytes().count(b"\n") >= 5:
                    break
                time.sleep(0.02)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        written = out.read_bytes().count(b"\n")
        assert 5 <= written < 60
        sent_before = mocks.stats(url)["requests"]
        again = _generate(questions, url, out, "--model", "m")
        assert again.exit_code == 0, again.output
        assert f"({written} resumed" in again.output
        ids = [line["id"] for line in _lines(out)]
        assert len(ids) == len(set(ids)) == 60
        assert mocks.stats(url)["requests"] - sent_before <= 60 - written
