"""The HTML report in a real headless Chromium (Selenium): the leaderboard and the answer explorer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.chromium import chromium, missing, requested_urls
from tests.report.sites import (
    LONG_MODEL,
    choose,
    examples_site,
    factscore_site,
    long_checker_site,
    open_page,
    shots_dir,
    wait_for,
)

pytestmark = pytest.mark.skipif(missing() is not None, reason=f"headless Chromium unavailable: {missing()}")

if missing() is None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


@pytest.fixture(scope="module")
def factscore(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return factscore_site(tmp_path_factory)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shots_dir(tmp_path_factory)


def board_column(driver: Any, cls: str) -> list[str]:
    return [td.text for td in driver.find_elements(By.CSS_SELECTOR, f"#board tbody td.{cls}")]


def models(driver: Any) -> list[str]:
    return [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#board tbody th.model")]


def count(driver: Any) -> str:
    return str(driver.find_element(By.ID, "count").text)


def set_filters(driver: Any, **chosen: str) -> None:
    """Set selects by id suffix (model=..., status=...) and the search box (search=...)."""
    for key, value in chosen.items():
        if key == "search":
            box = driver.find_element(By.ID, "f-search")
            box.clear()
            box.send_keys(value)
        else:
            choose(driver, f"f-{key}", value)


@pytest.mark.data
class TestLeaderboardPage:
    def test_factscore_runs_in_order_with_their_scores(self, browser: Any, factscore: Path, shots: Path) -> None:
        """PerplexityAI 82.6, ChatGPT 61.8, InstructGPT 47.5 (DAHL Score, %), with n scored/excluded and parts."""
        open_page(browser, factscore, "index.html")
        assert models(browser) == ["PerplexityAI", "ChatGPT", "InstructGPT"]
        assert board_column(browser, "dahl_score") == ["82.6", "61.8", "47.5"]
        assert board_column(browser, "n_scored") == ["106", "110", "125"]
        assert board_column(browser, "n_excluded") == ["22", "18", "3"]
        parts = [td.text for td in browser.find_elements(By.CSS_SELECTOR, "#board tbody td.part")]
        assert parts == ["given/v1", "replay/v1"] * 3
        assert len(browser.find_elements(By.CSS_SELECTOR, "#board .cibar .ci")) == 3
        assert browser.find_elements(By.ID, "banner") == []
        browser.save_screenshot(str(shots / "leaderboard.png"))

    def test_heatmap_cells_name_their_answers(self, browser: Any, factscore: Path) -> None:
        """Five FActScore frequency categories × three models; PerplexityAI 'freq' is 89.3 over 23 answers."""
        open_page(browser, factscore, "index.html")
        rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap tbody tr")
        cats = [r.find_element(By.TAG_NAME, "th").text for r in rows]
        assert cats == ["freq", "medium", "rare", "very freq", "very rare"]
        first = rows[0].find_elements(By.CSS_SELECTOR, "td.heat")
        assert first[0].text.split("\n") == ["89.3", "n=23"]
        assert sum(len(r.find_elements(By.CSS_SELECTOR, "td.heat")) for r in rows) == 15

    def test_sorting_by_columns_and_metric(self, browser: Any, factscore: Path) -> None:
        """Model heading: A→Z; n scored: most first; the metric menu (F1@K) sorts best first again."""
        open_page(browser, factscore, "index.html")
        browser.find_element(By.CSS_SELECTOR, 'th[data-key="model"] button').click()
        assert models(browser) == ["ChatGPT", "InstructGPT", "PerplexityAI"]
        browser.find_element(By.CSS_SELECTOR, 'th[data-key="n_scored"] button').click()
        assert models(browser) == ["InstructGPT", "ChatGPT", "PerplexityAI"]
        assert browser.find_element(By.CSS_SELECTOR, 'th[data-key="n_scored"]').get_attribute("aria-sort") == "descending"
        choose(browser, "metric", "F1@K")
        assert models(browser) == ["PerplexityAI", "ChatGPT", "InstructGPT"]
        assert board_column(browser, "f1_at_k") == ["58.5", "40.6", "25.3"]


def viewport(driver: Any, width: int, height: int = 900) -> None:
    """Make the page's viewport ``width`` × ``height`` CSS pixels (DevTools device metrics)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def overflow(driver: Any) -> dict[str, float]:
    """How far the board reaches: its box's scroll and client widths, its right edge, the viewport's width."""
    return dict(driver.execute_script(
        "var t = document.getElementById('board'), box = t.parentElement, root = document.documentElement;"
        "return {box_scroll: box.scrollWidth, box_client: box.clientWidth, right: t.getBoundingClientRect().right,"
        " page_scroll: root.scrollWidth, viewport: root.clientWidth};"))


def board_at_width(browser: Any, site: Path, width: int, shot: Path) -> dict[str, float]:
    """The leaderboard's overflow measures (see ``overflow``) in a ``width`` px viewport, screenshot to ``shot``."""
    viewport(browser, width)
    try:
        open_page(browser, site, "index.html")
        got = overflow(browser)
        browser.save_screenshot(str(shot))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    return got


@pytest.fixture(scope="module")
def long_checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return long_checker_site(tmp_path_factory)


class TestBoardLayout:
    @pytest.mark.parametrize("width", [1400, 800])
    def test_board_fits_the_window(self, browser: Any, long_checker: Path, shots: Path, width: int) -> None:
        """A Checker fingerprint of ~230 characters: no column of the board runs past the viewport or its box."""
        got = board_at_width(browser, long_checker, width, shots / f"leaderboard-long-checker-{width}.png")
        assert got["box_scroll"] <= got["box_client"], got
        assert got["right"] <= got["viewport"] and got["page_scroll"] <= got["viewport"], got

    def test_long_fingerprint_is_in_a_tooltip_and_the_details(self, browser: Any, long_checker: Path) -> None:
        """The Checker cell shows 'model (template)'; its title and the fingerprints table hold the whole fingerprint."""
        open_page(browser, long_checker, "index.html")
        cells = browser.find_elements(By.CSS_SELECTOR, "#board tbody td.checker")
        assert [c.text for c in cells] == [f"{LONG_MODEL} (check/v1)"] * 2
        full = cells[0].get_attribute("title")
        assert full.startswith("openai:check|http://127.0.0.1:") and f"|model={LONG_MODEL}|template=check/v1|" in full
        browser.find_element(By.CSS_SELECTOR, "#fingerprints summary").click()
        codes = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#fingerprints code")]
        assert codes == ["rules/v9", full] * 2

    def test_rank_rule_is_stated(self, browser: Any, long_checker: Path) -> None:
        """A note under the board (and the Rank heading's tooltip) says how ranks are given and why they repeat."""
        open_page(browser, long_checker, "index.html")
        note = browser.find_element(By.ID, "rank-rule").text
        assert note == ("Rank: 1 + the number of models whose 95% CI of the DAHL Score lies entirely above this "
                        "model's (the Chatbot Arena rule). Models whose intervals overlap share a rank, so ranks can "
                        "repeat (1, 2, 2, 3).")
        assert browser.find_element(By.CSS_SELECTOR, 'th[data-key="rank"]').get_attribute("title") == note


@pytest.mark.data
class TestNumbers:
    def test_counts_have_thousands_separators(self, browser: Any, factscore: Path) -> None:
        """Both pages' headers say '384 answers · 11,815 claims'; so does the explorer's count."""
        for page in ("index.html", "explorer.html"):
            open_page(browser, factscore, page)
            assert browser.find_element(By.CSS_SELECTOR, ".top .meta").text == "384 answers · 11,815 claims"
        assert count(browser) == "384 answers · 11,815 claims"

    @pytest.mark.parametrize("width", [1400, 800])
    def test_factscore_board_fits_the_window(self, browser: Any, factscore: Path, shots: Path, width: int) -> None:
        """The three FActScore runs' board fits 1400 and 800 px viewports."""
        got = board_at_width(browser, factscore, width, shots / f"leaderboard-factscore-{width}.png")
        assert got["box_scroll"] <= got["box_client"] and got["page_scroll"] <= got["viewport"], got

    def test_p_below_a_thousandth(self, browser: Any, factscore: Path) -> None:
        """Paired comparisons at the bootstrap's floor (1/1001) read '< 0.001', the exact value in the tooltip."""
        open_page(browser, factscore, "index.html")
        cells = browser.find_elements(By.CSS_SELECTOR, "table.pairs td.p")
        assert [c.text for c in cells] == ["< 0.001", "< 0.001"]
        assert cells[0].get_attribute("title") == "bootstrap p = 0.000999 (1,000 resamples)"


class TestBanner:
    def test_runs_scored_by_other_checkers_are_flagged(self, browser: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
        """Fake vs evidence Checker: the not-comparable banner names the difference on both pages."""
        site = examples_site(tmp_path_factory)
        for page in ("index.html", "explorer.html"):
            open_page(browser, site, page)
            text = browser.find_element(By.ID, "banner").text
            assert text.startswith("These runs are not comparable.") and "runs differ in Checker" in text


@pytest.mark.data
class TestExplorer:
    def test_filters_change_the_counts(self, browser: Any, factscore: Path) -> None:
        """384 answers; PerplexityAI 128; scored 106; with an unsupported claim 93; very rare 15 (claims alongside, as 11,815)."""
        open_page(browser, factscore, "explorer.html")
        assert count(browser) == "384 answers · 11,815 claims"
        expected = [({"model": "PerplexityAI"}, "128 answers · 4,826 claims"),
                    ({"status": "scored"}, "106 answers · 4,318 claims"),
                    ({"label": "unsupported"}, "93 answers · 3,795 claims"),
                    ({"category": "very rare"}, "15 answers · 485 claims"),
                    ({"model": "all", "status": "all", "label": "any", "category": "all", "search": "doug sheehan"},
                     "3 answers · 82 claims")]
        for chosen, shown in expected:
            set_filters(browser, **chosen)
            wait_for(browser, lambda d, s=shown: count(d) == s)
            assert count(browser) == shown

    def test_unsupported_claim_of_a_known_answer(self, browser: Any, factscore: Path, shots: Path) -> None:
        """InstructGPT on Doug Sheehan: claim 3 'best known ... Ben Galvin' shows its text and 'unsupported'."""
        open_page(browser, factscore, "explorer.html")
        set_filters(browser, model="InstructGPT", search="Doug Sheehan")
        wait_for(browser, lambda d: count(d) == "1 answer · 26 claims")
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        claim = "Doug Sheehan is best known for his role as Ben Galvin."
        button = wait_for(browser, lambda d: d.find_element(By.XPATH, f'//button[@class="claim lab unsupported" and text()="{claim}"]'))
        assert browser.find_element(By.CSS_SELECTOR, ".answer h3").text == "InstructGPT"
        assert browser.find_element(By.CSS_SELECTOR, ".nospan").text.startswith("These claims were given without")
        button.click()
        detail = browser.find_element(By.CSS_SELECTOR, ".claim-detail")
        assert detail.find_element(By.TAG_NAME, "h4").text == "Claim 3"
        assert detail.find_element(By.CLASS_NAME, "c-text").text == claim
        assert detail.find_element(By.CLASS_NAME, "c-label").text == "unsupported"
        assert button.get_attribute("aria-pressed") == "true"
        browser.save_screenshot(str(shots / "explorer.png"))

    def test_side_by_side(self, browser: Any, factscore: Path, shots: Path) -> None:
        """Side by side with ChatGPT: InstructGPT's Doug Sheehan answer next to ChatGPT's (26 and 28 claims)."""
        open_page(browser, factscore, "explorer.html")
        set_filters(browser, model="InstructGPT", search="Doug Sheehan", compare="ChatGPT")
        wait_for(browser, lambda d: count(d) == "1 answer · 26 claims")
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".pair.two .answer")) == 2)
        heads = [h.text for h in browser.find_elements(By.CSS_SELECTOR, ".pair .answer h3")]
        assert heads == ["InstructGPT", "ChatGPT"]
        sizes = [len(a.find_elements(By.CSS_SELECTOR, "button.claim")) for a in browser.find_elements(By.CSS_SELECTOR, ".answer")]
        assert sizes == [26, 28]
        browser.save_screenshot(str(shots / "explorer-side-by-side.png"))

    def test_list_is_virtualized_and_keyboard_driven(self, browser: Any, factscore: Path) -> None:
        """384 answers, at most a viewport of rows in the DOM; End opens the last answer (PerplexityAI's last)."""
        open_page(browser, factscore, "explorer.html")
        assert 0 < len(browser.find_elements(By.CSS_SELECTOR, "#list .row")) <= 30
        assert browser.find_elements(By.CSS_SELECTOR, "button.claim") == []  # no answer loaded yet
        listbox = browser.find_element(By.ID, "list")
        listbox.send_keys(Keys.END)
        wait_for(browser, lambda d: d.find_element(By.ID, "list").get_attribute("aria-activedescendant") == "row-383")
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".answer h3"))
        assert browser.find_element(By.CSS_SELECTOR, ".answer h3").text == "PerplexityAI"
        assert browser.execute_script("return document.querySelectorAll('script[src^=\"data/answers-\"]').length") == 1
        listbox.send_keys(Keys.HOME)
        wait_for(browser, lambda d: d.find_element(By.ID, "list").get_attribute("aria-activedescendant") == "row-0")
        assert 0 < len(browser.find_elements(By.CSS_SELECTOR, "#list .row")) <= 30

    def test_every_request_is_a_file_of_the_site(self, browser: Any, factscore: Path) -> None:
        """Opening an answer requests the page, 4 scripts and the CSS, all files of the site folder (no network)."""
        requested_urls(browser)  # drop earlier pages' requests
        open_page(browser, factscore, "explorer.html")
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "button.claim"))
        urls = requested_urls(browser)
        root = factscore.resolve().as_uri() + "/"
        assert sorted(u[len(root):] for u in urls if u.startswith(root)) == [
            "data/answers-000.js", "data/index.js", "explorer.html", "static/explorer.js", "static/report.css",
            "static/theme.js"]
        assert [u for u in urls if not u.startswith((root, "chrome://"))] == []  # chrome://: the browser's own UI

    def test_dark_theme(self, browser: Any, factscore: Path, shots: Path) -> None:
        """The theme button switches to dark (page background #0d1117) and back."""
        open_page(browser, factscore, "explorer.html")
        start = browser.execute_script("return document.documentElement.dataset.theme")
        browser.find_element(By.ID, "theme").click()
        if start == "light":
            assert browser.execute_script("return getComputedStyle(document.body).backgroundColor") == "rgb(13, 17, 23)"
            browser.save_screenshot(str(shots / "explorer-dark.png"))
        browser.find_element(By.ID, "theme").click()
        assert browser.execute_script("return document.documentElement.dataset.theme") == start


class TestExplorerSpans:
    def test_highlighted_span_shows_reason_and_evidence(self, browser: Any, tmp_path_factory: pytest.TempPathFactory,
                                                        shots: Path) -> None:
        """The evidence Checker's q3-b: the span 'Gram-positive' claim is unsupported, with the reply and passage."""
        site = examples_site(tmp_path_factory)
        open_page(browser, site, "explorer.html")
        set_filters(browser, model="e-model-b", search="pylori")
        wait_for(browser, lambda d: count(d).startswith("1 answer"))
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        mark = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "mark.span.unsupported"))
        assert mark.text == "Helicobacter pylori is a Gram-positive bacterium."
        mark.send_keys(Keys.ENTER)
        detail = browser.find_element(By.CSS_SELECTOR, ".claim-detail")
        assert detail.find_element(By.CLASS_NAME, "c-label").text == "unsupported"
        assert detail.find_element(By.CLASS_NAME, "c-raw").text.startswith("passage hpylori#0-267 says the opposite of a claim word")
        heads = [h.text for h in detail.find_elements(By.CLASS_NAME, "ev-head")]
        assert heads and heads[0].startswith("hpylori")
        browser.save_screenshot(str(shots / "explorer-evidence.png"))


def contrast(fg: str, bg: str) -> float:
    """WCAG 2.1 contrast ratio of two computed CSS colours ``rgb(r, g, b)`` (§1.4.3, relative luminance)."""
    def lum(css: str) -> float:
        r, g, b = (int(x) / 255 for x in css[css.index("(") + 1:css.index(")")].split(",")[:3])
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    hi, lo = sorted((lum(fg), lum(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def over(css: str, base: str) -> str:
    """The opaque colour of CSS colour ``css`` (maybe ``rgba(...)``) painted over opaque ``base``."""
    parts = [float(x) for x in css[css.index("(") + 1:css.index(")")].split(",")]
    alpha = parts[3] if len(parts) == 4 else 1.0
    below = [float(x) for x in base[base.index("(") + 1:base.index(")")].split(",")[:3]]
    mixed = [round(alpha * c + (1 - alpha) * b) for c, b in zip(parts[:3], below)]
    return f"rgb({mixed[0]}, {mixed[1]}, {mixed[2]})"


@pytest.mark.data
class TestAccessibleAndPrintable:
    @pytest.mark.parametrize("theme", ["light", "dark"])
    def test_heatmap_cells_keep_text_readable(self, browser: Any, factscore: Path, theme: str) -> None:
        """All 15 heatmap cells: text on its shade over the page background is ≥ 4.5:1."""
        open_page(browser, factscore, "index.html")
        browser.execute_script("document.documentElement.dataset.theme = arguments[0]", theme)
        body = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        cells = browser.execute_script("return [...document.querySelectorAll('#heatmap td.heat')].map(e => "
                                       "[getComputedStyle(e).color, getComputedStyle(e).backgroundColor])")
        ratios = [contrast(fg, over(bg, body)) for fg, bg in cells]
        assert len(ratios) == 15 and min(ratios) >= 4.5, ratios

    @pytest.mark.parametrize("theme", ["light", "dark"])
    def test_text_and_verdict_colours_have_contrast(self, browser: Any, factscore: Path, theme: str) -> None:
        """Body text and the five verdict badges reach WCAG AA (≥ 4.5:1) in both themes."""
        open_page(browser, factscore, "explorer.html")
        browser.execute_script("document.documentElement.dataset.theme = arguments[0]", theme)
        pairs = browser.execute_script(
            "return [document.body, ...document.querySelectorAll('#legend .lab')].map(e => "
            "[e.textContent, getComputedStyle(e).color, getComputedStyle(e).backgroundColor])")
        body_bg = pairs[0][2]
        ratios = {name[:12]: round(contrast(fg, body_bg if bg == "rgba(0, 0, 0, 0)" else bg), 1) for name, fg, bg in pairs}
        assert len(ratios) == 6 and min(ratios.values()) >= 4.5, ratios

    def test_every_control_has_a_label(self, browser: Any, factscore: Path) -> None:
        """The six filter controls sit inside their <label>; the list and the theme button are named."""
        open_page(browser, factscore, "explorer.html")
        unlabelled = browser.execute_script(
            "return [...document.querySelectorAll('select, input')].filter(e => !e.closest('label')).map(e => e.id)")
        assert unlabelled == []
        assert browser.find_element(By.ID, "list").get_attribute("aria-label").startswith("Answers")
        assert browser.find_element(By.ID, "theme").get_attribute("aria-label") == "Switch light or dark theme"

    def test_print_hides_the_controls(self, browser: Any, factscore: Path) -> None:
        """In print media the filters and the list are hidden and the open answer is shown in full."""
        open_page(browser, factscore, "explorer.html")
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "button.claim"))
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
        try:
            assert not browser.find_element(By.ID, "filters").is_displayed()
            assert not browser.find_element(By.ID, "list").is_displayed()
            assert browser.execute_script("return getComputedStyle(document.getElementById('detail')).overflowY") == "visible"
            assert browser.find_element(By.CSS_SELECTOR, ".answer h3").is_displayed()
            assert len(browser.print_page().encode()) > 10_000  # the PDF Chromium prints
        finally:
            browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


class TestReferenceFacts:
    def test_facts_with_their_coverage(self, browser: Any, tmp_path: Path) -> None:
        """TWO_MODELS A1: recall 33.3%, weighted 50.0%; facts a covered, b and c not covered (weights 1, .5, .5)."""
        from dahl.report import build_report
        from tests.recall_runs import recall_run

        site = build_report([recall_run(tmp_path / "run")], tmp_path / "site", n_boot=20).out_dir
        open_page(browser, site, "explorer.html")
        set_filters(browser, model="A")
        wait_for(browser, lambda d: count(d).startswith("3 answers"))
        browser.find_element(By.CSS_SELECTOR, "#list .row").click()
        table = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "table.facts"))
        head = table.find_element(By.XPATH, "preceding-sibling::h4[1]").text
        assert head == "Reference facts · recall 33.3% · weighted 50.0%"
        cells = [[td.text for td in tr.find_elements(By.TAG_NAME, "td")] for tr in table.find_elements(By.TAG_NAME, "tr")[1:]]
        assert [c[1:] for c in cells] == [["1.00", "covered"], ["0.50", "not_covered"], ["0.50", "not_covered"]]
