"""Producing: check a job, run the produce chain, hand the message to a sink."""

from __future__ import annotations

from ._batch_enqueue import enqueue_many
from ._batch_enqueue import JobSpec
from ._batch_enqueue import prepare_job
from ._batch_enqueue import send_staged
from ._producer import build_send_params
from ._producer import check_correlation_fields
from ._producer import check_job_type
from ._producer import check_json
from ._producer import check_options
from ._producer import check_payload
from ._producer import report_enqueued
from ._producer import SendOptions
from ._producer import stage_job

__all__ = [
    "JobSpec",
    "SendOptions",
    "build_send_params",
    "check_correlation_fields",
    "check_job_type",
    "check_json",
    "check_options",
    "check_payload",
    "enqueue_many",
    "prepare_job",
    "report_enqueued",
    "send_staged",
    "stage_job",
]
