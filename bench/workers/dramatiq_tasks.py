"""dramatiq + dramatiq-sqs (run in .bench/venv-dramatiq).

``python -m dramatiq dramatiq_tasks`` imports this module in each worker process;
``python dramatiq_tasks.py`` pre-fills the queue with dramatiq's own message encoding.
"""

from __future__ import annotations

from base64 import b64encode

import boto3
import dramatiq
from _common import config
from _common import Counters
from botocore.config import Config
from dramatiq_sqs import SQSBroker

CFG = config()
broker = SQSBroker(endpoint_url=CFG["endpoint"], config=Config(max_pool_connections=32))
dramatiq.set_broker(broker)
counters = Counters(CFG["counters"], CFG["sleep_ms"], CFG["jobs"])


@dramatiq.actor(actor_name="noop", queue_name=CFG["queue"], max_retries=0)
def noop(i: int) -> None:
    counters.run()


def prefill() -> None:
    sqs = boto3.client("sqs", endpoint_url=CFG["endpoint"])
    bodies = [b64encode(noop.message(i).encode()).decode() for i in range(CFG["jobs"])]
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(n), "MessageBody": body}
            for n, body in enumerate(bodies[start : start + 10])
        ]
        if sqs.send_message_batch(QueueUrl=CFG["url"], Entries=entries).get("Failed"):
            raise SystemExit("pre-fill failed")


if __name__ == "__main__":
    prefill()
