"""The worker's row in the store: registered at start, refreshed, removed at stop.

Between refreshes its thread does the hourly housekeeping
(:mod:`._housekeeping`): old job records, expired keys and lost workers'
rows, pruned by one worker of the fleet at a time.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt
import importlib.metadata
import os
import secrets
import socket
import threading
import time
import typing as t

import structlog

from ...engine.model import loggable_text
from ...engine.ops import count_store_error
from ..model import JobRecords
from ..model import JobStore
from ..model import WorkerRecord
from ..model import WorkerRegistry
from ._housekeeping import Housekeeping
from ._housekeeping import STEP_SECONDS

if t.TYPE_CHECKING:
    from ...engine.flow import LimitStore
    from ...engine.worker import JobWorker

log = structlog.get_logger(__name__)

#: How often a worker refreshes its row (seconds).
REFRESH_SECONDS = 15.0
#: A row not refreshed for this long is shown as lost (seconds).
STALE_AFTER_SECONDS = 60.0
#: How often a worker prunes old job records (seconds).
PRUNE_SECONDS = 3600.0
#: The pause between two steps of pruning (seconds): as long as a step, so the
#: database spends at most half its time on pruning.
PRUNE_PAUSE_SECONDS = STEP_SECONDS


#: The store part a failed housekeeping action is counted under.
_STORE_PARTS = {"prune": "job_records", "forget_keys": "idempotency"}
#: ``SQS_JOBS_LOST_WORKER_RETENTION_SECONDS``' default: a day.
LOST_WORKER_RETENTION_SECONDS = 86400


def package_version() -> str:
    try:
        return importlib.metadata.version("flask-sqs-jobs")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


class WorkerPresence:
    """Keep this worker's row in the store while it runs (a worker service).

    :param busy_slots: reads the worker's running jobs at each refresh.
    :param records: the job records to prune, or None (no pruning).
    :param forget_expired_keys: deletes expired idempotency and unique keys, returns
        how many, or None (the store's TTL does it, or it keeps none).
    :param limits: the store's limits, which hold the housekeeping lease.
    :param on_error: called with each failed store call's error, on this
        service's thread (the app's hooks: ``worker_error``, kind ``"store"``).

    Started and stopped by ``flask sqs-worker`` around its worker; its thread
    is the only one that touches the worker's row, so it takes no lock.

    Cost per worker: one write every ``refresh_seconds`` (two when the row
    was gone and is registered again) and, about ten times per
    ``prune_seconds``, one try for the housekeeping lease; the fleet's one
    holder prunes in batches. A failed call never stops the worker: it is
    logged, counted and reported, and a failed refresh is followed at once
    by a register.
    """

    name = "worker_presence"

    def __init__(
        self,
        registry: WorkerRegistry,
        *,
        queues: cabc.Sequence[str],
        concurrency: int,
        busy_slots: cabc.Callable[[], int],
        records: JobRecords | None = None,
        forget_expired_keys: cabc.Callable[[], int] | None = None,
        limits: LimitStore | None = None,
        retention_seconds: float = 604800,
        lost_worker_retention_seconds: float = LOST_WORKER_RETENTION_SECONDS,
        refresh_seconds: float = REFRESH_SECONDS,
        prune_seconds: float = PRUNE_SECONDS,
        on_error: cabc.Callable[[BaseException], None] | None = None,
    ) -> None:
        self._on_error = on_error
        host = socket.gethostname()
        pid = os.getpid()
        self.worker_id = f"{host}:{pid}:{secrets.token_hex(4)}"
        self._registry = registry
        self._busy_slots = busy_slots
        self._refresh_seconds = refresh_seconds
        self._housekeeping = Housekeeping(
            registry,
            holder=self.worker_id,
            attempt=self._attempt,
            records=records,
            forget_expired_keys=forget_expired_keys,
            limits=limits,
            retention=dt.timedelta(seconds=retention_seconds),
            lost_retention=dt.timedelta(seconds=lost_worker_retention_seconds),
            every_seconds=prune_seconds,
        )
        self._started = _now()
        self._row = WorkerRecord(
            worker_id=self.worker_id,
            host=host,
            pid=pid,
            queues=tuple(queues),
            concurrency=concurrency,
            busy_slots=0,
            started_at=self._started,
            last_seen_at=self._started,
            version=package_version(),
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; it registers the worker, then refreshes its row."""
        self._thread = threading.Thread(
            target=self._run, name="sqs-jobs-worker-presence", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, then remove the row (a failure is logged only).

        A worker killed without ``stop`` leaves its row; the dashboard shows
        it lost after :data:`STALE_AFTER_SECONDS`.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._housekeeping.stop()
        self._attempt("remove", self._registry.remove, self.worker_id)

    def _run(self) -> None:
        """Register, then every ``refresh_seconds`` refresh the row (registering
        again when it was gone, or the last try failed); housekeep in between
        (:mod:`._housekeeping`), in short steps while it prunes."""
        registered = self._attempt("register", self._register)
        refreshed = time.monotonic()
        while not self._stop.wait(
            PRUNE_PAUSE_SECONDS if self._housekeeping.busy else self._refresh_seconds
        ):
            now = _now()
            if time.monotonic() - refreshed >= self._refresh_seconds:
                refreshed = time.monotonic()
                if registered:
                    busy = self._busy_slots()
                    registered = bool(
                        self._attempt(
                            "refresh", self._registry.refresh, self.worker_id, busy, now
                        )
                    )
                if not registered:
                    registered = self._attempt("register", self._register)
            self._housekeeping.step(now)

    def _register(self) -> bool:
        now = _now()
        self._registry.register(
            WorkerRecord(
                **{
                    **self._row.__dict__,
                    "busy_slots": self._busy_slots(),
                    "last_seen_at": now,
                }
            )
        )
        return True

    def _attempt(
        self, action: str, func: cabc.Callable[..., object], *args: object
    ) -> object:
        """Call ``func``; a failure is logged and counted, and None returned."""
        try:
            return func(*args)
        except Exception as exc:
            count_store_error(_STORE_PARTS.get(action, "workers"))
            log.warning(
                "worker_registry_failed",
                action=action,
                error_type=type(exc).__name__,
                error=loggable_text(str(exc)),
            )
            if self._on_error is not None:
                self._on_error(exc)
            return None


def presence_of(
    store: JobStore | None,
    worker: JobWorker,
    *,
    queue_names: list[str],
    concurrency: int,
    record_jobs: bool,
    retention_seconds: int,
    lost_worker_retention_seconds: int = LOST_WORKER_RETENTION_SECONDS,
    on_error: cabc.Callable[[BaseException], None] | None = None,
) -> list[WorkerPresence]:
    """A :class:`WorkerPresence` for ``worker``, or none without a store.

    :param record_jobs: whether job records are kept (and so pruned).

    Called by ``flask sqs-worker`` while it assembles its services; the
    store's parts are made here, on the command's thread, before the
    service's thread starts.
    """
    if store is None:
        return []
    return [
        WorkerPresence(
            store.worker_registry(),
            queues=queue_names,
            concurrency=concurrency,
            busy_slots=lambda: worker.busy_slots,
            records=store.job_records(retention_seconds=retention_seconds)
            if record_jobs
            else None,
            forget_expired_keys=_key_forgetting(store),
            limits=_limits_of(store),
            retention_seconds=retention_seconds,
            lost_worker_retention_seconds=lost_worker_retention_seconds,
            on_error=on_error,
        )
    ]


def _key_forgetting(store: t.Any) -> cabc.Callable[[], int] | None:
    """The store's way to delete expired idempotency and unique keys, if any."""
    forgets = []
    for part in ("idempotency_keys", "unique_keys"):
        try:
            keys = getattr(store, part)()
        except (NotImplementedError, AttributeError):
            continue
        forget = getattr(keys, "forget_expired", None)
        if callable(forget):
            forgets.append(forget)
    if not forgets:
        return None
    return lambda: sum(forget() for forget in forgets)


def _limits_of(store: JobStore) -> LimitStore | None:
    """The store's limits, which hold the housekeeping lease, if it has any."""
    try:
        return store.limits()
    except (NotImplementedError, AttributeError):
        return None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
