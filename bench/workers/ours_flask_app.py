"""A minimal Flask app for ``flask --app .../ours_flask_app.py:create_app sqs-worker``.

One ``noop`` handler that records its runs in the driver's counter files
(BENCH_CONFIG: ``endpoint``, ``url``, ``counters``, ``sleep_ms``, ``jobs``,
``logging``). The CLI worker runs every job in its own app context and stops on
SIGTERM, which the driver sends once every job ran.
"""

from __future__ import annotations

from typing import Any

from _common import config
from _common import configure_logging
from _common import Counters
from flask import Flask
from flask_sqs_jobs import SQSJobs


def create_app() -> Flask:
    cfg = config()
    configure_logging(cfg)
    app = Flask(__name__)
    app.config.update(
        SQS_JOBS_QUEUES={"default": {"url": cfg["url"]}},
        SQS_JOBS_ENDPOINT_URL=cfg["endpoint"],
        SQS_JOBS_IDLE_WAIT_SECONDS=1,
    )
    jobs = SQSJobs()
    counters = Counters(cfg["counters"], cfg["sleep_ms"], cfg["jobs"])

    @jobs.handler("noop")
    def noop(payload: dict[str, Any]) -> None:
        counters.run(payload)

    jobs.init_app(app)
    return app
