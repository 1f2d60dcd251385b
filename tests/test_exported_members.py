"""The public surface is exactly what the docs promise, no more and no less."""

from __future__ import annotations

import types

import flask_sqs_jobs
import flask_sqs_jobs.engine
import flask_sqs_jobs.store
import pytest

#: SPEC's top-level names, plus the root of the runtime errors.
TOP_LEVEL = {
    "ConcurrencyLimit",
    "DuplicateJobError",
    "EnqueueBatchError",
    "EnqueuedJob",
    "IdempotencyConflictError",
    "Job",
    "JobMiddleware",
    "JobWorker",
    "NonRetryableError",
    "QueueGroup",
    "RateLimit",
    "Retry",
    "RetryJob",
    "SQSJobs",
    "SQSJobsError",
    "SqsQueue",
    "Task",
    "current_job",
    "signals",
}
#: The engine's names as docs/api.md documents them.
ENGINE = {
    "ConcurrencyLimit",
    "DuplicateJobError",
    "EnqueueBatchError",
    "HealthServer",
    "Hooks",
    "IdempotencyConflictError",
    "JSONObject",
    "Job",
    "JobHandler",
    "JobMiddleware",
    "JobWorker",
    "LargePayloads",
    "NonRetryableError",
    "Outcome",
    "PayloadNotFound",
    "QueueGroup",
    "QueueNotFoundError",
    "RateLimit",
    "Retry",
    "RetryJob",
    "SQSJobsError",
    "SqsQueue",
    "UnknownQueueError",
    "current_job",
    "pause",
    "run_worker",
    "use_unique_keys",
}

#: The job store's names.
STORE = {
    "DynamoDBStore",
    "JobRecord",
    "JobStore",
    "SQLAlchemyStore",
    "WorkerRecord",
}


@pytest.mark.parametrize(
    ("module", "documented"),
    [
        (flask_sqs_jobs, TOP_LEVEL),
        (flask_sqs_jobs.engine, ENGINE),
        (flask_sqs_jobs.store, STORE),
    ],
    ids=["flask_sqs_jobs", "flask_sqs_jobs.engine", "flask_sqs_jobs.store"],
)
def test_all_is_exactly_the_documented_names(
    module: types.ModuleType, documented: set[str]
) -> None:
    assert set(module.__all__) == documented
    assert sorted(module.__all__) == list(module.__all__)


@pytest.mark.parametrize(
    "module", [flask_sqs_jobs, flask_sqs_jobs.engine], ids=lambda m: m.__name__
)
def test_every_public_attribute_is_in_all(module: types.ModuleType) -> None:
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and name not in {"annotations", "t"}
        and not (isinstance(value, types.ModuleType) and name != "signals")
    }
    assert public <= set(module.__all__)


def test_engine_modules_are_private() -> None:
    import pkgutil

    found = list(
        pkgutil.walk_packages(flask_sqs_jobs.engine.__path__, "flask_sqs_jobs.engine.")
    )
    modules = [m.name for m in found if not m.ispkg]
    assert modules
    assert [m for m in modules if not m.rpartition(".")[2].startswith("_")] == []


def test_every_exported_name_resolves() -> None:
    for module in (flask_sqs_jobs, flask_sqs_jobs.engine):
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{module.__name__}.{name}"
