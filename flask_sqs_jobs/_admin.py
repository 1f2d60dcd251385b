"""Queue administration behind ``flask sqs-jobs``: create queues, run a local server."""

from __future__ import annotations

import collections.abc as cabc
import json
import signal
import threading
import typing as t
import urllib.parse

import boto3
import click

from ._config import Config
from .engine._group_commit import error_code

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

#: Dead letters are kept as long as SQS allows (14 days), for inspection.
DEAD_LETTER_RETENTION_SECONDS = 1_209_600


def physical_name(definition: cabc.Mapping[str, t.Any]) -> str:
    """The SQS queue name of a definition: its ``name`` or its URL's last part."""
    if "name" in definition:
        return str(definition["name"])
    path = urllib.parse.urlsplit(str(definition["url"])).path.rstrip("/")
    return urllib.parse.unquote(path).rsplit("/", 1)[-1]


def dead_letter_name(name: str) -> str:
    """``jobs`` -> ``jobs-dlq``; ``jobs.fifo`` -> ``jobs-dlq.fifo``."""
    if name.endswith(".fifo"):
        return f"{name[: -len('.fifo')]}-dlq.fifo"
    return f"{name}-dlq"


def create_queues(
    client: SQSClient, config: Config, max_receive_count: int
) -> list[str]:
    """Create every configured queue and its dead-letter queue; report one line each.

    Idempotent: an existing queue is kept and its redrive policy updated.
    """
    lines = []
    for logical, definition in config.queues.items():
        name = physical_name(definition)
        fifo = name.endswith(".fifo")
        base: dict[str, str] = {"FifoQueue": "true"} if fifo else {}
        dlq_name = dead_letter_name(name)
        dlq_url, _ = _ensure_queue(
            client,
            dlq_name,
            {**base, "MessageRetentionPeriod": str(DEAD_LETTER_RETENTION_SECONDS)},
        )
        dlq_arn = client.get_queue_attributes(
            QueueUrl=dlq_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        attributes = dict(base)
        if fifo:
            attributes["ContentBasedDeduplication"] = "true"
        if definition.get("visibility_timeout"):
            attributes["VisibilityTimeout"] = str(definition["visibility_timeout"])
        attributes["RedrivePolicy"] = json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
        )
        url, created = _ensure_queue(client, name, attributes)
        lines.append(
            f"{logical}: {name} {'created' if created else 'exists (updated)'},"
            f" dead letters to {dlq_name} after {max_receive_count} receives  {url}"
        )
    return lines


def _ensure_queue(
    client: SQSClient, name: str, attributes: dict[str, str]
) -> tuple[str, bool]:
    """Create ``name``, or update it if it exists; return ``(url, created)``."""
    try:
        url = client.get_queue_url(QueueName=name)["QueueUrl"]
    except Exception as exc:
        if "NonExistentQueue" not in error_code(exc) and "QueueDoesNotExist" not in (
            error_code(exc)
        ):
            raise
    else:
        settable = {k: v for k, v in attributes.items() if k != "FifoQueue"}
        if settable:
            client.set_queue_attributes(
                QueueUrl=url, Attributes=t.cast(t.Any, settable)
            )
        return url, False
    url = client.create_queue(QueueName=name, Attributes=t.cast(t.Any, attributes))[
        "QueueUrl"
    ]
    return url, True


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
