"""Idempotency keys in the DynamoDB store's table, with conditional writes only.

One item per key: ``pk = "idem#<key>"``, ``sk = "idem"``. A claim is a PutItem
that succeeds only when the key is free: no item, an in-progress item whose
lease has ended, or a completed item past its expiry. When the condition
fails, DynamoDB returns the item that stood in the way
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), which tells a completed key
from one in progress or one used with another payload, without another read.
Renew, complete and relinquish are conditional on the holder's token.

DynamoDB has no clock a condition can read, so times are the caller's
(``time.time()``): keep the workers' clocks in sync (NTP); a skew lengthens or
shortens leases by as much. Expired items are also removed by the table's TTL
(``expires_at_epoch``), which may lag by days; the conditions never rely on it.
"""

from __future__ import annotations

import collections.abc as cabc
import math
import secrets
import time
import typing as t

from botocore.exceptions import ClientError

from ...engine.model import Claim
from ...engine.model import ClaimState
from ...engine.model import loggable_text
from ...engine.model import MAX_RESULT_BYTES
from ...engine.sqs import aws_error_code
from ...engine.sqs import MAX_JSON_DEPTH
from ...engine.sqs import read_result
from ...engine.sqs import result_json
from ...engine.sqs import ResultNotKept
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY
from ._schema import TTL_ATTRIBUTE

#: The longest key accepted (that of the SQL store's column too).
MAX_KEY_LENGTH = 255
#: The sort key of an idempotency item.
ITEM_SORT_KEY = "idem"

_IN_PROGRESS = "in_progress"
_COMPLETED = "completed"
_CLAIM_CONDITION = (
    f"attribute_not_exists({PARTITION_KEY})"
    " OR (#status = :in_progress AND lease_expires_at <= :now)"
    " OR (#status = :completed AND expires_at <= :now)"
)
_HELD_BY_TOKEN = "#status = :in_progress AND #token = :token"
# A claim whose blocking item vanished before it could be read is tried again.
_CLAIM_ATTEMPTS = 5


class DynamoDBIdempotencyKeys:
    """:class:`~flask_sqs_jobs.engine.IdempotencyKeys` in a DynamoDB table.

    Made by :meth:`DynamoDBStore.idempotency_keys`. ``complete(...,
    session=)`` ignores the session: the completion is its own write after
    the handler returned, so a crash between the two leaves the key in
    progress until its lease ends, and the handler may then run once more.

    Called by the worker's job guard on the slot thread (:meth:`renew` from
    the heartbeat's pool), with no lock: each call is one conditional
    request, so any number of workers may race for a key and one wins.
    """

    def __init__(
        self,
        client: t.Any,
        table_name: str,
        *,
        clock: cabc.Callable[[], float] = time.time,
    ) -> None:
        """:param clock: seconds since the epoch, read once per request for the
        conditions' ``:now`` and the lease and expiry times written."""
        self._client = client
        self._table = table_name
        self._clock = clock

    def claim(
        self, key: str, *, payload_hash: str, job_id: str, lease_seconds: float
    ) -> Claim:
        """Claim ``key`` for ``lease_seconds``, unless it is completed or held.

        One conditional ``PutItem``; a refusal answers from the returned item
        (a ``GetItem`` only when none came back), and an item gone in between
        is tried again with a new token.

        :raises ValueError: ``key`` is empty or too long, or ``lease_seconds``
            is not a positive number.
        :raises RuntimeError: the item changed under 5 attempts in a row; the
            guard retries the job, as for a ``ClientError``.
        """
        item_key = _item_key(key)
        _check_seconds("lease_seconds", lease_seconds)
        for _ in range(_CLAIM_ATTEMPTS):
            now = self._clock()
            token = secrets.token_hex(16)
            until = now + lease_seconds
            item = {
                **item_key,
                "status": {"S": _IN_PROGRESS},
                "payload_hash": {"S": payload_hash},
                "job_id": {"S": job_id},
                "token": {"S": token},
                "lease_expires_at": _number(until),
                TTL_ATTRIBUTE: {"N": str(math.ceil(until))},
                "created_at": _number(now),
            }
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=item,
                    ConditionExpression=_CLAIM_CONDITION,
                    ExpressionAttributeNames={"#status": "status"},
                    ExpressionAttributeValues={
                        ":in_progress": {"S": _IN_PROGRESS},
                        ":completed": {"S": _COMPLETED},
                        ":now": _number(now),
                    },
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except ClientError as exc:
                if not _condition_failed(exc):
                    raise
                old: dict[str, t.Any] | None = t.cast(t.Any, exc.response).get("Item")
                standing = old or self._read(item_key)
                if standing is not None:
                    return _blocked(standing, payload_hash, now)
                continue
            return Claim(ClaimState.CLAIMED, token=token)
        raise RuntimeError(
            f"could not claim idempotency key '{loggable_text(key)}': the item"
            f" changed under {_CLAIM_ATTEMPTS} attempts in a row"
        )

    def renew(self, key: str, token: str, lease_seconds: float) -> bool:
        """Extend the lease; False when ``token`` no longer holds the key.

        One ``UpdateItem`` conditional on the token; the TTL moves with it.
        """
        _check_seconds("lease_seconds", lease_seconds)
        until = self._clock() + lease_seconds
        return self._update_held(
            key,
            token,
            "SET lease_expires_at = :until, #ttl = :ttl",
            {":until": _number(until), ":ttl": {"N": str(math.ceil(until))}},
        )

    def complete(
        self,
        key: str,
        token: str,
        *,
        result: t.Any,
        ttl_seconds: float,
        session: t.Any = None,
    ) -> None:
        """Mark the key completed for ``ttl_seconds``, keeping ``result``.

        ``session`` is ignored (see the class). One ``UpdateItem``
        conditional on ``token`` holding the key in progress.

        :raises RuntimeError: ``token`` no longer holds the key; it stays with
            its holder.
        :raises ValueError: ``result`` is not JSON, nested deeper than 512
            levels or over 64 KiB encoded.
        """
        _check_seconds("ttl_seconds", ttl_seconds)
        encoded = _encode_result(result)
        now = self._clock()
        expires = now + ttl_seconds
        completed = self._update_held(
            key,
            token,
            "SET #status = :completed, #result = :result, expires_at = :expires,"
            " #ttl = :ttl, completed_at = :now REMOVE lease_expires_at",
            {
                ":completed": {"S": _COMPLETED},
                ":result": {"S": encoded},
                ":expires": _number(expires),
                ":ttl": {"N": str(math.ceil(expires))},
                ":now": _number(now),
            },
            {"#result": "result"},
        )
        if not completed:
            raise RuntimeError(
                f"idempotency key '{loggable_text(key)}' is no longer held by this"
                " token (its lease ended and another job claimed it); not marked"
                " completed"
            )

    def relinquish(self, key: str, token: str) -> None:
        """Forget an in-progress key held by ``token``; another holder's stays.

        One ``DeleteItem`` conditional on the token, called by the guard when
        the handler failed so the job's retry can claim the key at once.
        """
        self._write_held(self._client.delete_item, key, token, {}, {})

    def _update_held(
        self,
        key: str,
        token: str,
        update: str,
        values: dict[str, t.Any],
        names: dict[str, str] | None = None,
    ) -> bool:
        return self._write_held(
            self._client.update_item,
            key,
            token,
            {"#ttl": TTL_ATTRIBUTE, **(names or {})},
            values,
            UpdateExpression=update,
        )

    def _write_held(
        self,
        write: cabc.Callable[..., t.Any],
        key: str,
        token: str,
        names: dict[str, str],
        values: dict[str, t.Any],
        **request: t.Any,
    ) -> bool:
        """``write`` the key's item if ``token`` holds it; False if not."""
        try:
            write(
                TableName=self._table,
                Key=_item_key(key),
                ConditionExpression=_HELD_BY_TOKEN,
                ExpressionAttributeNames={
                    "#status": "status",
                    "#token": "token",
                    **names,
                },
                ExpressionAttributeValues={
                    ":in_progress": {"S": _IN_PROGRESS},
                    ":token": {"S": token},
                    **values,
                },
                **request,
            )
        except ClientError as exc:
            if not _condition_failed(exc):
                raise
            return False
        return True

    def _read(self, item_key: dict[str, t.Any]) -> dict[str, t.Any] | None:
        response = self._client.get_item(
            TableName=self._table, Key=item_key, ConsistentRead=True
        )
        item: dict[str, t.Any] | None = response.get("Item")
        return item


def _blocked(item: dict[str, t.Any], payload_hash: str, now: float) -> Claim:
    """What a failed claim ran into: the standing item."""
    holder = item.get("job_id", {}).get("S")
    if item.get("payload_hash", {}).get("S") != payload_hash:
        return Claim(ClaimState.CONFLICT, holder_job_id=holder)
    if item.get("status", {}).get("S") == _COMPLETED:
        result = item.get("result", {}).get("S")
        return Claim(
            ClaimState.COMPLETED,
            holder_job_id=holder,
            result=read_result(result),
        )
    lease_end = float(item.get("lease_expires_at", {}).get("N", now))
    return Claim(
        ClaimState.IN_PROGRESS,
        holder_job_id=holder,
        retry_after_seconds=max(0.0, lease_end - now),
    )


def _item_key(key: str) -> dict[str, t.Any]:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_LENGTH:
        shown = type(key).__name__ if not isinstance(key, str) else f"{len(key)} chars"
        raise ValueError(
            f"an idempotency key must be a str of 1..{MAX_KEY_LENGTH} characters;"
            f" got {shown} (hash a longer key, e.g. with hashlib.sha256)"
        )
    return {PARTITION_KEY: {"S": f"idem#{key}"}, SORT_KEY: {"S": ITEM_SORT_KEY}}


def _encode_result(result: t.Any) -> str:
    try:
        return result_json(result)
    except ResultNotKept as exc:
        if exc.size is not None:
            raise ValueError(
                f"an idempotent handler's result is {exc.size:,} bytes of JSON, over"
                f" the {MAX_RESULT_BYTES:,} kept with its key; return less (an id to"
                " look the rest up by)"
            ) from None
        raise ValueError(
            "an idempotent handler's result must be JSON (dict, list, str, number,"
            f" bool or None) nested at most {MAX_JSON_DEPTH} levels deep; {exc}"
        ) from None


def _check_seconds(name: str, value: float) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive number of seconds; got {value!r}")


def _number(value: float) -> dict[str, str]:
    return {"N": f"{value:.6f}"}


def _condition_failed(exc: ClientError) -> bool:
    return aws_error_code(exc) == "ConditionalCheckFailedException"
