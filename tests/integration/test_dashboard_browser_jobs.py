"""The jobs page in a real browser: search by tag, run a failed job again, see it run.

A real HTTP server and a real SQS server; the job that runs again is taken by
a real worker (``work_off``), and the page's live refresh shows its new
status without a reload. No console errors (a CSP violation is one).
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import json
import pathlib
import threading
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.store import SQLAlchemyStore
from flask_sqs_jobs.store.model._records import JobEvent
from flask_sqs_jobs.testing import work_off
from werkzeug.serving import make_server

from tests.dashboard.store_records import record_job
from tests.support import visible_messages

from .browser import chromium
from .browser import console_errors
from .browser import screenshot_folder
from .conftest import unique_name
from .helpers import wait_until

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from selenium.webdriver.remote.webdriver import WebDriver

    from .conftest import MakeQueue

HOSTILE_TAG = "<b>vip</b>"


def _failed(store: SQLAlchemyStore, job_id: str, tags: tuple[str, ...]) -> None:
    at = dt.datetime.now(dt.UTC)
    store.job_records().write(
        [
            JobEvent(job_id, "charge_card", "default", "running", 1, at, tags=tags),
            JobEvent(
                job_id,
                "charge_card",
                "default",
                "failed",
                1,
                at,
                finished_at=at,
                error="CardDeclined: insufficient funds",
                payload=json.dumps({"order_id": 7}),
                tags=tags,
            ),
        ]
    )


@pytest.fixture
def served(
    sqs_client: SQSClient, make_queue: MakeQueue, tmp_path: pathlib.Path
) -> cabc.Iterator[tuple[str, Flask, str, SQLAlchemyStore]]:
    name = unique_name("dash-jobs")
    source = make_queue(name=name)
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="browser-test", SQS_JOBS_QUEUES={"default": {"name": name}}
    )
    store = SQLAlchemyStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    store.create_tables()
    jobs = SQSJobs(app, boto_client=sqs_client, store=store)

    @jobs.task()
    def charge_card(order_id: int) -> dict[str, int]:
        return {"charged": order_id}

    _failed(store, "pay-1", ("customer:7", HOSTILE_TAG))
    now = dt.datetime.now(dt.UTC)
    record_job(store, "pay-2", "charge_card", "succeeded", now, tags=("customer:8",))
    record_job(store, "mail-1", "send_email", "succeeded", now, tags=("customer:7",))
    app.register_blueprint(jobs.dashboard(authorize=lambda: True), url_prefix="/jobs")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}/jobs", app, source, store
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        store.close()


def _heading(driver: WebDriver, prefix: str) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    WebDriverWait(
        driver, 15, ignored_exceptions=[StaleElementReferenceException]
    ).until(lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith(prefix))


def _listed(driver: WebDriver) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "tr[data-job-id]")
    return [str(row.get_attribute("data-job-id")) for row in rows]


def _status(driver: WebDriver, job_id: str) -> str:
    from selenium.webdriver.common.by import By

    cell = driver.find_element(
        By.CSS_SELECTOR, f'tr[data-job-id="{job_id}"] [data-field="status"]'
    )
    return str(cell.text)


def test_search_by_tag_then_run_a_failed_job_again(
    served: tuple[str, Flask, str, SQLAlchemyStore],
    sqs_client: SQSClient,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
) -> None:
    from selenium.webdriver.common.by import By

    base, app, source, store = served
    folder = screenshot_folder(tmp_path)
    with chromium(monkeypatch) as driver:
        driver.get(f"{base}/jobs")
        assert sorted(_listed(driver)) == ["mail-1", "pay-1", "pay-2"]
        driver.find_element(By.ID, "search-tag").send_keys("customer:7")
        driver.find_element(By.ID, "search-job-type").send_keys("charge_card")
        driver.find_element(By.ID, "search-submit").click()
        wait_until(lambda: _listed(driver) == ["pay-1"], 15, lambda: driver.page_source)
        assert HOSTILE_TAG in driver.find_element(By.CSS_SELECTOR, "td.tags").text
        driver.save_screenshot(str(folder / "job-search.png"))
        assert console_errors(driver) == []

        driver.find_element(By.LINK_TEXT, "pay-1").click()
        _heading(driver, "Job pay-1")
        driver.find_element(By.ID, "retry-job").click()
        _heading(driver, "Confirm: run 1 failed job(s) again")
        driver.save_screenshot(str(folder / "retry-confirm.png"))
        assert visible_messages(sqs_client, source) == []
        driver.find_element(By.ID, "confirm-retry").click()
        _heading(driver, "Sent again: 1 job(s)")
        [message] = visible_messages(sqs_client, source)
        body = json.loads(message["Body"])
        assert (body["job_id"], body["payload"]) == ("pay-1", {"order_id": 7})

        driver.get(f"{base}/jobs?tag=customer%3A7&job_type=charge_card")
        assert _status(driver, "pay-1") == "queued"
        with app.app_context():
            [finished] = work_off(app)
        assert (finished.outcome, finished.job.job_id) == ("success", "pay-1")
        wait_until(
            lambda: _status(driver, "pay-1") == "succeeded",
            20,
            lambda: f"the live refresh to show the run, got {_status(driver, 'pay-1')}",
        )
        record = store.job_records().get("pay-1")
        assert record is not None
        # The new attempt's count is SQS's receive count (this test's peek counts).
        assert (record.status, record.attempts, record.result) == (
            "succeeded",
            finished.job.receive_count,
            {"charged": 7},
        )
        assert console_errors(driver) == []
