"""Queue administration behind ``flask sqs-jobs``: create queues, run a local server."""

from __future__ import annotations

import json
import signal
import threading
import typing as t

import boto3
import click

from ..config import Config
from ..engine.sqs import aws_error_code
from ..engine.sqs import QUEUE_DOES_NOT_EXIST_CODES
from ..engine.sqs import SqsQueue

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Dead letters are kept as long as SQS allows (14 days), for inspection.
DEAD_LETTER_RETENTION_SECONDS = 1_209_600


def dead_letter_name(name: str) -> str:
    """``jobs`` -> ``jobs-dlq``; ``jobs.fifo`` -> ``jobs-dlq.fifo``."""
    if name.endswith(".fifo"):
        return f"{name[: -len('.fifo')]}-dlq.fifo"
    return f"{name}-dlq"


def create_queues(
    client: SQSClient, config: Config, max_receive_count: int
) -> list[str]:
    """Create what is missing of every configured queue; report one line each.

    A missing queue is created with a dead-letter queue (created too unless
    it exists) and a redrive policy. An existing queue is left exactly as it
    is, redrive policy included, and so is an existing dead-letter queue.
    """
    lines = []
    for logical, definition in config.definitions.items():
        name = definition.physical_name
        url = _existing_queue_url(client, name)
        if url is not None:
            lines.append(
                f"{logical}: {name} exists, left unchanged"
                f" ({_dead_letters_of(client, url)})  {url}"
            )
            continue
        fifo = name.endswith(".fifo")
        base: dict[str, str] = {"FifoQueue": "true"} if fifo else {}
        dlq_name = dead_letter_name(name)
        dlq_url = _existing_queue_url(client, dlq_name)
        if dlq_url is None:
            dlq_url = _create_queue(
                client,
                dlq_name,
                {**base, "MessageRetentionPeriod": str(DEAD_LETTER_RETENTION_SECONDS)},
            )
            dlq_done = "created"
        else:
            dlq_done = "exists, left unchanged"
        dlq_arn = client.get_queue_attributes(
            QueueUrl=dlq_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        attributes = dict(base)
        if fifo:
            attributes["ContentBasedDeduplication"] = "true"
        if definition.visibility_timeout:
            attributes["VisibilityTimeout"] = str(definition.visibility_timeout)
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
        )
        url = _create_queue(client, name, attributes)
        lines.append(
            f"{logical}: {name} created, dead letters to {dlq_name} after"
            f" {max_receive_count} receives; {dlq_name} {dlq_done}  {url}"
        )
    return lines


def _existing_queue_url(client: SQSClient, name: str) -> str | None:
    """The URL of queue ``name``, or None when SQS has no such queue."""
    try:
        return client.get_queue_url(QueueName=name)["QueueUrl"]
    except Exception as exc:
        if aws_error_code(exc) in QUEUE_DOES_NOT_EXIST_CODES:
            return None
        raise


def _create_queue(client: SQSClient, name: str, attributes: dict[str, str]) -> str:
    return client.create_queue(QueueName=name, Attributes=t.cast(t.Any, attributes))[
        "QueueUrl"
    ]


def _dead_letters_of(client: SQSClient, url: str) -> str:
    """Where an existing queue's dead letters go, as its RedrivePolicy says now."""
    queue = SqsQueue(url, boto_client=client)
    queue.read_attributes()
    policy = queue.redrive_policy()
    if policy is None:
        return "no dead-letter queue"
    dlq_arn, receives = policy
    return f"dead letters to {dlq_arn.rsplit(':', 1)[-1]} after {receives} receives"


def run_local_server(host: str, port: int, config: Config | None) -> None:
    """Serve an in-memory SQS-compatible API (moto) until SIGINT or SIGTERM."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        raise click.ClickException(
            'the local server needs the "local" extra:'
            ' pip install "flask-sqs-jobs[local]"'
        ) from None
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    endpoint = f"http://{host}:{server.get_host_and_port()[1]}"
    click.echo(f"Local SQS server on {endpoint} (in memory; stop with Ctrl+C)")
    click.echo(f"Point the app at it: export FLASK_SQS_JOBS_ENDPOINT_URL={endpoint}")
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        if config is not None:
            client = boto3.client(
                "sqs",
                endpoint_url=endpoint,
                region_name=config.region_name or "us-east-1",
                aws_access_key_id="local",
                aws_secret_access_key="local",
            )
            for line in create_queues(client, config, max_receive_count=5):
                click.echo(line)
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
        click.echo("Local SQS server stopped")
