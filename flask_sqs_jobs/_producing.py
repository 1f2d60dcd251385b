"""Enqueueing on :class:`~flask_sqs_jobs.SQSJobs`: to SQS, or into the outbox."""

from __future__ import annotations

import asyncio
import collections.abc as cabc
import datetime
import typing as t

from flask import Flask

from ._job_type_check import check_known_job_type
from ._job_type_check import check_known_job_types
from ._request_id import current_request_id
from .config import AppParts
from .config import Config
from .engine import QueueGroup
from .engine.model import JobHandler
from .engine.model import JSONObject
from .engine.producing import JobSpec
from .engine.producing import read_job_specs

if t.TYPE_CHECKING:
    from ._jobs_facade import JobsFacade


class Producing:
    """``enqueue`` and ``enqueue_many`` of :class:`~flask_sqs_jobs.SQSJobs`."""

    handlers: dict[str, JobHandler]

    if t.TYPE_CHECKING:

        def queue_group(self, app: Flask | None = None) -> QueueGroup: ...

        def parts(self, app: Flask | None = None) -> AppParts: ...

    def enqueue(
        self,
        queue: str,
        job_type: str,
        payload: JSONObject | None = None,
        *,
        correlation_fields: JSONObject | None = None,
        message_group_id: str | None = None,
        message_deduplication_id: str | None = None,
        delay_seconds: int | None = None,
        message_attributes: dict[str, dict[str, t.Any]] | None = None,
        run_at: datetime.datetime | None = None,
        job_id: str | None = None,
        max_runtime_seconds: float | None = None,
        expires_in: float | None = None,
        expires_at: datetime.datetime | None = None,
        priority: int | None = None,
        session: t.Any = None,
        unique: bool = False,
        unique_key: str | None = None,
        unique_for: float | None = None,
        unique_until: str | None = None,
        on_duplicate: str | None = None,
        debounce: float | None = None,
        tenant: str | None = None,
        tags: cabc.Sequence[str] | None = None,
        buffered: bool | None = None,
        send_after_commit: bool | None = None,
    ) -> str:
        """Send a job to the logical ``queue``; return its SQS MessageId.

        Works wherever the app is current (views, CLI commands, the shell).
        Inside a request the correlation fields gain ``request_id``. The
        options are those of :meth:`QueueGroup.enqueue`; everything is checked
        before anything is sent.

        :param session: a SQLAlchemy session (Flask-SQLAlchemy's
            ``db.session``) on the job store's database: the job is written
            into the outbox in its transaction, sent after the commit, and
            the job id is returned instead (see ``docs/outbox.md``).
        :param unique: with ``unique_key``, ``unique_for``, ``unique_until``
            and ``on_duplicate``: send nothing while another job holds the
            key, and return that job's id (see ``docs/flow-control.md``).
        :param debounce: with ``unique_key``: send the job that many seconds
            after the last enqueue with the key, with the last payload
            (through the outbox; needs a SQL store).
        :param tags: at most 10 strings of at most 64 characters, kept in
            the job's record and searchable (``jobs.find_jobs(tag=...)``, the
            dashboard's jobs page).
        :param buffered: gather the send with others into SendMessageBatch
            within ``SQS_JOBS_SEND_BUFFER_MS`` (10 ms when that is 0), and
            return the job id; by default, whether that setting is above 0.
            Sent at the latest at the end of the request and at exit.
        :param send_after_commit: with ``session``: False leaves the send to
            the relays instead of this process (default:
            ``SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT``).
        :raises DuplicateJobError: ``on_duplicate="raise"`` and the key is held.
        """
        state = self.parts()
        _check_send_after_commit(send_after_commit, session, debounce)
        if _checks_job_types(state.config):
            check_known_job_type(job_type, self.handlers)
        options: dict[str, t.Any] = {
            "correlation_fields": correlation_fields,
            "message_group_id": message_group_id,
            "message_deduplication_id": message_deduplication_id,
            "delay_seconds": delay_seconds,
            "message_attributes": message_attributes,
            "run_at": run_at,
            "job_id": job_id,
            "max_runtime_seconds": max_runtime_seconds,
            "expires_in": expires_in,
            "expires_at": expires_at,
            "priority": priority,
            "unique": unique,
            "unique_key": unique_key,
            "unique_for": unique_for,
            "unique_until": unique_until,
            "on_duplicate": on_duplicate,
            "tenant": tenant,
            "tags": tags,
        }
        if send_after_commit is not None:
            options["send_after_commit"] = send_after_commit
        if debounce is not None:
            from ._outbox_enqueue import enqueue_debounced

            options["debounce"] = debounce
            return enqueue_debounced(
                t.cast("JobsFacade", self), session, queue, job_type, payload, options
            )
        if session is not None:
            from ._outbox_enqueue import enqueue_in_session

            return enqueue_in_session(
                t.cast("JobsFacade", self), session, queue, job_type, payload, options
            )
        options["correlation_fields"] = _with_request_id(
            correlation_fields, state.config.request_id_header
        )
        options["buffered"] = state.config.buffers(buffered)
        return self.queue_group().enqueue(queue, job_type, payload, **options)

    def enqueue_many(
        self,
        queue: str,
        jobs: cabc.Iterable[JobSpec],
        *,
        session: t.Any = None,
        send_after_commit: bool | None = None,
    ) -> list[str]:
        """Send many jobs with SendMessageBatch; see :meth:`QueueGroup.enqueue_many`.

        Inside a request each job's correlation fields gain ``request_id``.
        With ``session=`` the jobs are written into the outbox in that
        session's transaction and their job ids are returned (see
        :meth:`enqueue`, also for ``send_after_commit``).
        """
        _check_send_after_commit(send_after_commit, session, None)
        state = self.parts()
        header = state.config.request_id_header
        specs = read_job_specs(jobs)
        for spec in specs:
            fields = _with_request_id(spec.get("correlation_fields"), header)
            if fields is not None:
                spec["correlation_fields"] = fields
        if _checks_job_types(state.config):
            check_known_job_types(specs, self.handlers)
        if session is not None:
            from ._outbox_enqueue import enqueue_many_in_session

            return enqueue_many_in_session(
                t.cast("JobsFacade", self), session, queue, specs, send_after_commit
            )
        return self.queue_group().enqueue_many(queue, specs)

    async def aenqueue_many(
        self, queue: str, jobs: cabc.Iterable[JobSpec], *, session: t.Any = None
    ) -> list[str]:
        """:meth:`enqueue_many` from a coroutine, in a thread (app context kept)."""
        # to_thread runs the call in a copy of this context, Flask's included.
        return await asyncio.to_thread(
            self.enqueue_many, queue, list(jobs), session=session
        )


def _check_send_after_commit(
    send_after_commit: bool | None, session: object, debounce: float | None
) -> None:
    if send_after_commit is None:
        return
    if not isinstance(send_after_commit, bool):
        raise TypeError(
            "send_after_commit must be True or False (or None for"
            f" SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT); got {send_after_commit!r}"
        )
    if session is None and debounce is None:
        raise TypeError(
            "send_after_commit applies to the outbox only: pass session= too"
            " (without a session the job is sent now)"
        )


def _with_request_id(fields: JSONObject | None, header: str) -> JSONObject | None:
    request_id = current_request_id(header)
    if request_id is None:
        return fields
    if fields is None:
        return {"request_id": request_id}
    if isinstance(fields, dict) and "request_id" not in fields:
        return {"request_id": request_id, **fields}
    return fields


def _checks_job_types(config: Config) -> bool:
    # Eager mode refuses an unknown job type itself: it must run the job now.
    return config.check_job_types and not config.eager
