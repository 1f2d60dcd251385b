"""Hand the queues over to a newer ECS deployment (needs only boto3).

::

    from flask_sqs_jobs.contrib.ecs import EcsDrainMiddleware

    jobs = SQSJobs(middleware=[EcsDrainMiddleware()])

During a rolling deploy, old and new workers run side by side for a while.
This middleware makes the old generation stop taking jobs as soon as a task of
the new one runs, so every job received from then on runs the new code.
"""

from __future__ import annotations

import collections.abc as cabc
import json
import os
import threading
import time
import typing as t
import urllib.request

import boto3
import structlog

from ..engine.model import JobMiddleware
from ..engine.worker import pause

if t.TYPE_CHECKING:
    from mypy_boto3_ecs.client import ECSClient

__all__ = ["EcsDrainMiddleware"]

log = structlog.get_logger(__name__)

#: The variable ECS sets to the task metadata endpoint (version 4) in every
#: container, on EC2 and Fargate alike.
METADATA_URI_ENV = "ECS_CONTAINER_METADATA_URI_V4"
#: DescribeTasks accepts at most this many tasks a call.
MAX_DESCRIBE_TASKS = 100


class EcsDrainMiddleware(JobMiddleware):
    """Stop polling while a newer revision of this task's family runs in the cluster.

    The worker finds its own task through the ECS task metadata endpoint
    (``$ECS_CONTAINER_METADATA_URI_V4/task``), then lists the cluster's running
    tasks of the same task-definition family (and, when ECS says, the same
    group, e.g. the same service) with the ECS API. Once a task of a newer
    revision is ``RUNNING``, each polling cycle is skipped: the worker waits
    ``pause_seconds`` (returning at once on a stop request) and receives
    nothing, while jobs already running finish. If the newer tasks stop (a
    failed deploy rolled back), polling resumes. Pausing and resuming are
    logged (``ecs_drain_paused``, ``ecs_drain_resumed``).

    The answer is cached for ``check_interval_seconds``, so ECS is not called
    every cycle. Outside ECS, or when the metadata endpoint or the ECS API
    fails, the worker keeps polling and a warning is logged once
    (``ecs_drain_unavailable``) until a check succeeds again. The task role
    needs ``ecs:ListTasks`` and ``ecs:DescribeTasks``.

    A paused worker completes no receives, so ``flask sqs-worker
    --health-port`` reports it unhealthy after ``--health-max-age`` seconds;
    ECS then stops it, which is what the drain is for.

    :param ecs_client: a boto3 ECS client, positional or by keyword
        (``EcsDrainMiddleware(boto3.client("ecs"))``); by default one is
        created for the cluster's region on first use.
    :param check_interval_seconds: how long one answer from ECS is trusted.
    :param pause_seconds: how long each skipped polling cycle waits.
    :param metadata_uri: the task metadata endpoint; by default
        ``$ECS_CONTAINER_METADATA_URI_V4``.
    :param metadata_timeout: seconds to wait for the metadata endpoint.
    :param clock: a monotonic clock in seconds (tests pass their own).
    """

    def __init__(
        self,
        ecs_client: ECSClient | None = None,
        *,
        check_interval_seconds: float = 30.0,
        pause_seconds: float = 5.0,
        metadata_uri: str | None = None,
        metadata_timeout: float = 2.0,
        clock: cabc.Callable[[], float] = time.monotonic,
    ) -> None:
        if ecs_client is not None and not callable(
            getattr(ecs_client, "describe_tasks", None)
        ):
            raise TypeError(
                "ecs_client must be a boto3 ECS client, such as"
                f' boto3.client("ecs"); got {type(ecs_client).__name__}'
            )
        if check_interval_seconds < 0:
            raise ValueError(
                f"check_interval_seconds must be >= 0; got {check_interval_seconds!r}"
            )
        if pause_seconds <= 0:
            raise ValueError(
                "pause_seconds must be > 0 (a paused worker would spin); got"
                f" {pause_seconds!r}"
            )
        self.check_interval_seconds = check_interval_seconds
        self.pause_seconds = pause_seconds
        self._client = ecs_client
        self._metadata_uri = metadata_uri
        self._metadata_timeout = metadata_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._task: _OwnTask | None = None
        self._checked_at: float | None = None
        self._paused = False
        self._warned = False

    def poll(self, call_next: cabc.Callable[[], None]) -> None:
        if self.should_pause():
            pause(self.pause_seconds)
            return
        call_next()

    def should_pause(self) -> bool:
        """Whether a newer generation runs: the cached answer, or a fresh one."""
        with self._lock:
            now = self._clock()
            if (
                self._checked_at is None
                or now - self._checked_at >= self.check_interval_seconds
            ):
                self._checked_at = now
                self._update(self._newer_revision())
            return self._paused

    def _newer_revision(self) -> int | None:
        """The newest running revision above ours, or None (also on any failure)."""
        try:
            task = self._own_task()
            if task is None:
                self._warn("not running on ECS: $" + METADATA_URI_ENV + " is not set")
                return None
            newer = self._newest_running(task)
        except Exception as exc:
            self._warn(f"{type(exc).__name__}: {exc}")
            return None
        self._warned = False
        return newer

    def _update(self, newer: int | None) -> None:
        task = self._task
        fields = (
            {} if task is None else {"family": task.family, "revision": task.revision}
        )
        if newer is not None and not self._paused:
            self._paused = True
            log.info("ecs_drain_paused", newer_revision=newer, **fields)
        elif newer is None and self._paused:
            self._paused = False
            log.info("ecs_drain_resumed", **fields)

    def _warn(self, reason: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("ecs_drain_unavailable", reason=reason, polling="continues")

    # -- asking ECS --

    def _own_task(self) -> _OwnTask | None:
        if self._task is not None:
            return self._task
        uri = self._metadata_uri or os.environ.get(METADATA_URI_ENV)
        if not uri:
            return None
        # The endpoint is link-local: never send the request through a proxy.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(
            f"{uri.rstrip('/')}/task", timeout=self._metadata_timeout
        ) as response:
            metadata = json.load(response)
        self._task = _OwnTask(
            cluster=str(metadata["Cluster"]),
            arn=str(metadata["TaskARN"]),
            family=str(metadata["Family"]),
            revision=int(metadata["Revision"]),
        )
        return self._task

    def _ecs(self, task: _OwnTask) -> ECSClient:
        if self._client is None:
            # A cluster ARN names its region: arn:aws:ecs:<region>:<account>:...
            parts = task.cluster.split(":")
            region = parts[3] if len(parts) > 5 and parts[0] == "arn" else None
            self._client = boto3.client("ecs", region_name=region)
        return self._client

    def _newest_running(self, task: _OwnTask) -> int | None:
        client = self._ecs(task)
        arns: list[str] = []
        request: dict[str, t.Any] = {
            "cluster": task.cluster,
            "family": task.family,
            "desiredStatus": "RUNNING",
        }
        while True:
            page = client.list_tasks(**request)
            arns.extend(page.get("taskArns", []))
            if not page.get("nextToken"):
                break
            request["nextToken"] = page["nextToken"]
        if task.arn not in arns:
            arns.append(task.arn)  # described too, to learn our own group
        described: list[t.Any] = []
        for start in range(0, len(arns), MAX_DESCRIBE_TASKS):
            chunk = arns[start : start + MAX_DESCRIBE_TASKS]
            response = client.describe_tasks(cluster=task.cluster, tasks=chunk)
            described.extend(response.get("tasks", []))
        own_group = next(
            (d.get("group") for d in described if d.get("taskArn") == task.arn), None
        )
        revisions = [
            revision
            for d in described
            if d.get("lastStatus") == "RUNNING"
            and (own_group is None or d.get("group") == own_group)
            and (revision := _revision_of(d.get("taskDefinitionArn"), task.family))
            is not None
            and revision > task.revision
        ]
        return max(revisions, default=None)


class _OwnTask(t.NamedTuple):
    cluster: str
    arn: str
    family: str
    revision: int


def _revision_of(task_definition_arn: object, family: str) -> int | None:
    """The revision of ``arn:...:task-definition/<family>:<revision>`` in ``family``."""
    if not isinstance(task_definition_arn, str):
        return None
    name = task_definition_arn.rpartition("/")[2]
    task_family, _, revision = name.rpartition(":")
    if task_family != family or not revision.isdigit():
        return None
    return int(revision)
