"""Enqueue jobs when the database transaction commits (the ``sqlalchemy`` extra).

A job enqueued inside a transaction can start before the transaction commits,
and then not find the rows it was sent for; if the transaction rolls back,
the job runs for rows that never existed. :func:`enqueue_after_commit` holds
the job until the session commits and drops it on rollback::

    from flask_sqs_jobs.contrib.sqlalchemy import enqueue_after_commit

    @app.post("/signup")
    def signup():
        user = User(email=request.form["email"])
        db.session.add(user)
        db.session.flush()
        job_id = enqueue_after_commit(db.session, "default", "send_welcome_email",
                                      {"user_id": user.id})
        db.session.commit()     # the job is sent here
        return {"job_id": job_id}, 201

Every way a transaction ends is covered: a commit sends what the transaction
held; a rollback (``session.rollback()``, even when no SQL ran; a
``with session.begin():`` block that raised), ``session.close()`` and a
rolled-back savepoint (``begin_nested()``) drop it. A savepoint that rolls back
drops only the jobs held inside it; one that is released hands its jobs to the
enclosing transaction, and they leave with its commit.

After the commit each job is sent on its own: a send that fails is logged
(``job_send_failed``, with ``queue``, ``job_type`` and ``job_id``) and the
other jobs are still sent. Nothing is raised into the session, since the
commit already happened, and the session stays usable.

When to use it, and when the outbox: the send happens after the commit, in the
same process, so a crash (or a failed send) between the two loses the job:
what you get is "never sent for a rolled-back transaction", not "always sent
for a committed one". Use it for jobs that may be lost now and then (a cache
refresh, a notification with another path to the user), or when the job store
is not in the app's database. When the job must leave whenever the rows
commit, use the transactional outbox instead:
``jobs.enqueue(..., session=db.session)`` writes the job in the same
transaction, and the relay in ``flask sqs-worker`` sends whatever the immediate
send after the commit did not (see ``docs/guarantees.md``).

Each worker job runs in its own app context, so Flask-SQLAlchemy's session is
removed after every job without anything from this module.
"""

from __future__ import annotations

import dataclasses
import typing as t

try:
    import sqlalchemy.orm
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'enqueue_after_commit needs the "sqlalchemy" extra:'
        ' pip install "flask-sqs-jobs[sqlalchemy]"'
    ) from exc

import structlog
from flask import current_app
from flask import Flask
from flask import has_app_context

from ..engine.model import check_job_id
from ..engine.model import JSONObject
from ..engine.model import loggable_text
from ..store.outbox import AfterCommit

log = structlog.get_logger(__name__)


class _Enqueues(t.Protocol):
    """What sending a held job needs of the extension (``SQSJobs``)."""

    def enqueue(
        self,
        queue: str,
        job_type: str,
        payload: JSONObject | None = None,
        *,
        job_id: str | None = None,
        **options: t.Any,
    ) -> str: ...


@dataclasses.dataclass(frozen=True, eq=False)
class _HeldJob:
    app: Flask
    queue: str
    job_type: str
    payload: JSONObject | None
    options: dict[str, t.Any]
    job_id: str


def enqueue_after_commit(
    session: sqlalchemy.orm.Session | sqlalchemy.orm.scoped_session[t.Any],
    queue: str,
    job_type: str,
    payload: JSONObject | None = None,
    **options: t.Any,
) -> str:
    """Enqueue a job once ``session`` commits; forget it if the session rolls back.

    Takes the same arguments as :meth:`SQSJobs.enqueue`; the current app's
    extension sends it. The job id (the caller's ``job_id=`` or a new one) is
    checked and returned at once; the rest of the job is checked when it is
    sent, after the commit. A session not yet in a transaction begins one, so
    that its rollback can drop the job. Savepoints count as the module
    describes: released, their jobs wait for the outermost commit.

    :raises ValueError: ``job_id`` is not a valid job id.
    """
    job_id = check_job_id(options.pop("job_id", None))
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    held_jobs.hold(session, _HeldJob(app, queue, job_type, payload, options, job_id))
    return job_id


def _send_all(jobs: list[_HeldJob]) -> None:
    for job in jobs:
        _send(job)


def _send(job: _HeldJob) -> None:
    try:
        if has_app_context() and current_app._get_current_object() is job.app:  # type: ignore[attr-defined]
            _enqueue(job)
        else:
            with job.app.app_context():
                _enqueue(job)
    except Exception:
        # The commit has happened: raising would lose the jobs after this one.
        log.exception(
            "job_send_failed",
            queue=loggable_text(job.queue),
            job_type=loggable_text(str(job.job_type)),
            job_id=job.job_id,
        )


def _enqueue(job: _HeldJob) -> None:
    jobs: _Enqueues = job.app.extensions["sqs_jobs"]
    jobs.enqueue(job.queue, job.job_type, job.payload, job_id=job.job_id, **job.options)


def _log_dropped(dropped: list[_HeldJob]) -> None:
    log.info(
        "jobs_dropped_on_rollback",
        count=len(dropped),
        job_ids=[job.job_id for job in dropped],
    )


#: The jobs held in sessions' transactions, sent by their outermost commits.
held_jobs: AfterCommit[_HeldJob] = AfterCommit(
    "enqueue_after_commit", _send_all, _log_dropped
)
