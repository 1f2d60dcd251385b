"""A flood of connections on the health port costs the worker neither its
probe nor the file descriptors of its SQS calls (against the SQS server)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import typing as t

from flask_sqs_jobs import JobWorker
from flask_sqs_jobs import QueueGroup
from flask_sqs_jobs import SqsQueue
from flask_sqs_jobs.engine import HealthServer
from flask_sqs_jobs.engine.ops import _probe_http

from tests.integration.conftest import MakeQueue
from tests.probe_clients import get
from tests.probe_clients import open_fds
from tests.probe_clients import PROBE_DEADLINE

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

ATTEMPTS = 500

#: Opens ``count`` connections one after the other from another process, so
#: that its sockets do not count here, and holds them. Prints how many it
#: opened, and how many of those the server closed (once it closed them all,
#: or after 30 s).
ATTACKER = """
import select, socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
held = set()
for _ in range(count):
    try:
        held.add(socket.create_connection(("127.0.0.1", port), timeout=3))
    except OSError:
        pass
opened, closed, deadline = len(held), 0, time.monotonic() + 30
while held and time.monotonic() < deadline:
    readable, _, _ = select.select(list(held)[:500], [], [], 0.5)
    for sock in readable:
        try:
            data = sock.recv(1024)
        except OSError:
            data = b""
        if not data:
            held.discard(sock)
            closed += 1
print("opened", opened, "closed", closed, flush=True)
sys.stdin.read()
"""


def test_a_flood_of_connections_leaves_the_probe_and_the_sqs_calls_alone(
    sqs_client: SQSClient, make_queue: MakeQueue
) -> None:
    url = make_queue("flood")
    worker = JobWorker(
        QueueGroup({"jobs": {"queue": SqsQueue(url, boto_client=sqs_client)}}), {}
    )
    health = HealthServer(worker)
    health.start()
    sqs_client.send_message(QueueUrl=url, MessageBody="warm up")  # its connection
    baseline = open_fds()
    attacker = subprocess.Popen(
        [sys.executable, "-c", ATTACKER, str(health.port), str(ATTEMPTS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert attacker.stdout is not None
    report: list[str] = []
    reader = threading.Thread(
        target=lambda: report.append(
            attacker.stdout.readline() if attacker.stdout else ""
        )
    )
    reader.start()
    most_fds, probes, sent = baseline, [], 0
    try:
        deadline = time.monotonic() + 40
        while reader.is_alive() and time.monotonic() < deadline:
            most_fds = max(most_fds, open_fds())
            started = time.monotonic()
            status, _, body = get(health.port, "/healthz")
            probes.append((status, body, time.monotonic() - started))
            sqs_client.send_message(QueueUrl=url, MessageBody=str(sent))
            sent += 1
        received = sqs_client.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0
        )
    finally:
        assert attacker.stdin is not None
        attacker.stdin.close()
        attacker.wait(10)
        if attacker.stdout is not None:
            attacker.stdout.close()
        reader.join(10)
        health.stop()

    assert len(report) == 1
    assert report[0].startswith("opened "), report
    _, opened, _, closed = report[0].split()
    # Far more connections than the server holds: it closed every one.
    assert int(opened) > 4 * _probe_http.MAX_CONNECTIONS
    assert int(closed) == int(opened)
    assert probes
    assert {(status, body) for status, body, _ in probes} == {(200, b"ok")}
    assert max(took for _, _, took in probes) < PROBE_DEADLINE
    # The server's connections, a probe and a few of the SQS client's, at most.
    assert most_fds <= baseline + _probe_http.MAX_CONNECTIONS + 12
    assert sent > 0
    assert received["Messages"]
