"""``flask sqs-jobs dashboard`` as a real process serving real HTTP."""

from __future__ import annotations

import json
import re
import typing as t
import urllib.request

from .conftest import ROOT
from .helpers import wait_until
from .processes import WorkerProcess
from .test_cli_worker import flask_command
from .test_cli_worker import subprocess_env

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

    from .conftest import MakeQueue


def test_the_command_serves_the_dashboard_on_loopback(
    sqs_endpoint: str, sqs_client: SQSClient, make_queue: MakeQueue
) -> None:
    url = make_queue("dash-cmd")
    sqs_client.send_message(QueueUrl=url, MessageBody="{}")
    env = subprocess_env(
        {
            "TEST_APP_ENDPOINT": sqs_endpoint,
            "TEST_APP_QUEUES": json.dumps({"default": {"url": url}}),
        }
    )
    process = WorkerProcess(
        flask_command("sqs-jobs", "dashboard", "--port", "0"), env=env, cwd=ROOT
    )
    try:
        wait_until(
            lambda: any("dashboard on http://127.0.0.1:" in x for x in process.lines),
            30,
            process.output,
        )
        line = next(x for x in process.lines if "dashboard on" in x)
        match = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert match, line
        request = urllib.request.Request(
            match.group(), headers={"Accept": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            data = json.load(response)
            policy = response.headers["Content-Security-Policy"]
        assert [(q["queue"], q["visible"]) for q in data["queues"]] == [("default", 1)]
        assert "frame-ancestors 'none'" in policy
    finally:
        process.close()
