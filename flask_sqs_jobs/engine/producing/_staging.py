"""Staging: a job at the end of its produce chain, encoded as SendMessage arguments.

The body and the attributes are built here and nowhere else, checked
against the queue's MaximumMessageSize (or its S3 offloading), so every sink
receives a message SQS will take as it is.
"""

from __future__ import annotations

import dataclasses
import json
import typing as t

import structlog

from ..model import check_job_id
from ..model import Job
from ..sqs import build_attributes
from ..sqs import check_room
from ..sqs import check_tags
from ..sqs import decode_attributes
from ..sqs import encode_body
from ..sqs import message_size
from ..sqs import received_tags
from ..sqs import SqsQueue
from ..unique import STARTED
from ._checks import check_job_type
from ._checks import encode_payload
from ._prepare import named_error

if t.TYPE_CHECKING:
    from ._prepare import PreparedJob

job_log = structlog.get_logger("flask_sqs_jobs.job")


@dataclasses.dataclass(eq=False)
class StagedMessage:
    """One job, encoded: what a sink sends, runs or stores.

    Made by :func:`stage` at the end of a produce chain, or by
    :func:`stored_message` for a message staged earlier and kept (an outbox
    row). Sinks read it and never change it.
    """

    #: The job as the produce chain left it (for the ``job_enqueued`` report).
    job: Job
    #: SendMessage's arguments without ``QueueUrl``: ``MessageBody`` and, when
    #: set, ``MessageAttributes``, ``MessageGroupId``,
    #: ``MessageDeduplicationId``, ``DelaySeconds``.
    params: dict[str, t.Any]
    #: The queue it is for (the one its job names).
    queue: SqsQueue
    #: Its position in an ``enqueue_many`` call, or None.
    index: int | None = None


def stage(
    prepared: PreparedJob, job: Job, queue: SqsQueue, *, rechecked: bool
) -> StagedMessage:
    """Encode ``job`` (the produce chain's result for ``prepared``) for ``queue``.

    The job id is checked again (middleware may set one). With ``rechecked``
    (produce middleware ran and may have changed the job) so are the job type
    and the payload, and the payload is encoded anew; without, the payload's
    JSON from the checks is reused, so it is serialised once per enqueue.
    Propagation attributes past SQS's 10 are dropped with a
    ``propagation_attributes_dropped`` warning.

    :raises TypeError, ValueError: the job is wrong now, or too large for the
        queue; a batch's error names the job's index.
    """
    try:
        if rechecked:
            check_job_type(job.job_type)
            job.payload, payload_json = encode_payload(job.payload)
            job.tags = check_tags(job.tags)
        else:
            payload_json = prepared.payload_json
        job.job_id = check_job_id(job.job_id)
        params, dropped = _send_params(queue, prepared, job, payload_json)
    except (TypeError, ValueError) as exc:
        raise named_error(exc, prepared.index) from None
    if dropped:
        job_log.warning(
            "propagation_attributes_dropped",
            queue=job.queue,
            job_type=job.job_type,
            dropped=dropped,
        )
    return StagedMessage(job, params, queue, prepared.index)


def _send_params(
    queue: SqsQueue, prepared: PreparedJob, job: Job, payload_json: str
) -> tuple[dict[str, t.Any], list[str]]:
    """SendMessage's arguments for ``job``, and the propagation attributes dropped."""
    options = prepared.options
    body = encode_body(
        job.job_type,
        job.payload,
        options.run_at,
        job.job_id,
        payload_json=payload_json,
        max_runtime_seconds=options.max_runtime_seconds,
        expires_at=options.expires_at,
        tags=job.tags,
        unique=None
        if job.unique_key is None
        else (job.unique_key, job.unique_until or STARTED),
    )
    attributes, dropped = build_attributes(
        job.correlation_fields,
        job.trace_headers,
        options.message_attributes,
        job_type=job.job_type,
    )
    size = message_size(body, attributes)
    limit = queue.max_message_size
    offloaded = check_room(queue.large_payloads, queue, body, attributes)
    if size > limit and not offloaded:
        raise ValueError(
            f"job {job.job_type!r} for queue {job.queue!r} is {size:,} bytes (body and"
            f" attributes); the queue accepts at most {limit:,} (MaximumMessageSize)."
            " Store large data elsewhere (S3, a database) and pass its key in the"
            " payload."
        )
    params: dict[str, t.Any] = {"MessageBody": body}
    if attributes:
        params["MessageAttributes"] = attributes
    if options.message_group_id is not None:
        params["MessageGroupId"] = options.message_group_id
    if options.message_deduplication_id is not None:
        params["MessageDeduplicationId"] = options.message_deduplication_id
    if options.delay_seconds is not None:
        params["DelaySeconds"] = options.delay_seconds
    return params, dropped


def stored_message(
    queue: SqsQueue,
    queue_name: str,
    job_id: str,
    job_type: str,
    params: dict[str, t.Any],
) -> StagedMessage:
    """A message staged earlier and kept (an outbox row), ready to deliver.

    Its :class:`Job` is read back from the body and attributes, as the
    producer built it, for the ``job_enqueued`` report once it is sent; it
    passed every check when it was staged.
    """
    try:
        body = json.loads(params["MessageBody"])
    except ValueError:
        body = {}
    payload = body.get("payload") if isinstance(body, dict) else None
    fields, trace_headers = decode_attributes(params.get("MessageAttributes"))
    job = Job(
        job_type=job_type,
        payload=payload if isinstance(payload, dict) else {},
        queue=queue_name,
        correlation_fields=fields,
        trace_headers=trace_headers,
        job_id=job_id,
        tags=received_tags(body.get("tags") if isinstance(body, dict) else None),
    )
    return StagedMessage(job, params, queue)
