"""A store that fails never changes a job's outcome: it is logged and counted."""

from __future__ import annotations

import typing as t

import pytest
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.ops._metrics import PrometheusMetrics
from flask_sqs_jobs.store.records import _writer
from flask_sqs_jobs.testing import work_off

from tests.conftest import MakeApp
from tests.integration.servers import free_port

if t.TYPE_CHECKING:
    from structlog.typing import EventDict


def store_errors() -> float:
    text = PrometheusMetrics().render()[0].decode()
    for line in text.splitlines():
        if line.startswith('sqs_jobs_store_errors_total{part="job_records"}'):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.parametrize("broken", ["tables missing", "database down"])
def test_a_failing_store_leaves_the_outcome_and_counts_the_errors(
    broken: str,
    make_app: MakeApp,
    jobs: SQSJobs,
    app_config: dict[str, t.Any],
    tmp_path: t.Any,
    log_events: list[EventDict],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One write again at once before giving up, rather than 15 s of retries.
    monkeypatch.setattr(_writer, "RETRY_DELAYS", (0.0,))
    url = (
        f"sqlite:///{tmp_path / 'never-initialised.db'}"
        if broken == "tables missing"
        else f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/jobs"
    )
    app = make_app({**app_config, "SQS_JOBS_STORE_URL": url})
    ran: list[int] = []

    @jobs.handler("work")
    def work(payload: dict[str, int]) -> dict[str, bool]:
        ran.append(payload["n"])
        return {"ok": True}

    before = store_errors()
    with app.app_context():
        jobs.enqueue("default", "work", {"n": 1}, job_id="work-1")
        [finished] = work_off(app)
    assert (finished.outcome, ran) == ("success", [1])
    # queued, running and succeeded: three writes, none of them stored.
    assert store_errors() - before >= 3
    failures = [e for e in log_events if e["event"] == "job_record_failed"]
    assert failures
    assert all(e["writes"] >= 1 for e in failures)
    jobs.store(app).close()
