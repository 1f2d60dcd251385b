"""Extension instances, created once and bound in ``create_app``."""

from __future__ import annotations

from flask_sqs_jobs import SQSJobs

jobs = SQSJobs()
