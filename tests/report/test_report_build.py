"""dahl report without a browser: the data files, the pages' references and the command."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest
from click.testing import CliRunner

from dahl.analysis._verdicts import rebuild
from dahl.cli import main
from dahl.errors import InputError
from dahl.records import (
    AnswerMetrics,
    AnswerRecall,
    AnswerResult,
    ClaimResult,
    Coverage,
    Evidence,
    FactResult,
    Label,
    Status,
)
from dahl.report import build_report
from dahl.report._answers import write_answer_data
from dahl.report._build import _count, _p_value

S, U = Label.SUPPORTED, Label.UNSUPPORTED


def answer(aid: str, model: str, labels: list[Label], *, question_id: str = "q1", status: Status = Status.SCORED,
           **extra: Any) -> AnswerResult:
    """An answer whose claim i spans characters [3i, 3i + 2) of its response."""
    claims = tuple(ClaimResult(text=f"c{i}", index=i, label=x, span=(3 * i, 3 * i + 2)) for i, x in enumerate(labels))
    counts = {str(x): sum(1 for y in labels if y == x) for x in Label}
    return AnswerResult(id=aid, model=model, category="cat", status=status, claims=claims, counts=counts,
                        metrics=AnswerMetrics(precision=counts["supported"] / len(labels) if labels else None),
                        input_hash="h", question=f"Question {question_id}?", response="c0 c1 c2", question_id=question_id,
                        **extra)


def run_dir(path: Path, rows: list[AnswerResult]) -> Path:
    path.mkdir(parents=True)
    enc = msgspec.json.Encoder()
    (path / "answers.jsonl").write_bytes(b"".join(enc.encode(r) + b"\n" for r in rows))
    rebuild(path)
    return path


def load(path: Path, head: str) -> Any:
    """The JSON inside a data script ``head(...);``."""
    raw = path.read_bytes()
    assert raw.startswith(head.encode()) and raw.endswith(b");\n")
    return orjson.loads(raw[len(head):-3])


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """A1 (S U, with evidence and reference facts), B1 (S S) on q1, B2 abstained on q2."""
    ev = ClaimResult(text="c1", index=1, label=U, span=(3, 5), raw="no passage says so",
                     evidence=(Evidence(text="Passage.", source="doc7", score=2.5),))
    facts = AnswerRecall(recall=0.5, recall_w=0.75, facts=(FactResult(id="f1", text="Fact one.", weight=1.0, label=Coverage.COVERED),
                                                           FactResult(id="f2", text="Fact two.", weight=0.5, label=Coverage.NOT_COVERED)))
    a1 = answer("a1", "A", [S, U], recall=facts)
    a1 = msgspec.structs.replace(a1, claims=(a1.claims[0], ev))
    return run_dir(tmp_path / "run", [a1, answer("b1", "B", [S, S]),
                                      answer("b2", "B", [], question_id="q2", status=Status.ABSTAINED)])


class TestAnswerData:
    def test_index_rows_and_chunks(self, run: Path, tmp_path: Path) -> None:
        """Three answers in chunks of 2: index codes and counts per answer; answers-000 holds a1, b1."""
        info = write_answer_data([run], tmp_path / "data", chunk_size=2)
        assert (info.n_answers, info.n_claims, info.n_chunks, info.models_by_run) == (3, 4, 2, [["A", "B"]])
        index = load(tmp_path / "data" / "index.js", "DAHL.index(")
        assert index["models"] == ["A", "B"] and index["statuses"] == ["scored", "abstained"]
        assert index["questions"] == ["Question q1?", "Question q2?"]
        cols = index["cols"]
        assert (cols["m"], cols["q"], cols["s"]) == ([0, 1, 1], [0, 0, 1], [0, 0, 1])
        assert (cols["n_supported"], cols["n_unsupported"], cols["p"]) == ([1, 2, 0], [1, 0, 0], [0.5, 1.0, None])
        first = load(tmp_path / "data" / "answers-000.js", "DAHL.chunk(0, ")
        assert [a["id"] for a in first] == ["a1", "b1"]
        assert [a["id"] for a in load(tmp_path / "data" / "answers-001.js", "DAHL.chunk(1, ")] == ["b2"]

    def test_claims_keep_span_reply_evidence_and_facts(self, run: Path, tmp_path: Path) -> None:
        """a1's unsupported claim keeps its span, the Checker's reply and the passage; its two facts keep coverage."""
        write_answer_data([run], tmp_path / "data")
        a1 = load(tmp_path / "data" / "answers-000.js", "DAHL.chunk(0, ")[0]
        assert a1["claims"][1] == {"t": "c1", "l": "unsupported", "sp": [3, 5], "raw": "no passage says so",
                                   "ev": [{"text": "Passage.", "source": "doc7", "title": None, "score": 2.5}]}
        assert a1["recall"] == {"recall": 0.5, "recall_w": 0.75, "reason": None,
                                "facts": [{"t": "Fact one.", "w": 1.0, "l": "covered"},
                                          {"t": "Fact two.", "w": 0.5, "l": "not_covered"}]}

    def test_old_chunks_are_removed(self, run: Path, tmp_path: Path) -> None:
        """Rebuilding with bigger chunks leaves no chunk of the earlier build behind."""
        write_answer_data([run], tmp_path / "data", chunk_size=1)
        write_answer_data([run], tmp_path / "data", chunk_size=10)
        assert sorted(p.name for p in (tmp_path / "data").glob("answers-*.js")) == ["answers-000.js"]

    def test_bad_line_names_file_and_line(self, run: Path, tmp_path: Path) -> None:
        """A line that is not an answer result is an InputError naming answers.jsonl, line 4 and the field."""
        with (run / "answers.jsonl").open("a") as f:
            f.write('{"id": "x"}\n')
        with pytest.raises(InputError, match=r"answers\.jsonl:4: Object missing required field `model`"):
            write_answer_data([run], tmp_path / "data")


class TestSite:
    def test_pages_refer_only_to_files_of_the_site(self, run: Path, tmp_path: Path) -> None:
        """Every src/href of both pages and every url() of the CSS is a relative path that exists: no network."""
        site = build_report([run], tmp_path / "site", n_boot=50)
        refs = []
        for page in ("index.html", "explorer.html"):
            refs += re.findall(r'(?:src|href)="([^"#]+)"', (site.out_dir / page).read_text())
        assert sorted(set(refs)) == ["data/index.js", "explorer.html", "index.html", "static/explorer.js",
                                     "static/leaderboard.js", "static/report.css", "static/theme.js"]
        assert all((site.out_dir / ref).is_file() for ref in refs)
        text = "".join(p.read_text() for p in (site.out_dir / "static").iterdir())
        assert "http" not in text and "url(" not in text and "fetch(" not in text

    def test_board_rows_and_summary(self, run: Path, tmp_path: Path) -> None:
        """B (DAHL Score 100.0) ranks above A (50.0); the counts of what was written."""
        site = build_report([run], tmp_path / "site", n_boot=50)
        assert (site.n_answers, site.n_claims, site.n_chunks, site.warnings) == (3, 4, 1, ())
        html = (site.out_dir / "index.html").read_text()
        assert re.findall(r'<th scope="row" class="model">(\w+)</th>', html) == ["B", "A"]
        assert re.findall(r'<td class="num dahl_score">([\d.—]+)</td>', html) == ["100.0", "50.0"]
        assert 'id="banner"' not in html
        assert site.size_bytes == sum(p.stat().st_size for p in site.out_dir.rglob("*") if p.is_file())

    def test_model_names_are_escaped(self, tmp_path: Path) -> None:
        """A model named <script> is text on the page, not markup."""
        run = run_dir(tmp_path / "run", [answer("x1", "<script>alert(1)</script>", [S])])
        html = (build_report([run], tmp_path / "site", n_boot=10).out_dir / "index.html").read_text()
        assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


class TestCellText:
    @pytest.mark.parametrize(("n", "text"), [(0, "0"), (999, "999"), (11815, "11,815"), (1_000_000, "1,000,000")],
                             ids=["zero", "hundreds", "thousands", "millions"])
    def test_counts_have_thousands_separators(self, n: int, text: str) -> None:
        """Counts on the pages are written with commas every three digits."""
        assert _count(n) == text

    @pytest.mark.parametrize(("p", "text"), [(None, "—"), (1 / 1001, "< 0.001"), (0.001, "0.001"), (0.01234, "0.012"),
                                             (1.0, "1.000")],
                             ids=["none", "bootstrap-floor", "a-thousandth", "small", "one"])
    def test_p_values(self, p: float | None, text: str) -> None:
        """p below 0.001 reads '< 0.001' (never 0.000999); otherwise three decimals; no p: a dash."""
        assert _p_value(p) == text


class TestReportCommand:
    def test_writes_the_site(self, run: Path, tmp_path: Path) -> None:
        """dahl report RUN -o SITE exits 0 and prints answers, claims, data files and the page."""
        res = CliRunner().invoke(main, ["report", str(run), "-o", str(tmp_path / "site"), "--n-boot", "50"])
        assert res.exit_code == 0, res.output
        assert res.output.startswith("3 answers, 4 claims in 1 data file, 0.0 MB -> ")
        assert res.output.rstrip().endswith(f"-> {tmp_path / 'site' / 'index.html'}")

    def test_folder_without_store_is_a_usage_error(self, tmp_path: Path) -> None:
        """A folder that is not a scored run exits 2 with the verdict store's hint."""
        res = CliRunner().invoke(main, ["report", str(tmp_path), "-o", str(tmp_path / "site")])
        assert res.exit_code == 2 and "run dahl score again" in res.output


class TestRecallColumns:
    def test_recall_columns_when_the_run_has_reference_facts(self, tmp_path: Path) -> None:
        """TWO_MODELS: Recall A (1/3 + 1)/2 = 66.7, B (1 + 0)/2 = 50.0; weighted A 75.0, B 50.0; a menu entry each."""
        from tests.recall_runs import recall_run

        site = build_report([recall_run(tmp_path / "run")], tmp_path / "site", n_boot=50)
        html = (site.out_dir / "index.html").read_text()
        names = re.findall(r'<th scope="row" class="model">(\w+)</th>', html)
        recall = dict(zip(names, re.findall(r'<td class="num recall">([\d.—]+)</td>', html)))
        weighted = dict(zip(names, re.findall(r'<td class="num recall_w">([\d.—]+)</td>', html)))
        assert (recall, weighted) == ({"A": "66.7", "B": "50.0"}, {"A": "75.0", "B": "50.0"})
        assert '<option value="recall_w">Recall (w)</option>' in html

    def test_no_recall_columns_without_reference_facts(self, tmp_path: Path) -> None:
        """A run without recall has no Recall column or menu entry."""
        run = run_dir(tmp_path / "run", [answer("a1", "A", [S, U]), answer("b1", "B", [S])])
        html = (build_report([run], tmp_path / "site", n_boot=10).out_dir / "index.html").read_text()
        assert "Recall" not in html and 'class="num recall' not in html
