"""Preparing a job: the one place a ``Job`` is checked and built.

Every way of producing a job starts here: :meth:`QueueGroup.enqueue`
(arguments), :meth:`QueueGroup.enqueue_many` (job specs), the outbox's
``add_to_outbox`` and ``add_many_to_outbox``, and eager mode. What comes out
is a :class:`PreparedJob`, which the produce pipeline (:mod:`._pipeline`)
takes through the middleware to a sink.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

from ..model import check_job_id
from ..model import Job
from ..sqs import check_tags
from ..sqs import SqsQueue
from ..unique import read_unique
from ..unique import UniqueOptions
from ._checks import check_correlation_fields
from ._checks import check_job_type
from ._checks import check_options
from ._checks import encode_payload
from ._checks import SendOptions

#: One job of ``enqueue_many``, as the caller writes it: a ``(job_type,
#: payload)`` pair, or a mapping with ``job_type``, ``payload`` and any
#: enqueue option (``job_id`` included). :func:`read_job_spec` reads it.
JobSpec: t.TypeAlias = tuple[str, dict[str, t.Any] | None] | cabc.Mapping[str, t.Any]

_NOT_A_SPEC = (
    "a job must be a (job_type, payload) pair or a dict with 'job_type',"
    " 'payload' and enqueue options; got {kind}"
)


@dataclasses.dataclass(eq=False)
class PreparedJob:
    """A job whose every argument passed its checks, before its produce chain.

    Built by :func:`prepare_job` only. The pipeline hands :attr:`job` to the
    ``produce`` middleware, which may change it; :attr:`payload_json` is the
    payload as the checks encoded it, reused for the body when no
    middleware could have changed the payload.
    """

    #: The job as middleware, hooks and handlers see it.
    job: Job
    #: Its checked enqueue options.
    options: SendOptions
    #: The queue the caller named, and that name.
    queue: SqsQueue
    queue_name: str
    #: ``dump_json(job.payload)`` at the time of the checks.
    payload_json: str
    #: Its position in an ``enqueue_many`` call (errors name it), or None.
    index: int | None = None
    #: Its ``unique`` / ``unique_key`` / ``debounce`` options, or None.
    unique: UniqueOptions | None = None


def named_error(
    error: TypeError | ValueError, index: int | None
) -> TypeError | ValueError:
    """``error`` prefixed with ``jobs[index]:`` (unchanged when index is None)."""
    if index is None:
        return error
    return type(error)(f"jobs[{index}]: {error}")


def read_job_spec(spec: object) -> dict[str, t.Any]:
    """Return a job spec as a new dict with ``job_type``, maybe ``payload`` and options.

    The only reader of :data:`JobSpec`: the engine's batch enqueue, the
    outbox and the Flask layer's ``enqueue_many`` all come through here, so
    a pair and a dict mean the same everywhere.

    :raises TypeError: neither a pair nor a mapping with ``job_type``.
    """
    if isinstance(spec, tuple):
        if len(spec) != 2:
            raise TypeError("a job must be a (job_type, payload) pair or a dict")
        return {"job_type": spec[0], "payload": spec[1]}
    if isinstance(spec, cabc.Mapping):
        if "job_type" not in spec:
            raise TypeError("a job dict needs a 'job_type' key")
        return dict(spec)
    raise TypeError(_NOT_A_SPEC.format(kind=type(spec).__name__))


def read_job_specs(specs: cabc.Iterable[object]) -> list[dict[str, t.Any]]:
    """:func:`read_job_spec` for each job of a batch; errors name the job's index."""
    read = []
    for index, spec in enumerate(specs):
        try:
            read.append(read_job_spec(spec))
        except TypeError as exc:
            raise named_error(exc, index) from None
    return read


def prepare_job(
    queue: SqsQueue,
    queue_name: str,
    job_type: object,
    payload: object,
    options: cabc.Mapping[str, t.Any],
    *,
    index: int | None = None,
    job_id_deduplicates: bool = False,
) -> PreparedJob:
    """Check a job's arguments for ``queue`` and build its :class:`Job`.

    ``options`` are :meth:`QueueGroup.enqueue`'s keyword arguments
    (``correlation_fields`` and ``job_id`` included; None means the default).
    The checks run in a fixed order: job type, payload, correlation fields,
    job id, then the options against the queue (FIFO rules, delays).

    :param index: the job's position in a batch; errors then start with
        ``jobs[index]:``.
    :param job_id_deduplicates: on a FIFO queue, the job id is the
        MessageDeduplicationId unless one is given (the outbox: a row sent
        twice is deduplicated).
    :raises TypeError, ValueError: an argument is wrong; nothing was built.
    """
    try:
        rest = dict(options)
        checked_type = check_job_type(job_type)
        checked_payload, payload_json = encode_payload(payload)
        fields = check_correlation_fields(rest.pop("correlation_fields", None))
        job_id = check_job_id(rest.pop("job_id", None))
        tags = check_tags(rest.pop("tags", None))
        unique = read_unique(rest)
        if (
            job_id_deduplicates
            and queue.is_fifo
            and rest.get("message_deduplication_id") is None
        ):
            rest["message_deduplication_id"] = job_id
        send_options = check_options(queue, queue_name, rest)
    except (TypeError, ValueError) as exc:
        raise named_error(exc, index) from None
    job = Job(
        job_type=checked_type,
        payload=checked_payload,
        queue=queue_name,
        correlation_fields=fields,
        job_id=job_id,
        max_runtime_seconds=send_options.max_runtime_seconds,
        tags=tags,
    )
    if unique is not None and unique.debounce is None:
        job.unique_key = unique.key_for(checked_type, checked_payload)
        job.unique_until = unique.until
    return PreparedJob(
        job, send_options, queue, queue_name, payload_json, index, unique
    )


#: Where a batch's job goes: its queue's name and queue, and its fields
#: without what chose them (``priority``).
TargetOf = cabc.Callable[[dict[str, t.Any]], tuple[str, SqsQueue, dict[str, t.Any]]]


def prepare_jobs(
    target: TargetOf,
    specs: cabc.Iterable[object],
    *,
    job_id_deduplicates: bool = False,
) -> list[PreparedJob]:
    """:func:`prepare_job` for each :data:`JobSpec` of a batch, in order, each
    on the queue ``target`` picks for it.

    Every job is checked before this returns, so a batch with one wrong job
    sends, writes and runs nothing.
    """
    prepared = []
    for index, spec in enumerate(specs):
        try:
            queue_name, queue, fields = target(read_job_spec(spec))
        except (TypeError, ValueError) as exc:
            raise named_error(exc, index) from None
        job_type = fields.pop("job_type")
        payload = fields.pop("payload", None)
        prepared.append(
            prepare_job(
                queue,
                queue_name,
                job_type,
                payload,
                fields,
                index=index,
                job_id_deduplicates=job_id_deduplicates,
            )
        )
    return prepared
