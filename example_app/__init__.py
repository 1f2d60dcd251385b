"""An example app: sign-ups enqueue a welcome email and a report on two queues.

A sign-up stores the user and its jobs in one transaction (the transactional
outbox) in a SQLite file, ``instance/example.db`` unless
``SQS_JOBS_STORE_URL`` says otherwise. Run it against a local SQS server with
``make demo``, or by hand::

    flask --app example_app sqs-jobs store init          # once
    flask --app example_app sqs-jobs local-server        # terminal 1
    flask --app example_app run                          # terminal 2
    flask --app example_app sqs-worker                   # terminal 3
    curl -X POST -d email=ada@example.com localhost:5000/signup
"""

from __future__ import annotations

import os
import typing as t

from flask import Flask

from .extensions import jobs
from .log_config import configure_logging

DEFAULT_CONFIG: dict[str, t.Any] = {
    # Local development defaults; override any of them from the environment,
    # e.g. FLASK_SQS_JOBS_ENDPOINT_URL=http://127.0.0.1:9324.
    "SQS_JOBS_QUEUES": {
        "critical": {
            "name": "example-critical",
            "weight": 5,
            "visibility_timeout": 10,
            "retry_backoff_seconds": 1,
        },
        # A FIFO queue, so the nightly periodic job is enqueued once however
        # many workers run, with no job store (docs/periodic.md).
        "housekeeping": {"name": "example-housekeeping.fifo", "weight": 1},
        "reports": {"name": "example-reports", "weight": 1, "visibility_timeout": 30},
    },
    "SQS_JOBS_ENDPOINT_URL": "http://127.0.0.1:9324",
    "SQS_JOBS_REGION_NAME": "us-east-1",
}


def create_app(config: dict[str, t.Any] | None = None) -> Flask:
    """Create the example app; ``FLASK_*`` environment variables override defaults."""
    configure_logging()
    app = Flask(__name__)
    app.config.update(DEFAULT_CONFIG)
    app.config.from_prefixed_env()
    if config:
        app.config.update(config)
    if not app.config.get("SQS_JOBS_STORE_URL"):
        os.makedirs(app.instance_path, exist_ok=True)
        path = os.path.join(app.instance_path, "example.db")
        app.config["SQS_JOBS_STORE_URL"] = f"sqlite:///{path}"
    jobs.init_app(app)
    from .models import database
    from .models import metadata

    # The job store's tables come from `flask sqs-jobs store init`; the
    # example's own table is created here, as a migration would.
    metadata.create_all(database(app).engine)

    from . import handlers  # noqa: F401 - registers the job handlers
    from .views import bp

    app.register_blueprint(bp)
    return app
