"""Headless Chromium for the HTML report, driven by Selenium (tests/report and bench.report_open).

Uses Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``; ``.ci/run`` installs them) so Selenium Manager never
downloads a driver. The browser runs with a fresh profile and with background
networking, updates and sync off: the report must work with no network.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["CHROME_FLAGS", "chromium", "missing", "requested_urls"]

CHROME_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,900")


def _paths() -> tuple[str | None, str | None]:
    browser = os.environ.get("DAHL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("DAHL_CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


def missing() -> str | None:
    """Why headless Chromium cannot run here (None when it can): selenium, chromium or chromedriver absent."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e '.[test]')"
    browser, driver = _paths()
    if browser is None:
        return "chromium not found (apt-get install chromium, or set DAHL_CHROMIUM)"
    if driver is None:
        return "chromedriver not found (apt-get install chromium-driver, or set DAHL_CHROMEDRIVER)"
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A Selenium WebDriver of headless Chromium with a throw-away profile; quit on exit.

    Raises:
        RuntimeError: :func:`missing` gives a reason.
    """
    reason = missing()
    if reason is not None:
        raise RuntimeError(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = _paths()
    profile = tempfile.mkdtemp(prefix="dahl-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(browser)
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    # DevTools events (driver.get_log("performance")): tests read every request the page makes.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(driver_path)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def requested_urls(driver: Any) -> list[str]:
    """URLs the browser requested since the last call (DevTools ``Network.requestWillBeSent`` events)."""
    import json

    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls
