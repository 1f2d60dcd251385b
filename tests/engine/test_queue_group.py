"""QueueGroup: building it from definitions, and the weighted polling order."""

from __future__ import annotations

import collections
import typing as t

import pytest
from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import JobHandler

from tests.engine.helpers import Payload
from tests.support import create_queue
from tests.support import message_count
from tests.support import stop_after
from tests.support import visible_messages

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient


class TestBuild:
    def test_a_queue_is_found_by_its_name(self, sqs: SQSClient, queue_url: str) -> None:
        group = QueueGroup.build(boto_client=sqs, queues={"default": {"name": "jobs"}})

        group.enqueue("default", "ping", {})

        assert message_count(sqs, queue_url) == 1

    def test_a_queue_is_given_by_its_url(self, sqs: SQSClient, queue_url: str) -> None:
        group = QueueGroup.build(
            boto_client=sqs, queues={"default": {"url": queue_url}}
        )

        group.enqueue("default", "ping", {})

        assert message_count(sqs, queue_url) == 1

    def test_a_name_sqs_does_not_know_raises_a_value_error_naming_it(
        self, sqs: SQSClient
    ) -> None:
        with pytest.raises(ValueError, match="'default'") as info:
            QueueGroup.build(boto_client=sqs, queues={"default": {"name": "missing"}})

        assert "'missing'" in str(info.value)

    @pytest.mark.parametrize(
        ("definition", "error", "key"),
        [
            pytest.param({}, ValueError, "'name'", id="neither name nor url"),
            pytest.param(
                {"name": "jobs", "url": "https://x/jobs"},
                ValueError,
                "'url'",
                id="both name and url",
            ),
            pytest.param({"name": ""}, ValueError, "'name'", id="empty name"),
            pytest.param({"name": 5}, ValueError, "'name'", id="int name"),
            pytest.param({"url": None}, ValueError, "'url'", id="None url"),
            pytest.param({"name": "jobs", "weight": 0}, ValueError, "'weight'", id="0"),
            pytest.param(
                {"name": "jobs", "weight": -2}, ValueError, "'weight'", id="negative"
            ),
            pytest.param(
                {"name": "jobs", "weight": 1.5}, ValueError, "'weight'", id="float"
            ),
            pytest.param(
                {"name": "jobs", "weight": "2"}, ValueError, "'weight'", id="str"
            ),
            pytest.param(
                {"name": "jobs", "weight": True}, ValueError, "'weight'", id="bool"
            ),
            pytest.param(
                {"name": "jobs", "wieght": 2}, ValueError, "'wieght'", id="unknown key"
            ),
            pytest.param(
                {"name": "jobs", "visibility_timeout": -1},
                ValueError,
                "visibility_timeout",
                id="negative visibility_timeout",
            ),
            pytest.param(
                {"name": "jobs", "max_runtime_seconds": 0},
                ValueError,
                "max_runtime_seconds",
                id="zero max_runtime_seconds",
            ),
            pytest.param(
                {"name": "jobs", "retry_backoff_seconds": "10"},
                ValueError,
                "retry_backoff_seconds",
                id="str retry_backoff_seconds",
            ),
        ],
    )
    def test_a_bad_definition_raises_naming_the_queue_and_the_key(
        self,
        sqs: SQSClient,
        queue_url: str,
        definition: dict[str, t.Any],
        error: type[Exception],
        key: str,
    ) -> None:
        with pytest.raises(error, match="'default'") as info:
            QueueGroup.build(boto_client=sqs, queues={"default": definition})

        assert key in str(info.value)

    def test_a_definition_that_is_not_a_dict_raises_a_type_error_naming_the_queue(
        self, sqs: SQSClient
    ) -> None:
        with pytest.raises(TypeError, match="'default'"):
            QueueGroup.build(
                boto_client=sqs, queues={"default": t.cast(t.Any, "app-jobs")}
            )

    @pytest.mark.parametrize("queues", [{}, ["jobs"]])
    def test_queues_must_be_a_non_empty_dict(
        self, sqs: SQSClient, queues: t.Any
    ) -> None:
        with pytest.raises((TypeError, ValueError), match="queues"):
            QueueGroup.build(boto_client=sqs, queues=queues)

    def test_per_queue_settings_reach_the_queue(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        group = QueueGroup.build(
            boto_client=sqs,
            queues={
                "default": {
                    "url": queue_url,
                    "visibility_timeout": 7,
                    "max_runtime_seconds": 120,
                    "retry_backoff_seconds": 5,
                }
            },
        )

        queue = group.queue("default")
        assert queue.visibility_timeout == 7
        assert queue.max_runtime_seconds == 120
        assert queue.retry_backoff_seconds == 5

    def test_a_visibility_timeout_of_zero_from_the_definition_is_honoured(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        """The queue's own timeout is 30 s; the definition's 0 wins."""
        group = QueueGroup.build(
            boto_client=sqs,
            queues={"default": {"name": "jobs", "visibility_timeout": 0}},
        )
        group.enqueue("default", "fail", {})

        def fail(payload: Payload) -> None:
            raise RuntimeError("try again")

        JobWorker(group, {"fail": fail}, stop_after(1), idle_wait_seconds=0).run()

        assert len(visible_messages(sqs, queue_url)) == 1


QUEUE = object()  # stands for a valid SqsQueue in the definitions below


class TestConstructor:
    def test_a_group_can_be_made_of_sqs_queue_objects(
        self, sqs: SQSClient, queue_url: str
    ) -> None:
        handled: list[Payload] = []
        group = QueueGroup(
            {"heavy": {"queue": SqsQueue(queue_url, boto_client=sqs), "weight": 3}}
        )

        group.enqueue("heavy", "ping", {"n": 1})
        JobWorker(group, {"ping": handled.append}, stop_after(1), 0).run()

        assert handled == [{"n": 1}]
        assert message_count(sqs, queue_url) == 0

    @pytest.mark.parametrize(
        ("definition", "error", "key"),
        [
            pytest.param({"weight": 1}, ValueError, "'queue'", id="no queue"),
            pytest.param({"queue": "jobs"}, TypeError, "'queue'", id="not SqsQueue"),
            pytest.param(
                {"queue": QUEUE, "weight": 0}, ValueError, "'weight'", id="zero weight"
            ),
            pytest.param(
                {"queue": QUEUE, "wait": 1}, ValueError, "'wait'", id="unknown key"
            ),
        ],
    )
    def test_a_bad_definition_raises_naming_the_queue_and_the_key(
        self,
        sqs: SQSClient,
        queue_url: str,
        definition: dict[str, t.Any],
        error: type[Exception],
        key: str,
    ) -> None:
        queue = SqsQueue(queue_url, boto_client=sqs)
        full = {k: queue if v is QUEUE else v for k, v in definition.items()}

        with pytest.raises(error, match="'heavy'") as info:
            QueueGroup({"heavy": full})

        assert key in str(info.value)


NOT_FINITE = [float("nan"), float("inf"), -float("inf"), 10**400]


@pytest.mark.parametrize("option", ["max_runtime_seconds", "retry_backoff_seconds"])
@pytest.mark.parametrize("value", NOT_FINITE, ids=["nan", "inf", "-inf", "10**400"])
def test_sqs_queue_refuses_a_number_that_is_not_finite(
    sqs: SQSClient, queue_url: str, option: str, value: float
) -> None:
    """NaN passes every range check (a NaN runtime limit never fires); inf and
    ints beyond a float overflow the worker's arithmetic."""
    options: dict[str, t.Any] = {option: value}
    with pytest.raises(ValueError, match=f"^{option} must be a positive, finite"):
        SqsQueue(queue_url, boto_client=sqs, **options)


@pytest.mark.parametrize("value", NOT_FINITE, ids=["nan", "inf", "-inf", "10**400"])
def test_a_handler_refuses_a_max_runtime_that_is_not_finite(value: float) -> None:
    with pytest.raises(ValueError, match=r"^max_runtime_seconds must be a positive, f"):
        JobHandler(print, max_runtime_seconds=value)


def first_counts(group: QueueGroup, draws: int) -> collections.Counter[str]:
    return collections.Counter(group.polling_order()[0] for _ in range(draws))


@pytest.mark.usefixtures("seeded_random")
class TestPollingOrder:
    def test_every_order_lists_every_queue_once(self, sqs: SQSClient) -> None:
        group = QueueGroup.build(
            boto_client=sqs,
            queues={
                name: {"url": f"https://sqs.example/{name}", "weight": weight}
                for name, weight in [("a", 5), ("b", 1), ("c", 2)]
            },
        )

        for _ in range(200):
            assert sorted(group.polling_order()) == ["a", "b", "c"]

    def test_a_queue_comes_first_in_proportion_to_its_weight(
        self, sqs: SQSClient
    ) -> None:
        """Weight 5 against the default weight 1: first about 5 times in 6."""
        group = QueueGroup.build(
            boto_client=sqs,
            queues={
                "critical": {"url": "https://sqs.example/critical", "weight": 5},
                "default": {"url": "https://sqs.example/default"},
            },
        )

        counts = first_counts(group, 6000)

        assert abs(counts["critical"] - 5000) < 150

    def test_no_queue_is_starved(self, sqs: SQSClient) -> None:
        group = QueueGroup.build(
            boto_client=sqs,
            queues={
                "critical": {"url": "https://sqs.example/critical", "weight": 20},
                "default": {"url": "https://sqs.example/default", "weight": 1},
                "bulk": {"url": "https://sqs.example/bulk", "weight": 1},
            },
        )

        counts = first_counts(group, 2200)

        assert set(counts) == {"critical", "default", "bulk"}
        assert min(counts["default"], counts["bulk"]) > 50

    def test_equal_weights_come_first_equally_often(self, sqs: SQSClient) -> None:
        group = QueueGroup.build(
            boto_client=sqs,
            queues={n: {"url": f"https://sqs.example/{n}"} for n in "abc"},
        )

        counts = first_counts(group, 3000)

        assert all(abs(counts[n] - 1000) < 120 for n in "abc")


def test_a_worker_serves_every_queue_of_the_group(
    sqs: SQSClient, queue_url: str
) -> None:
    other = create_queue(sqs, "other")
    handled: list[Payload] = []
    group = QueueGroup.build(
        boto_client=sqs,
        queues={"jobs": {"url": queue_url, "weight": 9}, "other": {"url": other}},
    )
    group.enqueue("jobs", "ping", {"q": "jobs"})
    group.enqueue("other", "ping", {"q": "other"})

    JobWorker(group, {"ping": handled.append}, stop_after(2), 0).run()

    assert sorted(p["q"] for p in handled) == ["jobs", "other"]
