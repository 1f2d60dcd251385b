"""The dashboard in a real browser, served over HTTP, against a real SQS server.

Clicks through a redrive (select all, confirm) and checks the queues after,
with no console errors (a Content-Security-Policy violation is one) on any
page; writes a screenshot of each page (see :func:`screenshot_folder`).
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import datetime as dt
import json
import pathlib
import threading
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.dashboard._security import CONTENT_SECURITY_POLICY
from flask_sqs_jobs.dashboard._serve import standalone_app
from flask_sqs_jobs.store import SQLAlchemyStore
from werkzeug.serving import make_server

from tests.dashboard.store_records import record_job
from tests.dashboard.store_records import register_worker
from tests.support import message_count

from .browser import chromium
from .browser import console_errors
from .browser import screenshot_folder
from .conftest import unique_name
from .helpers import wait_until

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from selenium.webdriver.remote.webdriver import WebDriver

    from .conftest import MakeQueue


def _store(path: pathlib.Path) -> SQLAlchemyStore:
    """A SQLite store with an hour of finished jobs, a live and a lost worker."""
    store = SQLAlchemyStore(f"sqlite:///{path}")
    store.create_tables()
    now = dt.datetime.now(dt.UTC)
    for minute in range(0, 60, 3):
        failed = minute % 15 == 0
        record_job(
            store,
            f"job-{minute:02d}",
            "charge_card" if failed else "send_welcome_email",
            "dead_lettered" if failed else "succeeded",
            now - dt.timedelta(minutes=minute),
            attempts=5 if failed else 1,
            result=None if failed else {"sent": True},
            error="CardDeclined: insufficient funds" if failed else None,
            progress=None if failed else 1.0,
            progress_message=None if failed else "done",
        )
    register_worker(store, "web-1", 4242, now, busy_slots=1)
    register_worker(
        store,
        "web-2",
        977,
        now - dt.timedelta(minutes=10),
        queues=("default", "reports"),
    )
    return store


@pytest.fixture
def served(
    sqs_client: SQSClient, make_queue: MakeQueue, tmp_path: pathlib.Path
) -> cabc.Iterator[tuple[str, str, str]]:
    """The app with the dashboard at /jobs on a real HTTP server: (base, queue, DLQ)."""
    dlq = make_queue("dash-dlq")
    name = unique_name("dash")
    source = make_queue(name=name, dead_letter_url=dlq, max_receive_count=1000)
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="browser-test", SQS_JOBS_QUEUES={"default": {"name": name}}
    )
    store = _store(tmp_path / "jobs.db")
    jobs = SQSJobs(app, boto_client=sqs_client, store=store)

    @jobs.periodic("nightly_report", cron="0 3 * * *", timezone="Europe/Berlin")
    def nightly_report(payload: dict[str, t.Any]) -> None: ...

    app.register_blueprint(jobs.dashboard(authorize=lambda: True), url_prefix="/jobs")

    @app.get("/csp-probe")
    def csp_probe() -> t.Any:
        # An inline script under the dashboard's policy: the browser must refuse
        # it and say so on the console, or console_errors would prove nothing.
        page = (
            '<!doctype html><title>probe</title><link rel="icon" href="data:,">'
            "<script>document.title='x'</script>"
        )
        return page, 200, {"Content-Security-Policy": CONTENT_SECURITY_POLICY}

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}/jobs", source, dlq
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
        store.close()


DEAD_LETTERS = [
    ("send_welcome_email", "SMTPServerDisconnected", "Connection unexpectedly closed"),
    ("charge_card", "CardDeclined", "insufficient funds"),
    ("<script>x</script>", "KeyError", "'<img src=x onerror=alert(1)>'"),
]


def _dead_letters(sqs: SQSClient, url: str) -> None:
    for n, (job_type, error_type, error) in enumerate(DEAD_LETTERS):
        body = {"job_type": job_type, "payload": {"user_id": 40 + n}, "job_id": f"j{n}"}
        reason = {
            "error_type": error_type,
            "error": error,
            "failed_at": "2026-12-01T03:00:00Z",
            "source_queue": "default",
            "receive_count": 5,
        }
        attribute: t.Any = {"DataType": "String", "StringValue": json.dumps(reason)}
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(body),
            MessageAttributes={"dead_letter": attribute},
        )


def _visit(driver: WebDriver, url: str, folder: pathlib.Path, shot: str) -> None:
    driver.get(url)
    _settled(driver, folder, shot)


def _heading(driver: WebDriver, prefix: str) -> None:
    """Wait for the page whose heading starts with ``prefix`` (after a click)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    WebDriverWait(
        driver, 15, ignored_exceptions=[StaleElementReferenceException]
    ).until(lambda d: d.find_element(By.TAG_NAME, "h1").text.startswith(prefix))


def _text(driver: WebDriver, selector: str) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.CSS_SELECTOR, selector).text)


def _settled(driver: WebDriver, folder: pathlib.Path, shot: str) -> None:
    driver.save_screenshot(str(folder / f"{shot}.png"))
    assert console_errors(driver) == [], shot


def test_redrive_through_the_browser(
    served: tuple[str, str, str],
    sqs_client: SQSClient,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: pathlib.Path,
) -> None:
    from selenium.webdriver.common.by import By

    base, source, dlq = served
    _dead_letters(sqs_client, dlq)
    folder = screenshot_folder(tmp_path)
    with chromium(monkeypatch) as driver:
        driver.get(base.removesuffix("/jobs") + "/csp-probe")
        refused: list[str] = []

        def csp_refusal_logged() -> bool:
            # The browser may report the violation after the page has loaded.
            refused.extend(console_errors(driver))
            return any("Content Security Policy" in entry for entry in refused)

        wait_until(csp_refusal_logged, 10, lambda: f"a CSP refusal among {refused}")
        assert driver.title == "probe"

        _visit(driver, f"{base}/", folder, "queues")
        assert "20 finished, 4 failed" in _text(driver, "td.chart")
        assert (
            driver.find_element(By.CSS_SELECTOR, '[data-field="dead_letter"]').text
            == "3"
        )
        sqs_client.send_message(QueueUrl=source, MessageBody="{}")
        wait_until(
            lambda: (
                driver.find_element(By.CSS_SELECTOR, '[data-field="visible"]').text
                == "1"
            ),
            15,
            lambda: "the live refresh to show the new message",
        )
        assert console_errors(driver) == []

        driver.find_element(By.CSS_SELECTOR, '[data-field="dead_letter"]').click()
        _heading(driver, "Dead letters of")
        assert "<script>x</script>" in _text(driver, "table")
        _settled(driver, folder, "dead-letters")
        driver.find_element(By.CSS_SELECTOR, "input[data-select-all]").click()
        boxes = driver.find_elements(By.CSS_SELECTOR, 'input[name="message_id"]')
        assert [box.is_selected() for box in boxes] == [True, True, True]
        driver.find_element(By.ID, "redrive-selected").click()

        _heading(driver, "Confirm: redrive 3 dead letter(s)")
        _settled(driver, folder, "confirm")
        assert message_count(sqs_client, dlq) == 3
        driver.find_element(By.ID, "confirm").click()

        _heading(driver, "Redriven: 3")
        _settled(driver, folder, "redriven")
        assert message_count(sqs_client, dlq) == 0
        assert message_count(sqs_client, source) == 4

        _visit(driver, f"{base}/jobs", folder, "jobs")
        assert "send_welcome_email" in _text(driver, "table")
        _visit(driver, f"{base}/jobs?status=failed", folder, "failed-jobs")
        driver.find_element(By.LINK_TEXT, "job-00").click()
        _heading(driver, "Job job-00")
        assert "CardDeclined" in _text(driver, "dl")
        _settled(driver, folder, "job")
        _visit(driver, f"{base}/workers", folder, "workers")
        states = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ".status")]
        assert states == ["lost", "live"]  # oldest first: web-2 started first
        assert "web-1:4242" in _text(driver, "table")
        _visit(driver, f"{base}/schedules", folder, "schedules")
        assert "nightly_report" in _text(driver, "table")


@contextlib.contextmanager
def _serving(app: t.Any) -> cabc.Iterator[int]:
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def _attacker(target: str) -> Flask:
    """A page of another origin on this machine: an ``<img>`` of the dead letters
    and a form-like POST deleting them all, each with the browser's cookies."""
    attacker = Flask("attacker")

    @attacker.get("/")
    def page() -> t.Any:
        letters = f"{target}/queues/default/dead-letters"
        return (
            '<!doctype html><title>waiting</title><link rel="icon" href="data:,">'
            f'<img src="{letters}" id="peek">'
            "<script>"
            "var img = document.getElementById('peek'), n = 0;"
            "function one() { if (++n == 2) { document.title = 'done'; } }"
            "img.onerror = img.onload = one;"
            f"fetch('{letters}', {{method: 'POST', mode: 'no-cors',"
            " credentials: 'include', body: new URLSearchParams({action: 'delete',"
            " scope: 'all', confirmed: 'yes'})}).then(one, one);"
            "</script>"
        )

    return attacker


def _receive_counts(sqs: SQSClient, url: str, expected: int) -> list[str]:
    """Each message's ApproximateReceiveCount once received here (hidden while
    gathered, so each is received once), then visible again."""
    found: dict[str, t.Any] = {}

    def gather() -> bool:
        for message in sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=60,
            MessageSystemAttributeNames=["All"],
        ).get("Messages", []):
            found.setdefault(message["MessageId"], message)
        return len(found) >= expected

    wait_until(gather, 15, lambda: f"{expected} messages on {url}, got {len(found)}")
    for message in found.values():
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    return [m["Attributes"]["ApproximateReceiveCount"] for m in found.values()]


def test_the_standalone_dashboard_through_the_browser(
    sqs_client: SQSClient,
    make_queue: MakeQueue,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its printed URL signs the browser in; a page of another origin on this
    machine, whose requests carry that cookie, can neither peek nor delete."""
    from selenium.webdriver.common.by import By

    dlq = make_queue("dash-solo-dlq")
    name = unique_name("dash-solo")
    make_queue(name=name, dead_letter_url=dlq, max_receive_count=1000)
    app = Flask(__name__)
    app.config.update(SECRET_KEY="solo", SQS_JOBS_QUEUES={"default": {"name": name}})
    jobs = SQSJobs(app, boto_client=sqs_client)
    _dead_letters(sqs_client, dlq)
    token = "browser-run-token"
    with (
        _serving(standalone_app(jobs, app, token=token)) as port,
        _serving(_attacker(f"http://127.0.0.1:{port}")) as other,
        chromium(monkeypatch) as driver,
    ):
        driver.get(f"http://127.0.0.1:{port}/?token={token}")
        _heading(driver, "Queues")
        assert driver.current_url == f"http://127.0.0.1:{port}/"

        driver.get(f"http://127.0.0.1:{other}/")
        wait_until(lambda: driver.title == "done", 15, lambda: driver.page_source)
        assert message_count(sqs_client, dlq) == 3
        counts = _receive_counts(sqs_client, dlq, 3)
        assert counts == ["1", "1", "1"], "an <img> peeked at the dead letters"
        refused = console_errors(driver)
        assert any("status of 403" in entry for entry in refused), refused

        driver.get(f"http://127.0.0.1:{port}/")
        driver.find_element(By.CSS_SELECTOR, '[data-field="dead_letter"]').click()
        _heading(driver, "Dead letters of")
        assert "<script>x</script>" in _text(driver, "table")
        assert console_errors(driver) == []
