"""Headless Chromium through Selenium, from the system's packages only.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them).
Selenium Manager is kept offline and given both paths, so nothing is ever
downloaded. Without them the browser tests skip locally and fail in CI.
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import os
import pathlib
import typing as t

import pytest

CHROMIUM = pathlib.Path("/usr/bin/chromium")
CHROMEDRIVER = pathlib.Path("/usr/bin/chromedriver")

if t.TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver


def _missing(reason: str) -> t.NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser tests")
    pytest.skip(reason)


@contextlib.contextmanager
def chromium(monkeypatch: pytest.MonkeyPatch) -> cabc.Iterator[WebDriver]:
    """A headless Chromium that records the console (``goog:loggingPrefs``)."""
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        _missing(
            "no system Chromium: apt-get install chromium chromium-driver"
            " (/usr/bin/chromium, /usr/bin/chromedriver)"
        )
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (the dev extra)")
    monkeypatch.setenv("SE_OFFLINE", "true")
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1100,760",
        "--hide-scrollbars",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        service=Service(executable_path=str(CHROMEDRIVER)), options=options
    )
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: WebDriver) -> list[str]:
    """Console entries at SEVERE level (errors, CSP violations) since last asked."""
    return [
        entry["message"]
        for entry in driver.get_log("browser")  # type: ignore[attr-defined]
        if entry["level"] == "SEVERE"
    ]


def screenshot_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    """``SQS_JOBS_SCREENSHOTS`` (e.g. docs/_static/dashboard) or a temporary folder."""
    folder = pathlib.Path(os.environ.get("SQS_JOBS_SCREENSHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"dashboard screenshots in {folder}")
    return folder
