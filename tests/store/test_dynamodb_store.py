"""DynamoDBStore on moto's server: the table, and what only DynamoDB does."""

from __future__ import annotations

import typing as t

import pytest
from botocore.exceptions import ClientError
from flask import Flask
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs.engine.model._idempotency_keys import ClaimState
from flask_sqs_jobs.engine.model._idempotency_keys import MAX_RESULT_BYTES
from flask_sqs_jobs.store import DynamoDBStore
from flask_sqs_jobs.store.dynamodb._idempotency import DynamoDBIdempotencyKeys

if t.TYPE_CHECKING:
    from flask_sqs_jobs.engine.model._idempotency_keys import IdempotencyKeys

pytestmark = pytest.mark.integration

HASH = "a" * 64


@pytest.fixture
def store(table_name: str, dynamodb_client: t.Any) -> DynamoDBStore:
    store = DynamoDBStore(table_name, boto_client=dynamodb_client)
    store.create_tables()
    return store


def test_store_init_creates_the_table_once(
    table_name: str, dynamodb_client: t.Any
) -> None:
    app = Flask(__name__)
    app.config.update(SQS_JOBS_QUEUES={"default": {"name": "q"}})
    SQSJobs(app, store=DynamoDBStore(table_name, boto_client=dynamodb_client))

    first = app.test_cli_runner().invoke(args=["sqs-jobs", "store", "init"])
    again = app.test_cli_runner().invoke(args=["sqs-jobs", "store", "init"])

    assert first.exit_code == 0, first.output
    assert first.output.splitlines() == [
        f"store: dynamodb table {table_name}",
        f"{table_name}: created",
    ]
    assert again.exit_code == 0, again.output
    assert f"{table_name}: exists, unchanged" in again.output
    table = dynamodb_client.describe_table(TableName=table_name)["Table"]
    assert {(k["AttributeName"], k["KeyType"]) for k in table["KeySchema"]} == {
        ("pk", "HASH"),
        ("sk", "RANGE"),
    }
    ttl = dynamodb_client.describe_time_to_live(TableName=table_name)
    assert ttl["TimeToLiveDescription"] == {
        "TimeToLiveStatus": "ENABLED",
        "AttributeName": "expires_at_epoch",
    }


def test_a_key_is_one_item_that_the_ttl_removes_after_expiry(
    store: DynamoDBStore, dynamodb_client: t.Any
) -> None:
    keys = store.idempotency_keys()
    token = keys.claim("order-7", payload_hash=HASH, job_id="j-1", lease_seconds=60)
    assert token.token is not None
    keys.complete("order-7", token.token, result={"ok": True}, ttl_seconds=86400)

    [item] = dynamodb_client.scan(TableName=store.table_name)["Items"]
    assert item["pk"] == {"S": "idem#order-7"}
    assert item["sk"] == {"S": "idem"}
    assert item["status"] == {"S": "completed"}
    assert float(item["expires_at_epoch"]["N"]) >= float(item["expires_at"]["N"])
    assert "lease_expires_at" not in item


class _WithoutOldItem:
    """A client whose failed conditional writes return no item (older servers)."""

    def __init__(self, client: t.Any) -> None:
        self._client = client
        self.reads = 0

    def put_item(self, **request: t.Any) -> t.Any:
        try:
            return self._client.put_item(**request)
        except ClientError as exc:
            t.cast(dict[str, t.Any], exc.response).pop("Item", None)
            raise

    def get_item(self, **request: t.Any) -> t.Any:
        self.reads += 1
        assert request["ConsistentRead"] is True
        return self._client.get_item(**request)


def test_without_the_old_item_a_consistent_read_tells_the_state(
    store: DynamoDBStore, dynamodb_client: t.Any
) -> None:
    client = _WithoutOldItem(dynamodb_client)
    keys = DynamoDBIdempotencyKeys(client, store.table_name)
    first = keys.claim("k", payload_hash=HASH, job_id="j-1", lease_seconds=60)
    assert first.state is ClaimState.CLAIMED
    assert client.reads == 0
    second = keys.claim("k", payload_hash=HASH, job_id="j-2", lease_seconds=60)
    assert second.state is ClaimState.IN_PROGRESS
    assert second.holder_job_id == "j-1"
    assert client.reads == 1


def test_complete_ignores_a_session(store: DynamoDBStore) -> None:
    keys = store.idempotency_keys()
    claim = keys.claim("k", payload_hash=HASH, job_id="j-1", lease_seconds=60)
    assert claim.token is not None
    keys.complete("k", claim.token, result=1, ttl_seconds=60, session=object())
    assert keys.claim("k", payload_hash=HASH, job_id="j", lease_seconds=1).result == 1


def test_a_lost_key_is_named_escaped_when_completing_it_fails(
    store: DynamoDBStore,
) -> None:
    keys: IdempotencyKeys = store.idempotency_keys()
    keys.claim("k\x1b[2J", payload_hash=HASH, job_id="j-1", lease_seconds=60)
    with pytest.raises(RuntimeError) as info:
        keys.complete("k\x1b[2J", "stale-token", result=None, ttl_seconds=60)
    assert "'k\\x1b[2J' is no longer held" in str(info.value)
    assert "\x1b" not in str(info.value)


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ("x" * MAX_RESULT_BYTES, "over the 65,536 kept"),
        ({1, 2}, "must be JSON"),
    ],
)
def test_a_result_that_cannot_be_kept_is_refused(
    store: DynamoDBStore, result: t.Any, message: str
) -> None:
    keys = store.idempotency_keys()
    claim = keys.claim("k", payload_hash=HASH, job_id="j-1", lease_seconds=60)
    assert claim.token is not None
    with pytest.raises(ValueError, match=message):
        keys.complete("k", claim.token, result=result, ttl_seconds=60)
    again = keys.claim("k", payload_hash=HASH, job_id="j-2", lease_seconds=60)
    assert again.state is ClaimState.IN_PROGRESS


@pytest.mark.parametrize(
    ("key", "lease", "message"),
    [
        ("", 60, "1..255 characters"),
        ("k" * 256, 60, "hash a longer key"),
        ("k", 0, "lease_seconds must be a positive number"),
        ("k", float("nan"), "lease_seconds must be a positive number"),
    ],
)
def test_bad_arguments_are_refused_before_any_write(
    store: DynamoDBStore,
    dynamodb_client: t.Any,
    key: str,
    lease: float,
    message: str,
) -> None:
    keys = store.idempotency_keys()
    with pytest.raises(ValueError, match=message):
        keys.claim(key, payload_hash=HASH, job_id="j", lease_seconds=lease)
    assert dynamodb_client.scan(TableName=store.table_name)["Items"] == []
