"""What a worker counts: ``JobWorker.stats()`` and the metrics of messages that
never reach a handler."""

from __future__ import annotations

import json
import typing as t

import pytest
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import NonRetryableError
from flask_sqs_jobs.contrib.prometheus import PrometheusMetrics
from flask_sqs_jobs.engine import HealthServer
from flask_sqs_jobs.engine.model._outcome import Outcome
from prometheus_client.parser import text_string_to_metric_families

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

Samples: t.TypeAlias = dict[tuple[str, frozenset[tuple[str, str]]], float]

#: Bodies that are not jobs, and the reason each is counted under.
MALFORMED = [
    ("not json at all", "not_json"),
    ("[" * 100_000, "too_deep"),
    ("[1, 2]", "not_object"),
    ('"a job"', "not_object"),
    ('{"payload": {}}', "bad_job_type"),
    ('{"job_type": ["record"], "payload": {}}', "bad_job_type"),
    ('{"job_type": "record"}', "bad_payload"),
    ('{"job_type": "record", "payload": [1]}', "bad_payload"),
]


def samples(metrics: PrometheusMetrics) -> Samples:
    text = metrics.render()[0].decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def run_cycles(worker: JobWorker) -> None:
    assert worker.run() == 0


def test_stats_before_the_worker_runs(sqs: SQSClient, queue_url: str) -> None:
    worker = JobWorker(one_queue_group(sqs, queue_url), {})

    stats = worker.stats()

    assert stats == {
        "busy_slots": 0,
        "last_receive_age": None,
        "outcomes": {outcome.value: 0 for outcome in Outcome},
    }


def test_stats_count_each_outcome(sqs: SQSClient, queue_url: str) -> None:
    group = one_queue_group(sqs, queue_url, visibility_timeout=30)

    def drop(payload: Payload) -> None:
        raise NonRetryableError("not this one")

    def fail(payload: Payload) -> None:
        raise RuntimeError("later")

    for job_type in ["ok", "ok", "drop", "fail"]:
        group.enqueue("jobs", job_type, {})
    worker = JobWorker(
        group,
        {"ok": lambda payload: None, "drop": drop, "fail": fail},
        stop_after(4),
        idle_wait_seconds=0,
    )
    run_cycles(worker)

    stats = worker.stats()
    outcomes = stats["outcomes"]
    assert outcomes["success"] == 2
    assert outcomes["delete"] == 1
    assert outcomes["retry"] == 1
    assert sum(outcomes.values()) == 4
    assert stats["busy_slots"] == 0
    assert isinstance(stats["last_receive_age"], float)
    assert stats["last_receive_age"] >= 0


def test_messages_that_are_not_jobs_are_counted_by_reason_and_deleted(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url, visibility_timeout=30)
    for body, _ in MALFORMED:
        sqs.send_message(QueueUrl=queue_url, MessageBody=body)
    metrics = PrometheusMetrics()
    worker = JobWorker(
        group, {"record": lambda payload: None}, stop_after(len(MALFORMED)), 0
    )
    metrics.bind(worker)
    run_cycles(worker)

    counted = {
        labels: value
        for (name, labels), value in samples(metrics).items()
        if name == "sqs_jobs_malformed_total"
    }
    expected: dict[str, int] = {}
    for _, reason in MALFORMED:
        expected[reason] = expected.get(reason, 0) + 1
    assert counted == {
        frozenset({("queue", "jobs"), ("reason", reason)}): count
        for reason, count in expected.items()
    }
    assert message_count(sqs, queue_url) == 0
    assert sum(worker.stats()["outcomes"].values()) == 0


def test_a_bad_job_id_is_counted_and_its_job_still_runs(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url, visibility_timeout=30)
    body = {"job_type": "record", "payload": {"n": 1}, "job_id": "no spaces allowed"}
    sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(body))
    ran: list[Payload] = []
    metrics = PrometheusMetrics()
    worker = JobWorker(group, {"record": ran.append}, stop_after(1), 0)
    metrics.bind(worker)
    run_cycles(worker)

    assert ran == [{"n": 1}]
    key = frozenset({("queue", "jobs"), ("reason", "bad_job_id")})
    assert samples(metrics)[("sqs_jobs_malformed_total", key)] == 1
    assert worker.stats()["outcomes"]["success"] == 1


def test_unknown_job_types_are_counted_per_queue_never_by_type(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url, visibility_timeout=30)
    hostile = 'x"} 1\nsqs_jobs_healthy 0\n# {'
    for job_type in ["retired_job", hostile]:
        group.enqueue("jobs", job_type, {})
    metrics = PrometheusMetrics()
    worker = JobWorker(group, {"record": lambda payload: None}, stop_after(2), 0)
    metrics.bind(worker)
    run_cycles(worker)

    scraped = samples(metrics)
    text = metrics.render()[0].decode()
    assert (
        scraped[("sqs_jobs_unknown_job_type_total", frozenset({("queue", "jobs")}))]
        == 2
    )
    assert "retired_job" not in text
    assert "sqs_jobs_healthy 0" not in text
    assert message_count(sqs, queue_url) == 2  # hidden for a worker that knows them


def test_the_counter_families_are_served_before_anything_is_counted() -> None:
    text = PrometheusMetrics().render()[0].decode()

    assert "# TYPE sqs_jobs_malformed_total counter" in text
    assert "# TYPE sqs_jobs_unknown_job_type_total counter" in text
    assert "# TYPE sqs_jobs_healthy gauge" in text


@pytest.mark.parametrize(("started_ago", "healthy"), [(0, True), (120, False)])
def test_healthy_follows_what_healthz_answers(
    sqs: SQSClient, queue_url: str, started_ago: float, healthy: bool
) -> None:
    """A worker that has completed no receive is healthy for the max age (60 s)
    from the health server's start, then not."""
    worker = JobWorker(one_queue_group(sqs, queue_url), {})
    metrics = PrometheusMetrics()
    metrics.bind(worker)
    health = HealthServer(worker, metrics=metrics)
    try:
        health._started -= started_ago

        assert health.check()[0] is healthy
        assert samples(metrics)[("sqs_jobs_healthy", frozenset())] == int(healthy)
    finally:
        health.stop()


def test_healthy_without_a_health_server_uses_the_default_limit(
    sqs: SQSClient, queue_url: str
) -> None:
    worker = JobWorker(one_queue_group(sqs, queue_url), {}, stop_after(1), 0)
    metrics = PrometheusMetrics()

    assert samples(metrics)[("sqs_jobs_healthy", frozenset())] == 0
    metrics.bind(worker)
    run_cycles(worker)

    assert samples(metrics)[("sqs_jobs_healthy", frozenset())] == 1


def test_status_lists_the_outcomes(sqs: SQSClient, queue_url: str) -> None:
    group = one_queue_group(sqs, queue_url, visibility_timeout=30)
    group.enqueue("jobs", "ok", {})
    worker = JobWorker(group, {"ok": lambda payload: None}, stop_after(1), 0)
    run_cycles(worker)

    health = HealthServer(worker)
    status = health.status()
    health.stop()

    assert status["outcomes"] == worker.stats()["outcomes"]
    assert status["outcomes"]["success"] == 1


def test_concurrency_is_served_beside_the_busy_slots(
    sqs: SQSClient, queue_url: str
) -> None:
    worker = JobWorker(one_queue_group(sqs, queue_url), {}, concurrency=4)
    metrics = PrometheusMetrics()
    metrics.bind(worker)

    scraped = samples(metrics)
    assert scraped[("sqs_jobs_concurrency", frozenset())] == 4
    assert scraped[("sqs_jobs_busy_slots", frozenset())] == 0


def test_queue_wait_is_observed_once_per_received_job(
    sqs: SQSClient, queue_url: str
) -> None:
    group = one_queue_group(sqs, queue_url)
    group.enqueue("jobs", "ok", {})
    group.enqueue("jobs", "ok", {})
    metrics = PrometheusMetrics()
    worker = JobWorker(
        group, {"ok": lambda payload: None}, stop_after(2), 0, hooks=[metrics]
    )
    metrics.bind(worker)
    run_cycles(worker)

    scraped = samples(metrics)
    assert (
        scraped[("sqs_jobs_queue_wait_seconds_count", frozenset({("queue", "jobs")}))]
        == 2
    )
    assert (
        scraped[("sqs_jobs_queue_wait_seconds_sum", frozenset({("queue", "jobs")}))]
        >= 0
    )
