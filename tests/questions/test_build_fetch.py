"""PMC ids through the mock's E-utilities efetch: JATS parsed, metadata-only replies reported and not used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.errors import InputError
from dahl.exit_status import ExitStatus
from dahl.questions._fetch import ncbi_limits, read_ids
from dahl.questions._jats import METADATA_ONLY, NOT_FOUND, parse_jats
from bench.mock_questions import efetch_xml


def _build(url: str, ids: Path, out: Path) -> tuple[int, str]:
    args = ["questions", "build", str(ids), "--pmc-ids", "--eutils-url", url.removesuffix("/v1") + "/entrez/eutils",
            "-o", str(out), "--per-article", "1", "--base-url", url, "--model", "mock", "--api-key-env", "",
            "--no-progress", "--ncbi-api-key-env", ""]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


class TestFetch:
    def test_metadata_only_reported_not_used(self, mocks: Any, tmp_path: Path) -> None:
        """Ids 2, 3, 4, 0: 4 requests; 3 is metadata-only (reported), 0 not found; questions from 2 and 4 only."""
        url = mocks.start()
        ids = tmp_path / "ids.txt"
        ids.write_text("PMC2\n3  # outside the OA subset\nPMC4\nPMC0\nPMC2\n")
        out = tmp_path / "questions.csv"
        code, text = _build(url, ids, out)
        assert code == ExitStatus.OK, text
        assert "fetched: 2 articles of 4 ids (4 requests)" in text
        assert "(outside the PMC Open Access subset, not used): 1: PMC3" in text
        assert "not found: 1" in text
        articles = [json.loads(line) for line in out.with_name("questions.csv.articles.jsonl").read_text().splitlines()]
        assert [(a["id"], a["title"], a["license"]) for a in articles] == [
            ("PMC2", "Mock article PMC2", "https://creativecommons.org/licenses/by/4.0/"),
            ("PMC4", "Mock article PMC4", "https://creativecommons.org/licenses/by/4.0/"),
        ]
        # title, abstract FACTS[2], body FACTS[3]; the table cell is left out
        assert articles[0]["text"] == ("Mock article PMC2\n\nVitamin B12 deficiency causes megaloblastic anaemia.\n\n"
                                       "Beta blockers reduce myocardial oxygen demand.")
        assert mocks.stats(url)["kinds"] == {"efetch": 4, "questions": 2, "judge": 2}
        code, text = _build(url, ids, out)
        assert code == ExitStatus.OK, text
        assert "(0 requests, 4 already fetched)" in text
        assert mocks.stats(url)["kinds"]["efetch"] == 4


class TestJats:
    def test_outcomes(self) -> None:
        """An even id is an article, an odd one metadata-only, 0 not found."""
        assert parse_jats("PMC3", efetch_xml("3")) == METADATA_ONLY
        assert parse_jats("PMC0", efetch_xml("0")) == NOT_FOUND
        article = parse_jats("PMC6", efetch_xml("6"))
        assert not isinstance(article, str) and article.url.endswith("/pmc/articles/PMC6/")

    def test_not_xml(self) -> None:
        """A reply that is not XML is an InputError naming the id."""
        with pytest.raises(InputError, match="PMC9 is not XML"):
            parse_jats("PMC9", b"<html>")

    def test_entities_not_resolved(self) -> None:
        """An external entity is not read (no file content in the text)."""
        xml = (b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
               b"<article><body><p>A &x; B.</p></body></article>")
        article = parse_jats("PMC8", xml)
        assert not isinstance(article, str) and "root:" not in article.text


class TestLimits:
    def test_ncbi_rates(self) -> None:
        """3 requests/s (180 per minute) without a key, 10/s (600) with one."""
        assert (ncbi_limits("").rpm, ncbi_limits("").max_in_flight) == (180.0, 3)
        assert (ncbi_limits("k").rpm, ncbi_limits("k").max_in_flight) == (600.0, 10)

    def test_bad_id_line(self, tmp_path: Path) -> None:
        """A line that is not a PMC id names file and line."""
        path = tmp_path / "ids.txt"
        path.write_text("PMC1\nPMCX\n")
        with pytest.raises(InputError) as info:
            read_ids(path)
        assert (info.value.file, info.value.line) == (str(path), 2)
