"""The top-level names SPEC promises are exported."""

from __future__ import annotations

import importlib
import types

import blinker
import flask_sqs_jobs
import pytest

SPEC_NAMES = [
    "SQSJobs",
    "QueueGroup",
    "SqsQueue",
    "Job",
    "JobMiddleware",
    "JobWorker",
    "NonRetryableError",
    "RetryJob",
    "EnqueueBatchError",
    "current_job",
    "signals",
]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_a_spec_name_is_listed_in_all(name: str) -> None:
    assert name in flask_sqs_jobs.__all__


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_a_spec_name_is_importable_from_the_package(name: str) -> None:
    if name == "SQSJobs":
        try:
            importlib.import_module("flask_sqs_jobs._extension")
        except ImportError as exc:
            pytest.skip(f"the Flask extension module is not available yet: {exc}")
    assert getattr(flask_sqs_jobs, name) is not None


def test_every_name_in_all_resolves() -> None:
    missing = []
    for name in flask_sqs_jobs.__all__:
        try:
            getattr(flask_sqs_jobs, name)
        except (AttributeError, ImportError):
            if name != "SQSJobs":
                missing.append(name)
    assert missing == []


def test_an_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        flask_sqs_jobs.NoSuchThing  # noqa: B018 - the attribute access is the test


def test_signals_is_a_module_of_blinker_signals() -> None:
    signals = flask_sqs_jobs.signals

    assert isinstance(signals, types.ModuleType)
    assert signals.__name__ == "flask_sqs_jobs.signals"
    for name in (
        "job_enqueued",
        "job_started",
        "job_finished",
        "worker_started",
        "worker_stopped",
    ):
        assert isinstance(getattr(signals, name), blinker.NamedSignal), name


def test_job_has_the_fields_middleware_sees() -> None:
    job = flask_sqs_jobs.Job(job_type="ping", payload={"n": 1}, queue="default")

    assert job.job_type == "ping"
    assert job.payload == {"n": 1}
    assert job.queue == "default"
    assert job.correlation_fields == {}
    assert job.trace_headers == {}
    assert job.message_id is None
    assert job.receive_count is None


def test_handler_control_exceptions_are_exceptions() -> None:
    assert issubclass(flask_sqs_jobs.NonRetryableError, Exception)
    assert issubclass(flask_sqs_jobs.RetryJob, Exception)
    assert issubclass(flask_sqs_jobs.EnqueueBatchError, Exception)
