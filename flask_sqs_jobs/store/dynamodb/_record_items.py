"""The items of job records in the DynamoDB table: attribute values, keys, reading."""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import typing as t

from ...engine.sqs import read_result
from .. import model as r
from ._schema import PARTITION_KEY
from ._schema import SORT_KEY

_TIME_FIELDS = ("enqueued_at", "started_at", "finished_at", "updated_at")


def s_value(value: str) -> dict[str, str]:
    return {"S": value}


def n_value(value: float) -> dict[str, str]:
    return {"N": repr(value) if isinstance(value, float) else str(value)}


def epoch_value(at: dt.datetime, seconds: float) -> dict[str, str]:
    return n_value(int(at.timestamp() + seconds))


def job_key(job_id: str) -> dict[str, t.Any]:
    return {PARTITION_KEY: s_value(f"job#{job_id}"), SORT_KEY: s_value("record")}


def text_of(item: cabc.Mapping[str, t.Any], name: str) -> str | None:
    value = item.get(name)
    return None if value is None else str(value["S"])


def time_of(item: cabc.Mapping[str, t.Any], name: str) -> dt.datetime | None:
    text = text_of(item, name)
    return None if text is None else dt.datetime.fromisoformat(text)


def job_record(item: cabc.Mapping[str, t.Any]) -> r.JobRecord:
    result = text_of(item, "result")
    progress = item.get("progress")
    times = {name: time_of(item, name) for name in _TIME_FIELDS}
    return r.JobRecord(
        job_id=item["job_id"]["S"],
        job_type=item["job_type"]["S"],
        queue=item["queue"]["S"],
        status=item["status"]["S"],
        attempts=int(item["attempts"]["N"]),
        result=read_result(result),
        error=text_of(item, "error"),
        progress=None if progress is None else float(progress["N"]),
        progress_message=text_of(item, "progress_message"),
        tags=tuple(each["S"] for each in item.get("tags", {}).get("L", [])),
        payload=read_result(text_of(item, "payload")),
        **times,
    )
