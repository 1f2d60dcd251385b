"""A web process that commits outbox jobs and then hangs before its immediate send.

Run by ``test_outbox.py`` with the ``flask_test_app`` environment: it enqueues
``OUTBOX_WEB_COUNT`` jobs with ``session=`` on the store's database, commits,
and prints ``committed <job ids as JSON>`` from the immediate-send thread,
which then blocks, so that the test can SIGKILL the process between the
commit and the send.
"""

from __future__ import annotations

import json
import os
import threading
import typing as t

import sqlalchemy as sa
import sqlalchemy.orm
from flask_sqs_jobs.store.outbox import _immediate as _outbox_immediate

from tests.integration.flask_test_app import create_app


def main() -> None:
    job_ids: list[str] = []

    def hang(self: t.Any, rows: list[t.Any]) -> None:
        print("committed " + json.dumps(job_ids), flush=True)
        threading.Event().wait()

    _outbox_immediate.ImmediateSender._send = hang  # type: ignore[method-assign]
    app = create_app()
    jobs = app.extensions["sqs_jobs"]
    session = sa.orm.Session(sa.create_engine(os.environ["TEST_APP_STORE_URL"]))
    with app.app_context():
        for n in range(int(os.environ.get("OUTBOX_WEB_COUNT", "1"))):
            job_ids.append(jobs.enqueue("default", "record", {"n": n}, session=session))
        session.commit()
    threading.Event().wait()


if __name__ == "__main__":
    main()
