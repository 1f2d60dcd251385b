"""``SQS_JOBS_OUTBOX_MAX_ATTEMPTS``: read and checked at ``init_app``."""

from __future__ import annotations

import typing as t

import pytest
from flask_sqs_jobs.config import load_config

QUEUES = {"default": {"name": "q"}}


def test_the_default_parks_a_row_after_20_failed_sends() -> None:
    assert load_config({"SQS_JOBS_QUEUES": QUEUES}).outbox_max_attempts == 20


def test_a_positive_int_is_taken() -> None:
    config = load_config({"SQS_JOBS_QUEUES": QUEUES, "SQS_JOBS_OUTBOX_MAX_ATTEMPTS": 3})
    assert config.outbox_max_attempts == 3


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "3", None])
def test_anything_else_is_refused_naming_the_setting(value: t.Any) -> None:
    with pytest.raises(
        ValueError,
        match="SQS_JOBS_OUTBOX_MAX_ATTEMPTS must be a positive int of failed sends",
    ):
        load_config({"SQS_JOBS_QUEUES": QUEUES, "SQS_JOBS_OUTBOX_MAX_ATTEMPTS": value})
