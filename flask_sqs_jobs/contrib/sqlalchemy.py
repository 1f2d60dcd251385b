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
        enqueue_after_commit(db.session, "default", "send_welcome_email",
                             {"user_id": user.id})
        db.session.commit()     # the job is sent here
        return "", 201

The jobs are sent right after the commit, so a crash between the two still
loses them: for a strict guarantee keep an outbox table and enqueue from it.

Each worker job runs in its own app context, so Flask-SQLAlchemy's session is
removed after every job without anything from this module.
"""

from __future__ import annotations

import typing as t

try:
    import sqlalchemy.event
    import sqlalchemy.orm
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'enqueue_after_commit needs the "sqlalchemy" extra:'
        ' pip install "flask-sqs-jobs[sqlalchemy]"'
    ) from exc

import structlog
from flask import current_app

from ..engine._job import JSONObject

if t.TYPE_CHECKING:
    from .._extension import SQSJobs

log = structlog.get_logger(__name__)

_PENDING = "flask_sqs_jobs.pending_jobs"


def enqueue_after_commit(
    session: sqlalchemy.orm.Session | sqlalchemy.orm.scoped_session[t.Any],
    queue: str,
    job_type: str,
    payload: JSONObject | None = None,
    **options: t.Any,
) -> None:
    """Enqueue a job once ``session`` commits; forget it if the session rolls back.

    Takes the same arguments as :meth:`SQSJobs.enqueue`. The job is checked
    when it is sent, after the commit; the current app's extension sends it.
    """
    target = (
        session() if isinstance(session, sqlalchemy.orm.scoped_session) else session
    )
    jobs: SQSJobs = current_app.extensions["sqs_jobs"]
    pending: list[tuple[SQSJobs, tuple[t.Any, ...], dict[str, t.Any]]]
    pending = target.info.setdefault(_PENDING, [])
    if not sqlalchemy.event.contains(target, "after_commit", _send_pending):
        sqlalchemy.event.listen(target, "after_commit", _send_pending)
        sqlalchemy.event.listen(target, "after_rollback", _drop_pending)
    pending.append((jobs, (queue, job_type, payload), options))


def _send_pending(session: sqlalchemy.orm.Session) -> None:
    for jobs, args, options in session.info.pop(_PENDING, []):
        jobs.enqueue(*args, **options)


def _drop_pending(session: sqlalchemy.orm.Session) -> None:
    pending = session.info.pop(_PENDING, [])
    if pending:
        log.info("jobs_dropped_on_rollback", count=len(pending))
