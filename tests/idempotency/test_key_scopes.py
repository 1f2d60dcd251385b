"""Idempotency keys belong to their job type, unless shared on purpose."""

from __future__ import annotations

import typing as t

import pytest
import sqlalchemy as sa
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.model import stored_key
from flask_sqs_jobs.engine.model._idempotency_keys import payload_fingerprint
from flask_sqs_jobs.store.sql._tables import idempotency

from tests.idempotency.conftest import Finished
from tests.idempotency.conftest import RunWorker

Payload: t.TypeAlias = dict[str, t.Any]


def enqueue(
    app: Flask, jobs: SQSJobs, job_type: str, payload: Payload, job_id: str
) -> None:
    with app.app_context():
        jobs.enqueue("default", job_type, payload, job_id=job_id)


def stored_keys(app: Flask, jobs: SQSJobs) -> list[str]:
    with jobs.store(app).engine.connect() as connection:  # type: ignore[attr-defined]
        return sorted(connection.execute(sa.select(idempotency.c.key)).scalars())


def done(n: int) -> t.Callable[[Finished], bool]:
    return lambda finished: finished.count() >= n


def test_the_same_job_id_and_payload_under_another_job_type_runs(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[str] = []
    jobs.handler("charge", idempotent=True)(lambda payload: runs.append("charge"))
    jobs.handler("send_receipt", idempotent=True)(
        lambda payload: runs.append("send_receipt")
    )

    enqueue(store_app, jobs, "charge", {"order": 7}, "order-7")
    enqueue(store_app, jobs, "send_receipt", {"order": 7}, "order-7")
    finished = run_worker(done(2))

    assert finished.values() == ["success", "success"]
    assert runs == ["charge", "send_receipt"]
    assert stored_keys(store_app, jobs) == ["charge:order-7", "send_receipt:order-7"]


def test_a_key_functions_keys_are_namespaced_by_job_type_too(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[str] = []
    for job_type in ("bill", "ship"):
        jobs.handler(job_type, idempotency_key=lambda payload: f"order:{payload['o']}")(
            lambda payload, job_type=job_type: runs.append(job_type)
        )

    enqueue(store_app, jobs, "bill", {"o": 1}, "a")
    enqueue(store_app, jobs, "ship", {"o": 1}, "b")
    enqueue(store_app, jobs, "ship", {"o": 1}, "c")
    finished = run_worker(done(3))

    assert finished.values() == ["success", "success", "duplicate"]
    assert runs == ["bill", "ship"]


def test_a_global_scope_shares_keys_between_job_types_on_purpose(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[str] = []
    for job_type in ("send_invoice", "send_invoice_v2"):
        jobs.handler(
            job_type,
            idempotency_key=lambda payload: f"invoice:{payload['invoice']}",
            idempotency_scope="global",
        )(lambda payload, job_type=job_type: runs.append(job_type))
    # A job type of the default scope never meets the global keys.
    jobs.handler(
        "audit", idempotency_key=lambda payload: f"invoice:{payload['invoice']}"
    )(lambda payload: runs.append("audit"))

    enqueue(store_app, jobs, "send_invoice", {"invoice": 4}, "a")
    enqueue(store_app, jobs, "send_invoice_v2", {"invoice": 4}, "b")
    enqueue(store_app, jobs, "send_invoice_v2", {"invoice": 4, "late": 1}, "c")
    enqueue(store_app, jobs, "audit", {"invoice": 4}, "d")
    finished = run_worker(done(4))

    # Same key and payload: a duplicate, whichever type; another payload: a conflict.
    assert finished.values() == ["success", "duplicate", "dead_lettered", "success"]
    assert runs == ["send_invoice", "audit"]
    assert stored_keys(store_app, jobs) == [":invoice:4", "audit:invoice:4"]


def test_a_key_stored_before_namespacing_is_not_matched_so_the_job_runs_once_more(
    store_app: Flask, jobs: SQSJobs, run_worker: RunWorker
) -> None:
    runs: list[Payload] = []
    jobs.handler("charge", idempotent=True)(runs.append)
    old_keys = jobs.store(store_app).idempotency_keys()
    claim = old_keys.claim(
        "order-1",
        payload_hash=payload_fingerprint({}),
        job_id="order-1",
        lease_seconds=60,
    )
    assert claim.token is not None
    old_keys.complete("order-1", claim.token, result=None, ttl_seconds=3600)

    enqueue(store_app, jobs, "charge", {}, "order-1")
    enqueue(store_app, jobs, "charge", {}, "order-1")
    finished = run_worker(done(2))

    assert finished.values() == ["success", "duplicate"]
    assert len(runs) == 1


def test_stored_keys_of_two_job_types_never_meet() -> None:
    assert stored_key("charge", "order-7", "job_type") == "charge:order-7"
    assert stored_key("charge", "order-7", "global") == ":order-7"
    # A job type with a colon is percent-encoded: ("a", "b:c") and ("a:b", "c")
    # are two keys.
    assert stored_key("a", "b:c", "job_type") == "a:b:c"
    assert stored_key("a:b", "c", "job_type") == "a%3Ab:c"
    assert stored_key("", "a:b", "job_type") != stored_key("a", "b", "global")
    long = stored_key("charge", "k" * 255, "job_type")
    assert long.startswith("#")
    assert len(long) == 65
    assert long != stored_key("refund", "k" * 255, "job_type")
    assert len(stored_key("t" * 300, "k", "job_type")) <= 255


def test_the_payload_hash_covers_the_job_type_unless_keys_are_shared() -> None:
    payload = {"order": 7}
    assert payload_fingerprint(payload, "charge") != payload_fingerprint(
        payload, "send_receipt"
    )
    assert payload_fingerprint(payload, None) == payload_fingerprint(payload)


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"idempotent": True, "idempotency_scope": "app"}, ValueError, "'global'"),
        ({"idempotent": True, "idempotency_scope": None}, ValueError, "'job_type'"),
        ({"idempotency_scope": "global"}, ValueError, "only applies to idempotent"),
    ],
)
def test_a_bad_scope_is_refused_at_registration(
    jobs: SQSJobs, options: dict[str, t.Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        jobs.handler("charge", **options)
