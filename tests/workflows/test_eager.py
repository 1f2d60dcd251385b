"""Workflows in eager mode (``SQS_JOBS_EAGER``): every job runs when it is sent."""

from __future__ import annotations

import pathlib

from flask import Flask
from flask_sqs_jobs import SQSJobs


def test_a_batch_and_a_chain_run_at_once_with_their_callback(
    tmp_path: pathlib.Path,
) -> None:
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"name": "eager"}},
        SQS_JOBS_EAGER=True,
        SQS_JOBS_STORE_URL=f"sqlite:///{tmp_path / 'jobs.db'}",
        SQS_JOBS_RECORD_JOBS=False,
    )
    jobs = SQSJobs(app)
    seen: list[object] = []

    @jobs.task
    def child(n: int, previous_result: int = 0) -> int:
        seen.append(n)
        return n + previous_result

    @jobs.task
    def done(batch_id: str) -> None:
        seen.append(("done", batch_id))

    with app.app_context():
        jobs.store().create_tables()
        batch = jobs.batch([child.s(n=1), child.s(n=2)], on_complete=done.s()).enqueue()
        assert seen == [1, 2, ("done", batch.batch_id)]
        record = jobs.get_batch(batch.batch_id)
        assert record is not None
        assert (record.status, record.callbacks_sent) == ("succeeded", ["on_complete"])
        chain = jobs.chain(child.s(n=3), child.s(n=4), pass_result=True).enqueue()
        assert seen[-2:] == [3, 4]
        assert jobs.get_chain(chain.chain_id).status == "succeeded"  # type: ignore[union-attr]
        jobs.store().close()
