"""A send through S3 whose answer is lost: each copy on the queue has its object.

botocore would resend the same pointer, and the first copy processed would
delete the object the other one needs (dead-lettered as PayloadNotFound).
"""

from __future__ import annotations

import collections.abc as cabc
import json
import pathlib
import typing as t
import uuid

import pytest
from botocore.exceptions import ClientError
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs.engine import LargePayloads

from tests.integration.servers import moto_server
from tests.support import local_sqs_client

from .harness import Harness
from .harness import make_s3_client
from .proxy import Fault
from .proxy import FaultProxy
from .proxy import Rule

BIG = {"blob": "x" * 5_000}


@pytest.fixture
def s3(tmp_path: pathlib.Path) -> cabc.Iterator[t.Any]:
    with moto_server(tmp_path / "s3.log") as endpoint:
        client = make_s3_client(endpoint)
        client.create_bucket(Bucket="copies")
        yield client


def group_through(
    proxy: FaultProxy, harness: Harness, s3: t.Any
) -> tuple[QueueGroup, str]:
    url = harness.queue(f"copies-{uuid.uuid4().hex[:4]}", visibility_timeout=30).url
    # The default retries of a producer: botocore resends what it sees fail.
    sqs = local_sqs_client(proxy.endpoint, attempts=3, read_timeout=10)
    large = LargePayloads(s3, bucket="copies", threshold_bytes=1000)
    group = QueueGroup.build(
        boto_client=sqs, queues={"jobs": {"url": url}}, large_payloads=large
    )
    return group, url


def pointed_keys(harness: Harness, url: str) -> list[str]:
    bodies = [json.loads(m["Body"]) for m in harness.drain(url)]
    return [body[1]["s3Key"] for body in bodies if isinstance(body, list)]


def exists(s3: t.Any, key: str) -> bool:
    try:
        s3.head_object(Bucket="copies", Key=key)
    except ClientError:
        return False
    return True


@pytest.mark.parametrize("operation", ["SendMessage", "SendMessageBatch"])
def test_a_lost_answer_gives_each_copy_an_object_of_its_own(
    proxy: FaultProxy, harness: Harness, s3: t.Any, operation: str
) -> None:
    group, url = group_through(proxy, harness, s3)
    rule = Rule(Fault.DROP_RESPONSE, frozenset({operation}), limit=1)
    with proxy.rules(rule):
        if operation == "SendMessage":
            group.enqueue("jobs", "big", BIG)
        else:
            group.enqueue_many("jobs", [("big", BIG), ("small", {})])
    assert proxy.injected()[Fault.DROP_RESPONSE.value] == 1
    keys = pointed_keys(harness, url)
    assert len(keys) == 2, "the lost answer's copy and the resent one"
    assert len(set(keys)) == 2
    assert all(exists(s3, key) for key in keys)
