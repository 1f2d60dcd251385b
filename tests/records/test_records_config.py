"""The job-record settings are checked when the config is loaded."""

from __future__ import annotations

import pytest
from flask_sqs_jobs.config._settings import load_config

QUEUES = {"SQS_JOBS_QUEUES": {"default": {"name": "q"}}}


def test_defaults_record_jobs_for_a_week() -> None:
    config = load_config(QUEUES)
    assert (config.record_jobs, config.record_retention_seconds) == (True, 604800)


@pytest.mark.parametrize(
    ("key", "value", "error", "message"),
    [
        ("SQS_JOBS_RECORD_JOBS", "yes", TypeError, "must be True or False; got 'yes'"),
        ("SQS_JOBS_RECORD_RETENTION_SECONDS", 0, ValueError, "positive int of seconds"),
        ("SQS_JOBS_RECORD_RETENTION_SECONDS", 1.5, ValueError, "got 1.5"),
        ("SQS_JOBS_RECORD_RETENTION_SECONDS", True, ValueError, "got True"),
    ],
)
def test_bad_values_name_the_key(
    key: str, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as info:
        load_config({**QUEUES, key: value})
    assert key in str(info.value)
