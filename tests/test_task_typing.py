"""A type checker sees a task's parameters on its enqueue methods (PEP 612).

mypy checks this file (``make test`` runs it over ``tests``): each
``assert_type`` must hold, and each ``type: ignore`` must silence a real
error, since unused ignores are errors under ``strict``.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import EnqueuedJob
from flask_sqs_jobs import SQSJobs
from flask_sqs_jobs import Task


def test_the_types_of_calls_and_enqueues(bare_app: Flask, jobs: SQSJobs) -> None:
    @jobs.task(queue="default")
    def resize(image_id: int, width: int = 100) -> str:
        return f"{image_id}@{width}"

    @jobs.task
    async def crawl(url: str) -> int:
        return len(url)

    t.assert_type(resize(image_id=1), str)
    t.assert_type(crawl(url="x"), cabc.Coroutine[t.Any, t.Any, int]).close()
    with bare_app.app_context():
        t.assert_type(resize.enqueue(image_id=1), EnqueuedJob)
        bound = resize.options(delay_seconds=5, job_id="resize-1")
        t.assert_type(bound.enqueue(image_id=1, width=20), EnqueuedJob)
        t.assert_type(resize.enqueue_many([{"image_id": 2}]), list[EnqueuedJob])
        t.assert_type(crawl.enqueue(url="https://example.com"), EnqueuedJob)
    coroutine = crawl.aenqueue(url="x")
    t.assert_type(coroutine, cabc.Coroutine[t.Any, t.Any, EnqueuedJob]).close()

    # The type checker and the runtime refuse the same mistakes.
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        resize.enqueue(image_id=1, colour=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="missing a required argument"):
        resize.options(queue="default").enqueue()  # type: ignore[call-arg]


def test_a_task_is_generic_in_the_function_s_parameters(jobs: SQSJobs) -> None:
    def thumbnail(image_id: int) -> None:
        pass

    task: Task[[int], None] = jobs.task(thumbnail)

    assert task.func is thumbnail


if t.TYPE_CHECKING:

    def _wrong_types(task: Task[[int], str]) -> None:
        """Never run: only checked, each line an error the checker must report."""
        task.enqueue("not an int")  # type: ignore[arg-type]
        task.options(delay_seconds="soon")  # type: ignore[arg-type]
        task.enqueue(1).message_id.upper()  # type: ignore[union-attr]
