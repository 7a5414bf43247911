"""Test support for the HTML report: sites built once per session, pages driven in headless Chromium."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dahl.report import build_report
from tests.report_runs import MODELS, replay_runs
from tests.test_run_checks import EXAMPLES, score

TIMEOUT_S = 20.0


def factscore_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the three FActScore replay runs (InstructGPT, ChatGPT, PerplexityAI), built once."""
    out = tmp_path_factory.getbasetemp() / "report-factscore"
    if not (out / "index.html").is_file():
        runs = replay_runs(tmp_path_factory)
        build_report([runs[m] for m in MODELS], out)
    return out


def examples_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of examples/answers.jsonl scored by the fake and by the evidence Checker (Checkers differ)."""
    out = tmp_path_factory.getbasetemp() / "report-examples"
    if not (out / "index.html").is_file():
        from tests.test_run_checks import renamed

        base = tmp_path_factory.getbasetemp() / "examples-runs"
        base.mkdir(exist_ok=True)
        fake, evidence = base / "fake", base / "evidence"
        score(fake, EXAMPLES / "answers.jsonl")
        score(evidence, renamed(base, "e.jsonl", models="e"), checker="evidence")
        build_report([fake, evidence], out)
    return out


#: A Checker model name as long as real deployments' (its fingerprint: ~230 characters, no spaces).
LONG_MODEL = "meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo-eu-west-deployment-2024-07"


def long_checker_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of examples/answers.jsonl checked by an LLM (the bench mock) named :data:`LONG_MODEL`."""
    out = tmp_path_factory.getbasetemp() / "report-long-checker"
    if not (out / "index.html").is_file():
        from tests.conftest import MockServers
        from tests.test_run_checks import run

        servers = MockServers()
        try:
            url = servers.start()
            run_dir = tmp_path_factory.getbasetemp() / "long-checker-run"
            code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "openai", "--base-url", url,
                             "--model", LONG_MODEL, "--api-key-env", "", "--no-cache", "--no-progress",
                             "-o", str(run_dir))
            assert code == 0, text
        finally:
            servers.stop_all()
        build_report([run_dir], out)
    return out


def shots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $DAHL_REPORT_SHOTS, else a session temp folder."""
    env = os.environ.get("DAHL_REPORT_SHOTS")
    path = Path(env) if env else tmp_path_factory.getbasetemp() / "report-shots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def wait_for(driver: Any, condition: Any) -> Any:
    """WebDriverWait(driver, TIMEOUT_S).until(condition)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, TIMEOUT_S).until(condition)


def open_page(driver: Any, site: Path, page: str) -> None:
    """Load ``site/page`` from disk and wait until its scripts ran (the explorer: the first rows drawn)."""
    driver.get("about:blank")  # a real navigation even when the page is already open
    driver.get((site / page).resolve().as_uri())
    wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete")
    if page == "explorer.html":
        wait_for(driver, lambda d: d.execute_script("return window.DAHL && DAHL.firstRowsAt !== undefined"))


def choose(driver: Any, select_id: str, text: str) -> None:
    """Pick the option shown as ``text`` in the <select id=select_id>."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element(By.ID, select_id)).select_by_visible_text(text)
