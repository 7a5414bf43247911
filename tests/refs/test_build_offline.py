"""dahl refs build offline (rule extraction, no rating) on real PubMedQA records."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from click.testing import CliRunner

from tests.conftest import require_data
from dahl.cli import main
from dahl.exit_status import ExitStatus
from dahl.formats._refs import read_refs
from dahl.refs._dedupe import fact_key
from dahl.refs._documents import build_refs
from dahl.refs._settings import BuildSettings


def pubmedqa_questions(path: Path, n: int) -> dict[str, dict[str, str]]:
    """Write the first ``n`` PubMedQA records as questions with inline documents (CONTEXTS + LONG_ANSWER)."""
    data = json.loads(require_data("pubmedqa/ori_pqal.json").read_text())
    documents: dict[str, dict[str, str]] = {}
    with path.open("w") as out:
        for pmid in list(data)[:n]:
            record = data[pmid]
            docs = [{"id": f"{pmid}/context{i}", "text": t} for i, t in enumerate(record["CONTEXTS"])]
            docs.append({"id": f"{pmid}/answer", "text": record["LONG_ANSWER"]})
            documents.update({d["id"]: d for d in docs})
            out.write(json.dumps({"question_id": pmid, "question": record["QUESTION"], "documents": docs}) + "\n")
    return documents


class TestOfflinePubMedQA:
    def test_rule_facts_per_question(self, tmp_path: Path) -> None:
        """Three PubMedQA questions: 33, 24 and 20 distinct rule facts, each inside its document's span."""
        questions = tmp_path / "questions.jsonl"
        documents = pubmedqa_questions(questions, 3)
        out = tmp_path / "refs.jsonl"
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "-o", str(out), "--no-progress"],
                                    catch_exceptions=False)
        assert result.exit_code == ExitStatus.OK, result.output
        assert "3 reference sets written" in result.output and "(79 facts)" in result.output
        sets = {s.question_id: s for s in read_refs(out)}
        assert {q: len(s.facts) for q, s in sets.items()} == {"21645374": 36, "16418930": 23, "9488747": 20}
        first = sets["21645374"].facts[0]
        assert first.text == "Programmed cell death (PCD) is the regulated death of cells within an organism."
        assert first.source is not None and first.source.span == (0, 79)
        assert documents["21645374/context0"]["text"][0:79] == first.text
        for ref_set in sets.values():
            keys = [fact_key(f.text, fold=True) for f in ref_set.facts]
            assert len(set(keys)) == len(keys)
            assert [f.id for f in ref_set.facts] == [f"f{i}" for i in range(1, len(keys) + 1)]
            for fact in ref_set.facts:
                assert fact.relevance is None and fact.importance is None  # unrated: weight 1
                assert fact.source is not None and fact.source.doc_id is not None and fact.source.span is not None
                start, end = fact.source.span
                assert 0 <= start < end <= len(documents[fact.source.doc_id]["text"])
            assert ref_set.meta["rater"] is None and ref_set.meta["extractor"] == "rules-extract/v1|rules/v9"

    def test_exact_duplicates_across_documents_are_kept_once(self, tmp_path: Path) -> None:
        """A document given twice under two ids adds no fact; the first document keeps the source."""
        questions = tmp_path / "questions.jsonl"
        text = "Metformin lowers glucose production in the liver. It is taken by mouth."
        questions.write_text(json.dumps({"question": "What does metformin do?", "documents": [
            {"id": "a", "text": text}, {"id": "b", "text": text.upper()}]}) + "\n")
        out = tmp_path / "refs.jsonl"
        report = anyio.run(build_refs, BuildSettings(questions=questions, out=out))
        assert report.exit_status == ExitStatus.OK
        (ref_set,) = read_refs(out)
        assert {f.source.doc_id for f in ref_set.facts if f.source} == {"a"}
        assert report.counters.chunks == 2 and report.counters.facts == len(ref_set.facts)


class TestInputs:
    def test_unknown_doc_id_skips_its_question(self, tmp_path: Path) -> None:
        """A doc id missing from the corpus: that question is skipped (named in the log), the rest built, exit 6."""
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_text(json.dumps({"id": "d1", "text": "Insulin is made in the pancreas."}) + "\n")
        questions = tmp_path / "questions.jsonl"
        questions.write_text(json.dumps({"question_id": "ok", "question": "Where is insulin made?"}) + "\n"
                             + json.dumps({"question_id": "bad", "question": "Why?", "doc_ids": ["d1", "d9"]}) + "\n")
        out = tmp_path / "refs.jsonl"
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "-o", str(out), "--evidence", str(corpus),
                                           "--no-progress"], catch_exceptions=False)
        assert result.exit_code == ExitStatus.PARTIAL, result.output
        assert "0 failed, 1 skipped" in result.output
        (ref_set,) = read_refs(out)
        assert ref_set.question_id == "ok" and [f.text for f in ref_set.facts] == ["Insulin is made in the pancreas."]

    def test_no_input_mode_is_a_usage_error(self, tmp_path: Path) -> None:
        """Without QUESTIONS (the only input mode here) the command exits 2 and names the modes."""
        result = CliRunner().invoke(main, ["refs", "build", "-o", str(tmp_path / "r.jsonl")])
        assert result.exit_code == ExitStatus.USAGE
        assert "give exactly one input: QUESTIONS" in result.output


class TestBuildErrors:
    def test_an_output_that_is_not_refs_is_a_usage_error(self, tmp_path: Path) -> None:
        """-o naming a file of other JSON lines exits 2 with its file and line, not a traceback (exit 1)."""
        questions, out = tmp_path / "q.jsonl", tmp_path / "other.jsonl"
        questions.write_text(json.dumps({"question": "Why?", "documents": [{"id": "d", "text": "Because."}]}) + "\n")
        out.write_text('{"x": 1}\n')
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "-o", str(out), "--no-progress"])
        assert result.exit_code == ExitStatus.USAGE, result.output
        assert f"{out}:1: not a reference set line" in result.output

    def test_weights_that_could_exceed_importance_1_are_refused(self, tmp_path: Path) -> None:
        """--alpha + --beta above 1 would write importances the refs reader refuses: a usage error at once."""
        questions = tmp_path / "q.jsonl"
        questions.write_text(json.dumps({"question": "Why?", "documents": [{"id": "d", "text": "Because."}]}) + "\n")
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "-o", str(tmp_path / "r.jsonl"),
                                           "--alpha", "1", "--beta", "0.5", "--no-progress"])
        assert result.exit_code == ExitStatus.USAGE, result.output
        assert "--alpha + --beta must be <= 1" in result.output


class TestResumeSettings:
    def test_rerun_with_other_settings_refuses_to_mix_sets(self, tmp_path: Path) -> None:
        """A re-run into a refs.jsonl begun with other settings exits 2 naming it and the setting; nothing is added."""
        docs = {"q1": "Aspirin inhibits COX-1. Aspirin reduces fever.", "q2": "Insulin lowers blood glucose."}
        rows = [{"question_id": q, "question": f"What about {q}?", "documents": [{"id": q, "text": t}]}
                for q, t in docs.items()]
        first, both = tmp_path / "first.jsonl", tmp_path / "both.jsonl"
        first.write_text(json.dumps(rows[0]) + "\n")
        both.write_text("".join(json.dumps(r) + "\n" for r in rows))
        out = tmp_path / "refs.jsonl"
        runner = CliRunner()
        done = runner.invoke(main, ["refs", "build", str(first), "-o", str(out), "--no-progress"])
        assert done.exit_code == ExitStatus.OK, done.output
        before = out.read_bytes()
        again = runner.invoke(main, ["refs", "build", str(both), "-o", str(out), "--no-progress", "--near-threshold", "100"])
        assert again.exit_code == ExitStatus.USAGE, again.output
        assert str(out) in again.output and "near_duplicate_threshold" in again.output
        assert out.read_bytes() == before
        same = runner.invoke(main, ["refs", "build", str(both), "-o", str(out), "--no-progress"])
        assert same.exit_code == ExitStatus.OK and "1 already there" in same.output, same.output


class TestFolderCorpus:
    def test_a_folder_of_text_files_is_a_corpus(self, tmp_path: Path) -> None:
        """--evidence takes a folder of .txt/.md files, as dahl score does: doc_ids are relative paths."""
        docs = tmp_path / "docs"
        (docs / "sub").mkdir(parents=True)
        (docs / "a.md").write_text("# Aspirin\n\nAspirin inhibits COX-1. Aspirin reduces fever.\n", encoding="utf-8")
        (docs / "sub" / "b.txt").write_text("Insulin lowers blood glucose.", encoding="utf-8")
        questions = tmp_path / "q.jsonl"
        questions.write_text(json.dumps({"question_id": "q1", "question": "What does aspirin do?", "doc_ids": ["a.md"]})
                             + "\n" + json.dumps({"question_id": "q2", "question": "What does insulin do?"}) + "\n")
        out = tmp_path / "refs.jsonl"
        result = CliRunner().invoke(main, ["refs", "build", str(questions), "--evidence", str(docs), "-o", str(out),
                                           "--docs-per-question", "1", "--no-progress"])
        assert result.exit_code == ExitStatus.OK, result.output
        sets = {s.question_id: s for s in read_refs(out)}
        assert {f.source.doc_id for f in sets["q1"].facts if f.source} == {"a.md"}
        assert {f.source.doc_id for f in sets["q2"].facts if f.source} == {"sub/b.txt"}


class TestByteOrderMark:
    def test_questions_and_corpus_with_a_utf8_bom(self, tmp_path: Path) -> None:
        """Questions (JSONL, CSV) and a JSONL corpus saved with a UTF-8 byte-order mark build as without it."""
        bom = b"\xef\xbb\xbf"
        corpus = tmp_path / "corpus.jsonl"
        corpus.write_bytes(bom + json.dumps({"id": "d1", "text": "Aspirin inhibits COX-1. It reduces fever."}).encode()
                           + b"\n")
        jsonl = tmp_path / "q.jsonl"
        jsonl.write_bytes(bom + json.dumps({"question_id": "q1", "question": "What does aspirin do?",
                                            "doc_ids": ["d1"]}).encode() + b"\n")
        table = tmp_path / "q.csv"
        table.write_bytes(bom + b"question_id,question,doc_ids\nq1,What does aspirin do?,d1\n")
        for questions in (jsonl, table):
            out = tmp_path / f"refs-{questions.suffix[1:]}.jsonl"
            result = CliRunner().invoke(main, ["refs", "build", str(questions), "--evidence", str(corpus), "-o",
                                               str(out), "--no-progress"])
            assert result.exit_code == ExitStatus.OK, result.output
            [ref_set] = list(read_refs(out))
            assert ref_set.question_id == "q1" and len(ref_set.facts) == 2
