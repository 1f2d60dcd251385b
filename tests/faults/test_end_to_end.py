"""(g) The whole system under attack: a shop on gunicorn and PostgreSQL, three workers.

Clients create orders over HTTP while the scenario kills web workers between
commit and send, kills worker processes mid-job, restarts PostgreSQL, and the
proxies reset, throttle and delay SQS and S3. Afterwards every invariant of
``tests/faults/invariants.py`` must hold; the table is printed at the end of
the run. See docs/reliability.md.
"""

from __future__ import annotations

import collections
import contextlib
import datetime as dt
import pathlib
import random
import time
import uuid

import pytest
import sqlalchemy as sa
from flask_sqs_jobs.store import SQLAlchemyStore

from tests.integration.helpers import wait_until
from tests.integration.servers import moto_server
from tests.postgres import fresh_database
from tests.postgres import postgres_server

from . import invariants
from . import shop_app
from .conftest import Report
from .conftest import Tables
from .harness import Harness
from .harness import make_s3_client
from .harness import sized
from .harness import SqsServer
from .proxy import FaultProxy
from .shop import Clients
from .shop import injected
from .shop import Shop
from .shop import storm

VISIBILITY_TIMEOUT = 10


def _minute_boundaries(start: float, end: float) -> list[dt.datetime]:
    """The whole minutes strictly after ``start`` and at or before ``end``."""
    first = int(start // 60 + 1) * 60
    return [
        dt.datetime.fromtimestamp(s, dt.UTC) for s in range(first, int(end) + 1, 60)
    ]


@pytest.mark.timeout(1800)
def test_the_whole_system_keeps_its_promises(
    server: SqsServer, tmp_path: pathlib.Path, report: Report, tables: Tables
) -> None:
    rng = random.Random(22)
    load_seconds = sized(75, 330)
    restarts_due = sized(2, 6)
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(postgres_server())
        store_url = fresh_database(cluster.url)
        s3_endpoint = stack.enter_context(moto_server(tmp_path / "s3.log"))
        sqs_proxy = stack.enter_context(FaultProxy(server.endpoint, seed=7))
        s3_proxy = stack.enter_context(FaultProxy(s3_endpoint, seed=8))
        harness = Harness(server, sqs_proxy.endpoint, tmp_path)
        stack.callback(harness.close)
        queues = {
            name: harness.queue(
                f"e2e-{name}",
                visibility_timeout=VISIBILITY_TIMEOUT,
                max_receive_count=10,
            )
            for name in ("orders", "bulk")
        }
        # The test's own connections outlive the restarts: each is checked first.
        store = SQLAlchemyStore(sa.create_engine(store_url, pool_pre_ping=True))
        store.create_tables()
        shop_app.metadata.create_all(store.engine)
        bucket = f"e2e-{uuid.uuid4().hex[:8]}"
        s3 = make_s3_client(s3_endpoint)
        s3.create_bucket(Bucket=bucket)
        shop = Shop(
            sqs=sqs_proxy,
            s3=s3_proxy,
            store_url=store_url,
            bucket=bucket,
            queues=queues,
            workdir=tmp_path,
        )
        stack.callback(shop.close)
        started = time.monotonic()
        shop.start()
        ready_at = time.time()
        clients = Clients(shop.port, count=3, seed=rng.randrange(1 << 30))
        clients.start()

        # The faults, at random moments of the load (not synchronisation).
        kills: list[int] = []
        restarts = 0
        storms = 0
        end = time.monotonic() + load_seconds
        restart_at = sorted(
            rng.uniform(0.1, 0.9) * load_seconds for _ in range(restarts_due)
        )
        # One restart begins just before a minute: every scheduler's claim of
        # that tick fails, and the tick must still run once.
        boundary = _minute_boundaries(time.time() + 5, time.time() + load_seconds - 5)
        if boundary:
            restart_at[0] = boundary[0].timestamp() - 0.3 - time.time()
            restart_at.sort()
        next_kill = time.monotonic() + rng.uniform(2, 6)
        next_storm = time.monotonic() + rng.uniform(1, 4)
        rules: list[tuple[float, FaultProxy, object]] = []
        while time.monotonic() < end:
            shop.check()
            now = time.monotonic()
            for rule_end, proxy, rule in list(rules):
                if now >= rule_end:
                    proxy.remove(rule)  # type: ignore[arg-type]
                    rules.remove((rule_end, proxy, rule))
            if restart_at and now - (end - load_seconds) >= restart_at[0]:
                restart_at.pop(0)
                cluster.restart()
                restarts += 1
            elif now >= next_kill:
                pid = shop.kill_mid_job(rng)
                if pid is not None:
                    kills.append(pid)
                    next_kill = now + rng.uniform(3, 8)
            elif now >= next_storm:
                s3_storm = rng.random() < 0.4
                proxy = s3_proxy if s3_storm else sqs_proxy
                rules.append(
                    (now + rng.uniform(2, 5), proxy, storm(rng, proxy, s3=s3_storm))
                )
                storms += 1
                next_storm = now + rng.uniform(2, 6)
            time.sleep(0.1)  # the loop's pace
        clients.stop()
        sqs_proxy.clear()
        s3_proxy.clear()
        load_end = time.time()
        ticks_due = _minute_boundaries(ready_at + 1, load_end)

        state: dict[str, object] = {}

        def settled_once() -> bool:
            shop.check()
            queued = {n: harness.counts(q.url) for n, q in queues.items()}
            with store.engine.connect() as connection:
                pending = connection.execute(
                    sa.text("SELECT count(*) FROM sqs_jobs_outbox")
                ).scalar_one()
                done = set(
                    connection.execute(
                        sa.select(shop_app.effects.c.subject).where(
                            shop_app.effects.c.kind == "tick"
                        )
                    ).scalars()
                )
            missing = [
                tick.isoformat() for tick in ticks_due if tick.isoformat() not in done
            ]
            state.update(queued=queued, outbox_rows=pending, ticks_missing=missing)
            return not any(map(sum, queued.values())) and not pending and not missing

        streak = 0

        def settled() -> bool:
            nonlocal streak
            streak = streak + 1 if settled_once() else 0
            return streak >= 3

        def unsettled() -> str:
            ticks = [
                {k: e.get(k) for k in ("event", "tick", "error", "timestamp")}
                for w in [*shop.all_workers(), *shop.retired]
                for e in list(w.events)
                if str(e.get("event", "")).startswith("schedule")
            ]
            return f"the queues, the outbox and the ticks to settle: {state}; {ticks}"

        wait_until(settled, 480, unsettled, 1.0)
        statuses = shop.stop()
        dead = [
            f"{m.get('Body', '')[:160]} {m.get('MessageAttributes', {})}"
            for q in queues.values()
            for m in harness.drain(q.dlq_url)
        ]
        seen = invariants.observe(store_url, dead, ticks_due)
        last_done = {run.id: run.pid for run in shop.runs() if run.ev == "done"}
        killed = set(kills)
        checked = invariants.check(
            clients.orders,
            seen,
            store,
            {job for job, pid in last_done.items() if pid in killed},
        )
        left_in_s3 = s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0)
        store.engine.dispose()

    text = invariants.table(checked)
    tables("g: the whole system, end to end", text)
    orders = collections.Counter((o.mode, o.answer) for o in clients.orders)
    report(
        "g: the whole system, end to end",
        server=server.kind,
        orders=len(clients.orders),
        committed=len(seen.orders),
        by_mode_and_answer={f"{m}/{a}": n for (m, a), n in sorted(orders.items())},
        big_orders=sum(1 for o in clients.orders if o.big),
        web_workers_killed_after_commit=sum(
            1 for o in clients.orders if o.crash and o.answer == "no_answer"
        ),
        worker_processes_killed_mid_job=len(kills),
        postgres_restarts=restarts,
        fault_storms=storms,
        faults=injected({"sqs": sqs_proxy, "s3": s3_proxy}),
        handler_runs=shop.runs_started(),
        ticks=len(ticks_due),
        s3_objects_left=left_in_s3,
        seconds=round(time.monotonic() - started, 1),
    )
    assert all(i.holds for i in checked), "\n" + text
    assert statuses == [0] * len(statuses), statuses
    assert restarts == restarts_due
    assert kills, "no worker process was killed mid-job"
