"""``heartbeat_fraction``: how often the heartbeat extends a held message."""

from __future__ import annotations

import time
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine.worker._lease import Lease

from tests.engine.helpers import one_queue_group
from tests.engine.helpers import Payload
from tests.engine.helpers import poll_until
from tests.engine.helpers import SpyClient
from tests.support import message_count
from tests.support import stop_after

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

BAD_FRACTIONS = [0, 0.05, 0.0999, 0.5001, 0.6, 1, -0.2, float("nan"), float("inf")]
BAD_TYPES = ["0.2", True, None, [0.2]]


def lease_interval(queue: SqsQueue) -> float:
    return Lease(queue, "jobs", "receipt", "message-id", time.monotonic()).interval


def test_by_default_a_lease_is_extended_every_third_of_the_timeout(
    sqs: SQSClient, queue_url: str
) -> None:
    queue = SqsQueue(queue_url, boto_client=sqs, visibility_timeout=30)

    assert queue.heartbeat_fraction == pytest.approx(1 / 3)
    assert lease_interval(queue) == pytest.approx(10)


@pytest.mark.parametrize(("fraction", "interval"), [(0.1, 3), (0.25, 7.5), (0.5, 15)])
def test_a_lease_is_extended_every_timeout_times_the_fraction(
    sqs: SQSClient, queue_url: str, fraction: float, interval: float
) -> None:
    queue = SqsQueue(
        queue_url,
        boto_client=sqs,
        visibility_timeout=30,
        heartbeat_fraction=fraction,
    )

    assert lease_interval(queue) == pytest.approx(interval)


def test_the_heartbeat_waits_the_longer_interval_of_a_higher_fraction(
    sqs: SQSClient, queue_url: str
) -> None:
    """With 4 s and 0.5 the extensions are 2 s apart (1/3 would make them 1.3 s).

    Extensions due close together may go out up to a quarter of the interval
    early, in one batch: never less than 1.5 s apart here.
    """
    spy = SpyClient(sqs)
    sent: list[float] = []
    for operation in ("change_message_visibility", "change_message_visibility_batch"):
        spy.before[operation] = lambda _: sent.append(time.monotonic())
    group = one_queue_group(
        spy.client, queue_url, visibility_timeout=4, heartbeat_fraction=0.5
    )
    group.enqueue("jobs", "long", {})

    def long(payload: Payload) -> None:
        assert poll_until(lambda: len(sent) >= 2, timeout=30)

    JobWorker(group, {"long": long}, stop_after(1), 0).run()

    assert sent[1] - sent[0] >= 1.4
    assert message_count(sqs, queue_url) == 0


def test_a_queue_definition_carries_the_fraction(
    sqs: SQSClient, queue_url: str
) -> None:
    group = QueueGroup.build(
        boto_client=sqs,
        queues={"default": {"url": queue_url, "heartbeat_fraction": 0.2}},
    )

    assert group.queue("default").heartbeat_fraction == 0.2


def test_sqs_jobs_queues_entries_carry_the_fraction(
    sqs: SQSClient, queue_url: str
) -> None:
    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = {
        "default": {"name": "jobs", "heartbeat_fraction": 0.45},
        "other": {"name": "jobs"},
    }
    jobs = SQSJobs(app, boto_client=sqs)

    group = jobs.queue_group(app)

    assert group.queue("default").heartbeat_fraction == 0.45
    assert group.queue("other").heartbeat_fraction == pytest.approx(1 / 3)


@pytest.mark.parametrize("fraction", [0.1, 0.5])
def test_the_bounds_are_allowed(
    sqs: SQSClient, queue_url: str, fraction: float
) -> None:
    assert SqsQueue(queue_url, boto_client=sqs, heartbeat_fraction=fraction)


@pytest.mark.parametrize("fraction", BAD_FRACTIONS + BAD_TYPES)
def test_sqs_queue_refuses_a_fraction_outside_its_range(
    sqs: SQSClient, queue_url: str, fraction: t.Any
) -> None:
    with pytest.raises(
        ValueError, match=r"^heartbeat_fraction must be a number 0.1 to"
    ):
        SqsQueue(queue_url, boto_client=sqs, heartbeat_fraction=fraction)


@pytest.mark.parametrize("fraction", BAD_FRACTIONS + BAD_TYPES)
def test_a_definition_with_a_bad_fraction_is_refused_naming_queue_and_key(
    sqs: SQSClient, fraction: t.Any
) -> None:
    with pytest.raises(ValueError, match=r"^queue 'default': heartbeat_fraction "):
        QueueGroup.build(
            boto_client=sqs,
            queues={"default": {"name": "jobs", "heartbeat_fraction": fraction}},
        )


@pytest.mark.parametrize("fraction", [0.05, 0.9, "1/3"])
def test_init_app_refuses_a_bad_fraction_naming_the_setting_queue_and_key(
    fraction: t.Any,
) -> None:
    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = {
        "reports": {"name": "jobs", "heartbeat_fraction": fraction}
    }

    with pytest.raises(ValueError, match="heartbeat_fraction") as raised:
        SQSJobs(app)

    assert str(raised.value).startswith("SQS_JOBS_QUEUES: queue 'reports': ")
    assert repr(fraction) in str(raised.value)
