"""DynamoDBStore: the job store in one DynamoDB table, for apps with no database."""

from __future__ import annotations

import typing as t

import boto3
from botocore.exceptions import ClientError

from ...engine.sqs import aws_error_code
from ..model import JobStore
from ._record_listing import check_shards
from ._record_listing import DEFAULT_SHARDS
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

if t.TYPE_CHECKING:
    from ..model import JobRecords
    from ..model import WorkerRegistry
    from ._cancellations import DynamoDBCancellations
    from ._idempotency import DynamoDBIdempotencyKeys
    from ._limits import DynamoDBLimits
    from ._ticks import DynamoDBScheduleTicks
    from ._unique_keys import DynamoDBUniqueKeys


class DynamoDBStore(JobStore):
    """The job store in one DynamoDB table, written with conditional writes only.

    Holds idempotency keys, job records, worker heartbeats and schedule ticks;
    the transactional outbox needs the app's own database (use
    :class:`SQLAlchemyStore` for it).

    :param table_name: the table (``flask sqs-jobs store init`` creates it:
        keys ``pk`` and ``sk``, both strings, on-demand billing, TTL on
        ``expires_at_epoch``).
    :param boto_client: a boto3 DynamoDB client; by default one is made the way
        boto3 makes any client (``AWS_ENDPOINT_URL_DYNAMODB`` for a local server).
    :param record_shards: the partition keys per hour that job records' listing
        entries and finish counters are spread over (1 to 256, 16 by default).
        Each key takes about 1,000 write units a second: pick at least jobs/s
        x write units per job / 1,000 (``docs/scaling.md``). Changing it
        later is safe: reads query every shard of the count they are given,
        so lowering it hides the entries of the higher shards until they
        expire; raising it loses nothing.

    Shared by every thread of the process: boto3 clients are thread-safe and
    each part made here keeps only the client and the table name, so no call
    takes a lock. Every write is a single conditional request (or one
    ``TransactWriteItems``), so hundreds of processes writing the same item
    serialise in DynamoDB; on-demand billing absorbs their bursts, and a
    throttled request is retried by botocore before it raises. Errors are
    botocore's ``ClientError``; each part says which ones it answers itself.
    """

    kind = "dynamodb"

    def __init__(
        self,
        table_name: str,
        boto_client: t.Any = None,
        *,
        record_shards: int = DEFAULT_SHARDS,
    ) -> None:
        if not isinstance(table_name, str) or not 3 <= len(table_name) <= 255:
            raise ValueError(
                "table_name must be a DynamoDB table name (3-255 characters of"
                f" A-Za-z0-9_.-); got {table_name!r}"
            )
        self.table_name = table_name
        self.record_shards = check_shards(record_shards)
        self._client = boto_client

    @property
    def client(self) -> t.Any:
        """The boto3 DynamoDB client, made on first use.

        So building the store (from the app's config) makes no AWS call and
        needs no credentials; the one client then serves every thread.
        """
        if self._client is None:
            self._client = boto3.client("dynamodb")
        return self._client

    def create_tables(self) -> list[str]:
        """Create the table (and turn its TTL on) when it does not exist.

        Run by ``flask sqs-jobs store init``: ``CreateTable``, a wait until it
        is active, then ``UpdateTimeToLive``. An existing table is left as it
        is (its TTL too). Other errors (no permission, bad credentials) raise
        ``ClientError`` for the command to show.
        """
        try:
            self.client.create_table(
                TableName=self.table_name,
                AttributeDefinitions=[
                    {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
                    {"AttributeName": SORT_KEY, "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
                    {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except ClientError as exc:
            if aws_error_code(exc) != "ResourceInUseException":
                raise
            return [f"{self.table_name}: exists, unchanged"]
        self.client.get_waiter("table_exists").wait(TableName=self.table_name)
        self.client.update_time_to_live(
            TableName=self.table_name,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
        )
        return [f"{self.table_name}: created"]

    def idempotency_keys(self) -> DynamoDBIdempotencyKeys:
        """The idempotency keys, as items ``idem#<key>`` of the table.

        Each key is its own partition, so workers racing for different keys
        never contend; those racing for one key are decided by its condition.
        """
        from ._idempotency import DynamoDBIdempotencyKeys

        return DynamoDBIdempotencyKeys(self.client, self.table_name)

    def unique_keys(self) -> DynamoDBUniqueKeys:
        """The keys of unique jobs, as items ``unique#<key>`` of the table."""
        from ._unique_keys import DynamoDBUniqueKeys

        return DynamoDBUniqueKeys(self.client, self.table_name)

    def limits(self) -> DynamoDBLimits:
        """Token buckets and permits in the table, for ``limits=[...]``."""
        from ._limits import DynamoDBLimits

        return DynamoDBLimits(self.client, self.table_name)

    def job_records(self, *, retention_seconds: float = 604800) -> JobRecords:
        """The job records; each item expires ``retention_seconds`` after its write."""
        from ._records import DynamoDBJobRecords

        return DynamoDBJobRecords(
            self.client, self.table_name, retention_seconds, self.record_shards
        )

    def cancellations(self) -> DynamoDBCancellations:
        """Tombstones of cancelled jobs, as items ``job#<id>`` / ``cancelled``."""
        from ._cancellations import DynamoDBCancellations

        return DynamoDBCancellations(self.client, self.table_name)

    def worker_registry(self) -> WorkerRegistry:
        """The live workers, as items ``pk = "workers"`` of the table."""
        from ._workers import DynamoDBWorkerRegistry

        return DynamoDBWorkerRegistry(self.client, self.table_name)

    def schedule_ticks(self) -> DynamoDBScheduleTicks:
        """The schedule ticks (``pk = "schedule#<name>"``), for periodic jobs.

        Sending a tick's job is not transactional with its claim here (there
        is no outbox): a claim left pending is taken over (see the class).
        """
        from ._ticks import DynamoDBScheduleTicks

        return DynamoDBScheduleTicks(self.client, self.table_name)

    def describe(self) -> str:
        """The table's name, for logs and the CLI."""
        return f"dynamodb table {self.table_name}"
