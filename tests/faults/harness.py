"""The fault tier's machinery: the SQS server, queues, jobs, workers and the ledger.

A scenario sends jobs straight to the server, runs ``flask sqs-worker``
processes that reach the server through a :class:`~tests.faults.proxy.FaultProxy`,
injects faults, waits until the queue has settled, then drains the queue and
its dead-letter queue and compares what is left with what the handlers
recorded (:func:`verdict`).
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import contextlib
import dataclasses
import enum
import itertools
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
import typing as t
import urllib.request
import uuid

import boto3

from tests.integration.helpers import log_time
from tests.integration.helpers import wait_until
from tests.integration.processes import WorkerProcess
from tests.integration.servers import free_port
from tests.integration.servers import moto_server
from tests.integration.servers import stop_process
from tests.support import create_queue
from tests.support import local_sqs_client
from tests.support import queue_counts

from .proxy import Exchange
from .proxy import LATENCY_FAULTS

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef
    from mypy_boto3_sqs.type_defs import SendMessageBatchRequestEntryTypeDef

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
APP = "tests.faults.fault_app:create_app"
REGION = "us-east-1"
#: ``short`` or ``full`` runs the tier (anything else but ``0`` means short).
MODE_VARIABLE = "SQS_JOBS_FAULTS"
#: ``moto`` or ``ministack`` forces the server; default MiniStack, else moto.
SERVER_VARIABLE = "SQS_JOBS_FAULTS_SERVER"
MINISTACK = ROOT / ".venv-ministack" / "bin" / "ministack"
FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def mode() -> str:
    """``full``, ``short``, or ``""`` when the tier is off."""
    value = os.environ.get(MODE_VARIABLE, "").strip().lower()
    if value in ("", "0", "no", "off"):
        return ""
    return "full" if value == "full" else "short"


def sized(short: int, full: int) -> int:
    """A scenario size: ``short`` in the short tier, ``full`` in the full one."""
    return full if mode() == "full" else short


# -- the SQS server --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SqsServer:
    endpoint: str
    #: ``ministack`` or ``moto``.
    kind: str
    #: The server process's exit status, None while it runs (or when unknown).
    exit_status: cabc.Callable[[], int | None] = lambda: None

    def check(self) -> None:
        """Fail at once, and say so, when the server process has died."""
        status = self.exit_status()
        assert status is None, f"the {self.kind} server exited with status {status}"


def _ministack_healthy(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/_ministack/health", timeout=2) as r:
            services = json.load(r).get("services", {})
    except (OSError, ValueError):
        return False
    return services.get("sqs") in ("available", "running")


@contextlib.contextmanager
def ministack(log_path: pathlib.Path, attempts: int = 3) -> cabc.Iterator[SqsServer]:
    """Run MiniStack (from ``.venv-ministack``) on a free port."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "GATEWAY_PORT": str(port),
            "BIND_HOST": "127.0.0.1",
            "MINISTACK_HOST": "127.0.0.1",
            "IOT_MTLS_ENABLED": "0",
            "SFTP_ENABLED": "0",
            "LOG_LEVEL": "WARNING",
        }
        with log_path.open("ab") as log:
            process = subprocess.Popen(
                [str(MINISTACK)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=log_path.parent,
            )
        try:
            deadline = time.monotonic() + 30
            while not _ministack_healthy(endpoint):
                if process.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            else:
                yield SqsServer(endpoint, "ministack", process.poll)
                return
            if attempt == attempts:
                raise RuntimeError(f"MiniStack did not start; see {log_path}")
        finally:
            stop_process(process)


@contextlib.contextmanager
def sqs_server(log_path: pathlib.Path) -> cabc.Iterator[SqsServer]:
    """MiniStack when ``make faults`` installed it (or it is asked for), else moto."""
    wanted = os.environ.get(SERVER_VARIABLE, "").strip().lower()
    if wanted == "ministack" or (wanted != "moto" and MINISTACK.exists()):
        with ministack(log_path) as started:
            yield started
    else:
        with moto_server(log_path) as endpoint:
            yield SqsServer(endpoint, "moto")


def make_client(endpoint: str) -> SQSClient:
    """A client for the test itself (producing, inspecting), straight to the server."""
    return local_sqs_client(endpoint, attempts=5, read_timeout=60, pool=16)


def make_s3_client(endpoint: str) -> t.Any:
    """An S3 client of the fake account, straight to ``endpoint``."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=FAKE_AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
    )


# -- jobs ------------------------------------------------------------------------


class Kind(enum.StrEnum):
    """What a job is, and so what must become of it."""

    WORK = "work"
    FLAKY = "flaky"
    NON_RETRYABLE = "non_retryable"
    ALWAYS_FAIL = "always_fail"
    EXIT = "exit"
    #: A ``work`` job with unreadable attributes and an invalid ``run_at``.
    BAD_ATTRIBUTES = "bad_attributes"
    #: A ``work`` job with a 200 KB payload.
    BIG = "big"
    NOT_JSON = "not_json"
    NOT_AN_OBJECT = "not_an_object"
    BAD_JOB_TYPE = "bad_job_type"
    BAD_PAYLOAD = "bad_payload"
    DEEP_NESTING = "deep_nesting"
    UNKNOWN_TYPE = "unknown_type"


class Fate(enum.Enum):
    RUN = "ran at least once, or sits in the dead-letter queue"
    DEAD_LETTER = "sits in the dead-letter queue"
    GONE = "left the queue (deleted, or in the dead-letter queue)"
    HELD = "still in the queue, invisible (unknown job type)"


FATES = {
    Kind.WORK: Fate.RUN,
    Kind.FLAKY: Fate.RUN,
    Kind.NON_RETRYABLE: Fate.RUN,
    Kind.BAD_ATTRIBUTES: Fate.RUN,
    Kind.BIG: Fate.RUN,
    Kind.ALWAYS_FAIL: Fate.DEAD_LETTER,
    Kind.EXIT: Fate.DEAD_LETTER,
    Kind.NOT_JSON: Fate.GONE,
    Kind.NOT_AN_OBJECT: Fate.GONE,
    Kind.BAD_JOB_TYPE: Fate.GONE,
    Kind.BAD_PAYLOAD: Fate.GONE,
    Kind.DEEP_NESTING: Fate.GONE,
    Kind.UNKNOWN_TYPE: Fate.HELD,
}
#: Completed runs a job needs when nothing goes wrong (more are duplicates).
EXPECTED_RUNS = {Kind.FLAKY: 2}

#: The job mix of the poison scenario: kind -> share of the jobs.
POISON_MIX: dict[Kind, float] = {
    Kind.WORK: 0.70,
    Kind.FLAKY: 0.04,
    Kind.NON_RETRYABLE: 0.03,
    Kind.ALWAYS_FAIL: 0.03,
    Kind.EXIT: 0.02,
    Kind.BAD_ATTRIBUTES: 0.04,
    Kind.BIG: 0.02,
    Kind.NOT_JSON: 0.03,
    Kind.NOT_AN_OBJECT: 0.02,
    Kind.BAD_JOB_TYPE: 0.02,
    Kind.BAD_PAYLOAD: 0.02,
    Kind.DEEP_NESTING: 0.02,
    Kind.UNKNOWN_TYPE: 0.01,
}


@dataclasses.dataclass(frozen=True)
class Job:
    id: str
    kind: Kind
    body: str
    attributes: dict[str, t.Any] = dataclasses.field(default_factory=dict)


def _job_body(job_type: str, payload: dict[str, t.Any], **extra: t.Any) -> str:
    return json.dumps({"job_type": job_type, "payload": payload, **extra})


def make_job(job_id: str, kind: Kind, ms: int = 0) -> Job:
    """A job of ``kind``; its id can be read back from its body (:func:`job_id`)."""
    payload = {"id": job_id, "ms": ms}
    if kind in (Kind.WORK, Kind.FLAKY, Kind.NON_RETRYABLE, Kind.ALWAYS_FAIL):
        return Job(job_id, kind, _job_body(kind.value, payload))
    if kind is Kind.EXIT:
        return Job(job_id, kind, _job_body("exit", payload))
    if kind is Kind.BIG:
        return Job(job_id, kind, _job_body("work", {**payload, "pad": "é" * 100_000}))
    if kind is Kind.BAD_ATTRIBUTES:
        attributes = {
            "correlation_fields": {"DataType": "String", "StringValue": "{not json"},
            "traceparent": {"DataType": "String", "StringValue": "\u2603" * 50},
            "blob": {"DataType": "Binary", "BinaryValue": os.urandom(64)},
            "count": {"DataType": "Number", "StringValue": "12"},
        }
        body = _job_body("work", payload, run_at="not a date")
        return Job(job_id, kind, body, attributes)
    if kind is Kind.UNKNOWN_TYPE:
        return Job(job_id, kind, _job_body("no_such_handler", payload))
    if kind is Kind.NOT_JSON:
        return Job(job_id, kind, f'poison:{job_id} {{"job_type": work, 😱')
    if kind is Kind.NOT_AN_OBJECT:
        return Job(job_id, kind, json.dumps([f"poison:{job_id}", {"job_type": "work"}]))
    if kind is Kind.BAD_JOB_TYPE:
        return Job(job_id, kind, json.dumps({"job_type": 42, "payload": payload}))
    if kind is Kind.BAD_PAYLOAD:
        body = json.dumps({"job_type": "work", "payload": [job_id], "id": job_id})
        return Job(job_id, kind, body)
    if kind is Kind.DEEP_NESTING:
        depth = 50_000
        body = (
            f'{{"job_type": "work", "payload": {{"id": "{job_id}"}}, "x": '
            + "[" * depth
            + "]" * depth
            + "}"
        )
        return Job(job_id, kind, body)
    raise ValueError(kind)


def plain_jobs(
    prefix: str, count: int, ms: tuple[int, int], rng: random.Random
) -> list[Job]:
    """``count`` ``work`` jobs, each working a random ``ms`` range of milliseconds."""
    return [
        make_job(f"{prefix}-{i:05d}", Kind.WORK, rng.randint(*ms)) for i in range(count)
    ]


def poison_jobs(
    prefix: str, count: int, ms: tuple[int, int], rng: random.Random
) -> list[Job]:
    """``count`` jobs in the proportions of :data:`POISON_MIX`, shuffled by ``rng``."""
    kinds: list[Kind] = []
    for kind, share in POISON_MIX.items():
        kinds += [kind] * max(1, round(share * count))
    kinds = kinds[:count]
    kinds += [Kind.WORK] * (count - len(kinds))
    rng.shuffle(kinds)
    return [
        make_job(f"{prefix}-{i:05d}", kind, rng.randint(*ms))
        for i, kind in enumerate(kinds)
    ]


_POISON_ID = re.compile(r"poison:([\w-]+)")
_JSON_ID = re.compile(r'"id": "([\w-]+)"')


def job_id(body: str) -> str | None:
    """The job id a body of :func:`make_job` carries, or None."""
    match = _POISON_ID.search(body[:200]) or _JSON_ID.search(body[:200])
    if match:
        return match.group(1)
    try:
        data = json.loads(body)
        value = data["payload"]["id"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


# -- what the handlers recorded --------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Run:
    """One handler event: ``start`` or ``done``."""

    ev: str
    id: str
    kind: str
    pid: int
    t: float
    mid: str
    rc: int
    q: str


def read_runs(record_dir: pathlib.Path) -> list[Run]:
    """Every handler event of every worker process, in time order."""
    runs: list[Run] = []
    for path in sorted(record_dir.glob("runs-*.jsonl")):
        for line in path.read_text().splitlines():
            if line.endswith("}"):  # a line being written may be incomplete
                runs.append(Run(**json.loads(line)))
    runs.sort(key=lambda run: run.t)
    return runs


@dataclasses.dataclass
class Verdict:
    """How a scenario's jobs ended, compared with what each must become."""

    jobs: int
    lost: list[str]
    #: Completed runs beyond what each job needs (:data:`EXPECTED_RUNS`).
    duplicates: int
    duplicate_ids: list[str]
    dead_lettered: int
    #: Jobs of the RUN fate that ended in the dead-letter queue unrun.
    dead_lettered_unrun: list[str]
    #: Jobs found in the dead-letter queue more than once.
    dead_letter_copies: int

    def row(self) -> dict[str, t.Any]:
        return {
            "jobs": self.jobs,
            "lost": len(self.lost),
            "duplicate_runs": self.duplicates,
            "dead_lettered": self.dead_lettered,
        }


def verdict(
    jobs: cabc.Sequence[Job],
    runs: cabc.Sequence[Run],
    left: cabc.Sequence[MessageTypeDef],
    dead: cabc.Sequence[MessageTypeDef],
) -> Verdict:
    """Compare the queue's leftovers and dead letters with the handler records.

    ``left`` is what was drained from the queue (visible messages), ``dead``
    what was drained from its dead-letter queue.
    """
    done = collections.Counter(run.id for run in runs if run.ev == "done")
    left_ids = collections.Counter(job_id(m.get("Body", "")) for m in left)
    dead_ids = collections.Counter(job_id(m.get("Body", "")) for m in dead)
    lost: list[str] = []
    duplicate_ids: list[str] = []
    duplicates = 0
    unrun: list[str] = []
    for job in jobs:
        fate = FATES[job.kind]
        if fate is Fate.RUN:
            if not done[job.id] and not dead_ids[job.id]:
                lost.append(job.id)
            if not done[job.id] and dead_ids[job.id]:
                unrun.append(job.id)
            extra = done[job.id] - EXPECTED_RUNS.get(job.kind, 1)
            if extra > 0 and not dead_ids[job.id]:
                duplicates += extra
                duplicate_ids.append(job.id)
        elif (fate is Fate.DEAD_LETTER and not dead_ids[job.id]) or (
            fate is Fate.GONE and left_ids[job.id]
        ):
            lost.append(job.id)
    return Verdict(
        jobs=len(jobs),
        lost=lost,
        duplicates=duplicates,
        duplicate_ids=duplicate_ids,
        dead_lettered=sum(1 for job in jobs if dead_ids[job.id]),
        dead_lettered_unrun=unrun,
        dead_letter_copies=sum(n - 1 for n in dead_ids.values() if n > 1),
    )


# -- queues and workers -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class QueuePair:
    """A queue and its dead-letter queue."""

    name: str
    url: str
    dlq_name: str
    dlq_url: str


class Harness:
    """Queues on the server, workers behind the proxy, and the handler records.

    Always :meth:`close` it: workers are killed and reaped, queues deleted.
    """

    def __init__(
        self, server: SqsServer, proxy_endpoint: str, workdir: pathlib.Path
    ) -> None:
        self.server = server
        self.proxy_endpoint = proxy_endpoint
        self.client = make_client(server.endpoint)
        self.record_dir = workdir / "records"
        self.record_dir.mkdir(parents=True, exist_ok=True)
        self.workers: list[WorkerProcess] = []
        self._queues: list[str] = []

    def close(self) -> None:
        for worker in self.workers:
            worker.close()
        for url in reversed(self._queues):
            with contextlib.suppress(Exception):
                self.client.delete_queue(QueueUrl=url)
        self.client.close()

    # -- queues --

    def queue(
        self, prefix: str, *, visibility_timeout: int, max_receive_count: int = 5
    ) -> QueuePair:
        """Create a queue with a dead-letter queue (redrive policy)."""
        name = f"faults-{prefix}-{uuid.uuid4().hex[:8]}"
        dlq_url = create_queue(self.client, f"{name}-dlq")
        url = create_queue(
            self.client,
            name,
            visibility_timeout=visibility_timeout,
            dead_letter_url=dlq_url,
            max_receive_count=max_receive_count,
        )
        self._queues += [dlq_url, url]
        return QueuePair(name, url, f"{name}-dlq", dlq_url)

    def send(self, url: str, jobs: cabc.Sequence[Job]) -> None:
        """Send the jobs' raw bodies (batches of ten, within 1 MiB a request)."""
        batch: list[SendMessageBatchRequestEntryTypeDef] = []
        size = 0
        for job in jobs:
            entry: SendMessageBatchRequestEntryTypeDef = {
                "Id": str(len(batch)),
                "MessageBody": job.body,
            }
            if job.attributes:
                entry["MessageAttributes"] = t.cast(t.Any, job.attributes)
            job_size = len(job.body.encode()) + 1024
            if batch and (len(batch) == 10 or size + job_size > 900_000):
                self._send_batch(url, batch)
                batch, size = [], 0
                entry["Id"] = "0"
            batch.append(entry)
            size += job_size
        if batch:
            self._send_batch(url, batch)

    def _send_batch(
        self, url: str, entries: list[SendMessageBatchRequestEntryTypeDef]
    ) -> None:
        response = self.client.send_message_batch(QueueUrl=url, Entries=entries)
        failed = response.get("Failed", [])
        assert not failed, f"sending jobs failed: {failed}"

    def counts(self, url: str) -> tuple[int, int, int]:
        """(visible, in flight, delayed) messages on the queue."""
        return queue_counts(self.client, url)

    def wait_until_settled(
        self,
        url: str,
        timeout: float,
        *,
        remaining: int = 0,
        check: cabc.Callable[[], None] | None = None,
    ) -> None:
        """Wait until the queue holds ``remaining`` messages (three polls in a row).

        ``check`` runs on every poll (e.g. that no worker died).
        """
        streak = 0

        def settled() -> bool:
            nonlocal streak
            if check is not None:
                check()
            streak = streak + 1 if sum(self.counts(url)) == remaining else 0
            return streak >= 3

        wait_until(
            settled,
            timeout,
            lambda: (
                f"{url} to hold {remaining} messages; it holds"
                f" (visible, in flight, delayed) = {self.counts(url)}"
            ),
            interval=0.5,
        )

    def drain(self, url: str) -> list[MessageTypeDef]:
        """Receive every visible message of the queue (hidden for 10 minutes)."""
        seen: dict[str, MessageTypeDef] = {}
        empty = 0
        while empty < 2:
            messages = self.client.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=600,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            for message in messages:
                seen[message["MessageId"]] = message
            empty = 0 if messages else empty + 1
        return list(seen.values())

    # -- workers --

    def worker_env(self, queues: cabc.Mapping[str, QueuePair]) -> dict[str, str]:
        inherited = {
            k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FLASK_"))
        }
        return {
            **inherited,
            **FAKE_AWS_ENV,
            "PYTHONUNBUFFERED": "1",
            "FAULT_APP_ENDPOINT": self.proxy_endpoint,
            "FAULT_APP_QUEUES": json.dumps(
                {logical: {"name": q.name} for logical, q in queues.items()}
            ),
            "FAULT_APP_RECORD_DIR": str(self.record_dir),
        }

    def start_worker(
        self,
        queues: cabc.Mapping[str, QueuePair],
        *,
        concurrency: int = 2,
        args: cabc.Sequence[str] = (),
        env: cabc.Mapping[str, str] | None = None,
        wait: bool = True,
        direct: bool = False,
    ) -> WorkerProcess:
        """Start ``flask sqs-worker`` for the fault app; wait for ``worker_started``.

        ``direct`` connects it to the server itself instead of the proxy.
        """
        command = [
            sys.executable,
            "-m",
            "flask",
            "--app",
            APP,
            "sqs-worker",
            "--concurrency",
            str(concurrency),
            "--idle-wait",
            "1",
            *args,
        ]
        worker_env = self.worker_env(queues)
        if direct:
            worker_env["FAULT_APP_ENDPOINT"] = self.server.endpoint
        worker = WorkerProcess(command, env={**worker_env, **(env or {})}, cwd=ROOT)
        self.workers.append(worker)
        if wait:
            worker.wait_for("worker_started", timeout=60)
        return worker

    def runs(self) -> list[Run]:
        return read_runs(self.record_dir)

    def done_count(self) -> int:
        return sum(1 for run in self.runs() if run.ev == "done")


def events_of(
    workers: cabc.Iterable[WorkerProcess], name: str
) -> list[dict[str, t.Any]]:
    """Every log event named ``name`` of the given worker processes."""
    found: list[dict[str, t.Any]] = []
    for worker in workers:
        found += worker.find(name)
    return found


def stop(workers: cabc.Iterable[WorkerProcess], timeout: float = 60) -> list[int]:
    """SIGTERM every worker at once, then wait for each; return their statuses."""
    workers = list(workers)
    for worker in workers:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
    return [worker.wait(timeout) for worker in workers]


def assert_alive(workers: cabc.Iterable[WorkerProcess]) -> None:
    """Fail (with the output) when a worker process has exited."""
    for worker in workers:
        status = worker.returncode
        assert status is None, (
            f"worker {worker.pid} exited with {status}; output:\n{worker.output()}"
        )


def classify_duplicates(
    duplicate_ids: cabc.Iterable[str],
    runs: cabc.Iterable[Run],
    workers: cabc.Iterable[WorkerProcess],
    journal: cabc.Iterable[Exchange],
    visibility_timeout: float,
) -> tuple[list[str], list[str]]:
    """Split duplicate jobs into (explained by a fault, caused by the worker).

    A job that ran twice had its message delivered again while a worker still
    held it. That is explained by the faults when SQS made a call about the
    held delivery fail for good (a logged ``heartbeat_failed`` or
    ``delete_failed`` whose error does not mean "redelivered"), or when a
    request about it met a fault other than latency (throttling, an error, a
    reset, a dropped answer) within the visibility timeout before the
    redelivery. Otherwise the worker let the visibility run out by itself:
    latency below the visibility timeout is no excuse.
    """
    workers = list(workers)
    messages: dict[str, set[str]] = collections.defaultdict(set)
    for run in runs:
        messages[run.id].add(run.mid)
    excused: set[str] = set()
    for event in events_of(workers, "heartbeat_failed"):
        if not event.get("ownership_lost"):
            excused.add(str(event.get("message_id")))
    for event in events_of(workers, "job_finished"):
        if event.get("outcome") == "delete_failed" and not event.get("ownership_lost"):
            excused.add(str(event.get("message_id")))
    # Each delivery: (message id, when received, receipt handle), in time order.
    exchanges = sorted(journal, key=lambda exchange: exchange.at)
    deliveries: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    faulted: dict[str, list[float]] = collections.defaultdict(list)
    for exchange in exchanges:
        for message in (exchange.response or {}).get("Messages", []):
            deliveries[str(message.get("MessageId"))].append(
                (exchange.at, str(message.get("ReceiptHandle")))
            )
        if exchange.fault is not None and exchange.fault not in LATENCY_FAULTS:
            for receipt in receipts_of(exchange.request):
                faulted[receipt].append(exchange.arrived)
    for mid, received in deliveries.items():
        for (_, receipt), (again, _) in itertools.pairwise(received):
            if any(again - visibility_timeout < at < again for at in faulted[receipt]):
                excused.add(mid)
    explained: list[str] = []
    unexplained: list[str] = []
    for job in duplicate_ids:
        (explained if messages[job] & excused else unexplained).append(job)
    return explained, unexplained


def timeline(
    job: str,
    runs: cabc.Iterable[Run],
    workers: cabc.Iterable[WorkerProcess],
    journal: cabc.Iterable[Exchange],
) -> str:
    """Everything known about one job, in time order: to explain a failure."""
    journal = list(journal)
    runs = [run for run in runs if run.id == job]
    messages = {run.mid for run in runs}
    receipts: dict[str, str] = {}
    for exchange in journal:
        for message in (exchange.response or {}).get("Messages", []):
            if message.get("MessageId") in messages:
                receipts[str(message.get("ReceiptHandle"))] = str(message["MessageId"])
    lines: list[tuple[float, str]] = [
        (run.t, f"record {run.ev} pid={run.pid} rc={run.rc} mid={run.mid}")
        for run in runs
    ]
    for worker in workers:
        mine = [e for e in list(worker.events) if e.get("message_id") in messages]
        for event in mine:
            fields = {k: v for k, v in event.items() if k not in ("timestamp", "level")}
            lines.append((log_time(event), f"log pid={worker.pid} {fields}"))
    for exchange in journal:
        handles = receipts_of(exchange.request)
        ours = [receipts[h][:8] + "/" + h[-6:] for h in handles if h in receipts]
        received = [
            m.get("MessageId")
            for m in (exchange.response or {}).get("Messages", [])
            if m.get("MessageId") in messages
        ]
        if ours or received:
            lines.append(
                (
                    exchange.at,
                    f"proxy {exchange.action} fault={exchange.fault} status="
                    f"{exchange.status} handles={ours} received={received}",
                )
            )
    lines.sort()
    start = lines[0][0] if lines else 0.0
    return "\n".join(f"{at - start:8.3f}s {text}" for at, text in lines)


def receipts_of(request: cabc.Mapping[str, t.Any]) -> list[str]:
    """The receipt handles a request names (single or batch)."""
    if "ReceiptHandle" in request:
        return [str(request["ReceiptHandle"])]
    entries = request.get("Entries", [])
    return [str(e.get("ReceiptHandle")) for e in entries if isinstance(e, dict)]
