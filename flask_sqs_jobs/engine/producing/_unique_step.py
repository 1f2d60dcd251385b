"""The unique step of the produce pipeline: take each unique job's key first.

Before any produce chain of a call runs, :meth:`UniqueStep.take` takes the
key of every unique job in the store's :class:`~..unique.UniqueKeys` (in the
caller's transaction when the sink writes through one: the outbox). A job
whose key another job holds is not produced: its place in the answer gets
the holder's job id (``on_duplicate="skip"``), or the call raises
:class:`~..unique.DuplicateJobError` (``"raise"``) after freeing the keys it
took. Keys of jobs that then fail to be produced are freed again, so a key is
held only by a job that was sent or written.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import structlog

from ..model import EnqueueBatchError
from ..unique import DuplicateJobError
from ..unique import HolderJobId
from ..unique import RAISE
from ..unique import unique_keys_of

if t.TYPE_CHECKING:
    from ..sqs import NamedQueues
    from ..unique import UniqueKeys
    from ._prepare import PreparedJob
    from ._sinks import BatchSink
    from ._sinks import Sink

job_log = structlog.get_logger("flask_sqs_jobs.job")

_DEBOUNCE_NEEDS_OUTBOX = (
    "debounce= needs a store's outbox, which keeps the job until it is due:"
    " enqueue it with SQSJobs.enqueue(...) and a SQL job store"
    " (SQS_JOBS_STORE_URL), or with add_to_outbox(session, group, ...)"
)


class UniqueStep:
    """One produce call's unique keys: taken before its chains, freed if they fail.

    Made by :meth:`take` in the caller's thread, used by that call only.
    """

    def __init__(self, keys: UniqueKeys | None, session: t.Any, total: int) -> None:
        self._keys = keys
        self._session = session
        self._total = total
        #: The jobs to produce, with their positions in the call.
        self.kept: list[tuple[int, PreparedJob]] = []
        #: Position -> the holder's job id, for each duplicate skipped.
        self.holders: dict[int, HolderJobId] = {}

    @classmethod
    def take(
        cls,
        group: NamedQueues,
        jobs: cabc.Sequence[PreparedJob],
        sink: Sink | BatchSink,
    ) -> UniqueStep | None:
        """Take the keys of ``jobs``' unique jobs; None when none is unique.

        :raises DuplicateJobError: a job with ``on_duplicate="raise"`` found
            its key held; the keys this call took are free again.
        :raises RuntimeError: no store holds the keys (names
            ``SQS_JOBS_STORE_URL``).
        :raises ValueError: a debounced job for a sink that cannot keep it.
        """
        if all(prepared.unique is None for prepared in jobs):
            return None
        keys = None
        if any(p.unique is not None and p.unique.debounce is None for p in jobs):
            keys = unique_keys_of(group)
        step = cls(keys, sink.key_session, len(jobs))
        try:
            for position, prepared in enumerate(jobs):
                step._take_one(position, prepared, sink)
        except BaseException:
            step.release()
            raise
        return step

    def _take_one(
        self, position: int, prepared: PreparedJob, sink: Sink | BatchSink
    ) -> None:
        unique, job = prepared.unique, prepared.job
        if unique is None or unique.debounce is not None:
            if unique is not None and not sink.debounces:
                raise ValueError(_DEBOUNCE_NEEDS_OUTBOX)
            self.kept.append((position, prepared))
            return
        key, job_id = t.cast(str, job.unique_key), t.cast(str, job.job_id)
        holder = t.cast("UniqueKeys", self._keys).take(
            key, job_id, hold_seconds=unique.for_seconds, session=self._session
        )
        if holder is None:
            self.kept.append((position, prepared))
            return
        if unique.on_duplicate == RAISE:
            raise DuplicateJobError(key, holder)
        job_log.info(
            "job_duplicate_skipped",
            queue=job.queue,
            job_type=job.job_type,
            job_id=job_id,
            holder_job_id=holder,
        )
        self.holders[position] = HolderJobId(holder)

    def around(
        self, produce: cabc.Callable[[list[PreparedJob]], list[str]]
    ) -> list[str]:
        """Produce the jobs kept; every job's id (or its holder's) in call order.

        :raises EnqueueBatchError: as ``produce`` does, its indices those of
            the call (the duplicates count as enqueued, with their holders).
        """
        try:
            ids = produce([prepared for _, prepared in self.kept])
        except EnqueueBatchError as exc:
            failed = {index for index, _, _ in exc.failed}
            self.release(only={self.kept[i][0] for i in failed})
            raise self._in_call_order(exc) from exc
        except BaseException:
            self.release()
            raise
        merged: dict[int, str] = dict(self.holders)
        merged.update(
            (position, job_id)
            for (position, _), job_id in zip(self.kept, ids, strict=True)
        )
        return [merged[position] for position in range(self._total)]

    def _in_call_order(self, exc: EnqueueBatchError) -> EnqueueBatchError:
        enqueued = [(self.kept[i][0], message_id) for i, message_id in exc.enqueued]
        enqueued += list(self.holders.items())
        failed = [(self.kept[i][0], code, text) for i, code, text in exc.failed]
        return EnqueueBatchError(sorted(enqueued), failed, self._total)

    def release(self, only: cabc.Container[int] | None = None) -> None:
        """Free the keys this call took (those at positions ``only``, if given).

        In the caller's transaction when the keys were taken in it; a
        failure to free one is left to its ``unique_for`` to end.
        """
        if self._keys is None:
            return
        for position, prepared in self.kept:
            job = prepared.job
            if job.unique_key is None or (only is not None and position not in only):
                continue
            try:
                self._keys.release(
                    job.unique_key, t.cast(str, job.job_id), session=self._session
                )
            except Exception:
                job_log.exception(
                    "unique_key_not_released", job_type=job.job_type, job_id=job.job_id
                )
