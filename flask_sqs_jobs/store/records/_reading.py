"""Reading job records for ``jobs.get_job``, ``jobs.find_jobs`` and the CLI;
``jobs.cancel``."""

from __future__ import annotations

from ...engine.model import Hooks
from ...engine.model import is_job_id
from ..model import FINAL
from ..model import JobRecord
from ..model import JobSearch
from ..model import JobStore
from ._recording import recorder_of

#: How long ``get_job`` waits for this process's own queued writes.
FLUSH_TIMEOUT = 1.0


def get_job(store: JobStore, hooks: Hooks, job_id: str) -> JobRecord | None:
    """``job_id``'s record, after this process's pending writes (briefly awaited).

    Waits up to :data:`FLUSH_TIMEOUT` for the writer, then reads one record
    (one ``SELECT`` or ``GetItem``). A text that is no job id returns None
    without a read.

    :raises TypeError: ``job_id`` is not a str.
    """
    if not isinstance(job_id, str):
        raise TypeError(f"job_id must be a str; got {type(job_id).__name__}")
    if not is_job_id(job_id):
        return None
    recorder = recorder_of(hooks)
    if recorder is not None:
        recorder.writer.flush(FLUSH_TIMEOUT)
    return store.job_records().get(job_id)


def find_jobs(store: JobStore, hooks: Hooks, search: JobSearch) -> list[JobRecord]:
    """The records ``search`` finds, after this process's pending writes."""
    recorder = recorder_of(hooks)
    if recorder is not None:
        recorder.writer.flush(FLUSH_TIMEOUT)
    return store.job_records().find(search)


def cancel(store: JobStore, hooks: Hooks, job_id: str) -> bool:
    """``jobs.cancel``: tombstone ``job_id`` if its record is there, unfinished.

    The record is read as :func:`get_job` reads it (after this process's own
    pending writes, so a job enqueued just before is known). A job that
    finishes between the read and the write keeps its record; its tombstone
    is never read.

    :raises TypeError: ``job_id`` is not a str.
    """
    record = get_job(store, hooks, job_id)
    if record is None or record.status in FINAL:
        return False
    store.cancellations().cancel(job_id)
    return True
