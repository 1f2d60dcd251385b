"""The local SQS server (MiniStack from PyPI), fake AWS credentials, queue helpers."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config

from bench import procs
from bench.envs import BENCH_DIR
from bench.envs import dist_versions
from bench.envs import ensure_venv

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient as SQSClient
else:
    SQSClient = Any

REGION = "us-east-1"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}
POOL = 32  # connections per client: enough for 16 worker threads plus heartbeats
LOGS = BENCH_DIR / "logs"


def use_fake_aws() -> None:
    """Fake credentials and region for this process and every child it starts."""
    for name in (
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_SQS",
    ):
        os.environ.pop(name, None)
    os.environ.update(AWS_ENV)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Server:
    endpoint: str
    name: str
    version: str


@contextmanager
def ministack(*, ready_within: float = 30.0, attempts: int = 3) -> Iterator[Server]:
    """Start MiniStack on a free 127.0.0.1 port; always terminated on the way out."""
    python = ensure_venv("venv-ministack", ["ministack~=1.5.33"])
    version = dist_versions(python, ["ministack"]).get("ministack", "?")
    for attempt in range(1, attempts + 1):
        port = free_port()
        env = {
            **os.environ,
            "GATEWAY_PORT": str(port),
            "BIND_HOST": "127.0.0.1",
            "MINISTACK_HOST": "127.0.0.1",
            "IOT_MTLS_ENABLED": "0",
            "SFTP_ENABLED": "0",
            "LOG_LEVEL": "WARNING",
        }
        proc = procs.spawn(
            [str(python.parent / "ministack")],
            env=env,
            cwd=BENCH_DIR,
            log_path=LOGS / "ministack.log",
        )
        try:
            if _healthy(f"http://127.0.0.1:{port}", proc, ready_within):
                yield Server(f"http://127.0.0.1:{port}", "MiniStack", version)
                return
        finally:
            procs.stop(proc)
        if attempt == attempts:
            raise RuntimeError(
                f"MiniStack did not become ready; see {LOGS / 'ministack.log'}"
            )


def _healthy(endpoint: str, proc: Any, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(
                f"{endpoint}/_ministack/health", timeout=2
            ) as response:
                if json.load(response).get("services", {}).get("sqs") in (
                    "available",
                    "running",
                ):
                    return True
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    return False


def sqs_client(endpoint: str) -> SQSClient:
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name=REGION,
        config=Config(max_pool_connections=POOL),
    )


def new_queue(sqs: SQSClient, prefix: str) -> tuple[str, str]:
    """Create a uniquely named standard queue; return (name, url)."""
    name = f"bench-{prefix}-{uuid.uuid4().hex[:8]}"
    return name, sqs.create_queue(QueueName=name)["QueueUrl"]


def queue_depth(sqs: SQSClient, url: str) -> tuple[int, int]:
    """(visible, in flight) from the Approximate* attributes."""
    attrs = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
        ],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(
        attrs["ApproximateNumberOfMessagesNotVisible"]
    )


def drop_queue(sqs: SQSClient, url: str) -> None:
    with contextlib.suppress(Exception):  # best effort: the server goes away anyway
        sqs.delete_queue(QueueUrl=url)
