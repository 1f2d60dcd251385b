"""Celery with its SQS transport (run in .bench/venv-celery).

``celery -A celery_tasks worker`` imports this module; ``python celery_tasks.py``
pre-fills the queue through Celery itself (one SendMessage per task).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from _common import config
from _common import Counters
from celery import Celery

CFG = config()
_endpoint = urlsplit(CFG["endpoint"])
app = Celery("bench", broker=f"sqs://bench:bench@{_endpoint.hostname}:{_endpoint.port}")
app.conf.update(
    broker_transport_options={
        "region": "us-east-1",
        "is_secure": False,
        "predefined_queues": {
            CFG["queue"]: {
                "url": CFG["url"],
                "access_key_id": "bench",
                "secret_access_key": "bench",
            }
        },
    },
    broker_connection_retry_on_startup=True,
    task_default_queue=CFG["queue"],
    task_ignore_result=True,
    worker_hijack_root_logger=False,
)
counters = Counters(CFG["counters"], CFG["sleep_ms"], CFG["jobs"])


@app.task(name="noop")
def noop(i: int) -> None:
    counters.run()


def prefill() -> None:
    for i in range(CFG["jobs"]):
        noop.apply_async((i,), queue=CFG["queue"])


if __name__ == "__main__":
    prefill()
