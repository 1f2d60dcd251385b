"""What must hold after the end-to-end scenario, read from the database and the queues.

:func:`check` compares what the clients were told (:class:`~.shop.Order`)
with the shop's tables, the job store's records and outbox, and the
dead-letter queues; :func:`table` prints the result, one invariant a row.
"""

from __future__ import annotations

import collections
import collections.abc as cabc
import dataclasses
import datetime as dt
import typing as t

import sqlalchemy as sa
from flask_sqs_jobs.store import SQLAlchemyStore

from . import shop_app
from .shop import Order


@dataclasses.dataclass
class Invariant:
    name: str
    #: How many things it was checked on.
    checked: int
    #: What breaks it (a few named), empty when it holds.
    broken: list[str]
    #: Not an invariant: a documented limit, counted (``checked``) so it shows.
    known_limit: bool = False
    #: Examples of a known limit.
    seen: list[str] = dataclasses.field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.broken


@dataclasses.dataclass
class Observed:
    """What the scenario left behind."""

    orders: dict[str, str]
    gifts: set[str]
    #: (subject, kind) -> the effects' (id, job id).
    effects: dict[tuple[str, str], list[tuple[int, str]]]
    outbox_rows: int
    #: What the dead-letter queues held: job id and reason of each.
    dead_letters: list[str]
    #: Every minute boundary the workers ran through, as ISO text.
    ticks_due: list[str]


def observe(
    store_url: str, dead_letters: list[str], ticks_due: cabc.Iterable[dt.datetime]
) -> Observed:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as connection:
            orders = dict(
                connection.execute(
                    sa.select(shop_app.orders.c.id, shop_app.orders.c.mode)
                ).all()
            )
            gifts = set(
                connection.execute(sa.select(shop_app.gifts.c.order_id)).scalars()
            )
            effects: dict[tuple[str, str], list[tuple[int, str]]] = (
                collections.defaultdict(list)
            )
            e = shop_app.effects.c
            for row in connection.execute(sa.select(e.id, e.subject, e.kind, e.job_id)):
                effects[(row.subject, row.kind)].append((row.id, row.job_id))
            outbox_rows = connection.execute(
                sa.text("SELECT count(*) FROM sqs_jobs_outbox")
            ).scalar_one()
    finally:
        engine.dispose()
    return Observed(
        orders,
        gifts,
        dict(effects),
        outbox_rows,
        dead_letters,
        [tick.isoformat() for tick in ticks_due],
    )


def _kinds(mode: str) -> tuple[str, ...]:
    return ("charge", "ship", "gift") if mode == "savepoint" else ("charge", "ship")


def check(
    placed: cabc.Sequence[Order],
    seen: Observed,
    store: SQLAlchemyStore,
    killed_after_run: cabc.Container[str],
) -> list[Invariant]:
    """Every invariant of the scenario, holding or not.

    ``killed_after_run``: the jobs whose last completed run was in a process
    SIGKILLed afterwards (its record's last write may have died with it).
    """
    records = store.job_records()
    found: list[Invariant] = []

    def add(name: str, items: cabc.Iterable[t.Any], bad: t.Any) -> None:
        items = list(items)
        found.append(Invariant(name, len(items), [str(i) for i in items if bad(i)]))

    answered = [o for o in placed if o.answer == "committed"]
    add(
        "orders answered 201 are committed", answered, lambda o: o.id not in seen.orders
    )
    # A killed web worker drops the connection; a request that failed
    # before its commit (the database restarting) is answered 500 instead.
    crashed = [o for o in placed if o.crash and o.answer == "no_answer"]
    add(
        "orders whose web worker was killed after commit are committed",
        crashed,
        lambda o: o.id not in seen.orders,
    )
    add(
        "orders rolled back on purpose left no row",
        [o for o in placed if o.mode == "rollback"],
        lambda o: o.id in seen.orders,
    )
    committed = sorted(seen.orders.items())
    add(
        "each committed order's effects applied exactly once",
        committed,
        lambda item: any(
            len(seen.effects.get((item[0], kind), [])) != 1 for kind in _kinds(item[1])
        ),
    )
    add(
        "no effect of a rolled-back transaction or savepoint",
        sorted(seen.effects),
        lambda key: (
            key[1] != "tick"
            and (
                key[0] not in seen.orders
                or (key[1] == "gift" and seen.orders[key[0]] != "savepoint")
            )
        ),
    )
    add(
        "a savepoint's row exactly when it was released",
        committed,
        lambda item: (item[0] in seen.gifts) != (item[1] == "savepoint"),
    )
    ticks = {key[0]: len(v) for key, v in seen.effects.items() if key[1] == "tick"}
    add(
        "every periodic tick applied once",
        sorted(set(seen.ticks_due) | set(ticks)),
        lambda tick: (
            ticks.get(tick, 0) != 1 and (tick in seen.ticks_due or ticks[tick] > 1)
        ),
    )
    expected = [
        (effects[0][0], f"{order}-{kind}")
        for order, mode in committed
        for kind in _kinds(mode)
        if len(effects := seen.effects.get((order, kind), [])) == 1
    ]

    wrong: list[str] = []
    lost: list[str] = []
    for effect_id, job_id in expected:
        record = records.get(job_id)
        if record is None:
            wrong.append(f"{job_id}: no record")
        elif record.status != "succeeded" or record.result != {"effect": effect_id}:
            text = (
                f"{job_id}: {record.status} {record.result} (effect {effect_id},"
                f" attempts {record.attempts}, error {record.error!r})"
            )
            # The last run's writes died with its process: the record keeps
            # the status written before them (running, or an earlier retry).
            unfinished = record.status in ("running", "retrying")
            left = unfinished and record.result is None
            (lost if left and job_id in killed_after_run else wrong).append(text)
    found.append(
        Invariant(
            "every job's record final and matching its effect",
            len(expected) - len(lost),
            wrong,
        )
    )
    found.append(
        Invariant(
            "records left unfinished: last write lost with a SIGKILLed worker",
            len(lost),
            [],
            known_limit=True,
            seen=lost,
        )
    )
    rolled_back = [
        f"{o.id}-{kind}"
        for o in placed
        if o.id not in seen.orders
        for kind in ("charge", "ship", "gift")
    ] + [f"{order}-gift" for order, mode in committed if mode == "savepoint_rollback"]
    add(
        "no record of a rolled-back job",
        rolled_back,
        lambda job_id: records.get(job_id) is not None,
    )
    add("outbox empty", [seen.outbox_rows], lambda rows: rows != 0)
    found.append(
        Invariant(
            "nothing parked (dead-letter queues empty)",
            len(seen.dead_letters),
            seen.dead_letters,
        )
    )
    return found


def table(invariants: cabc.Sequence[Invariant]) -> str:
    """The invariants as a text table: name, how many checked, broken, verdict."""
    width = max(len(i.name) for i in invariants)
    lines = [
        f"{'invariant':<{width}}  {'checked':>7}  {'broken':>6}  verdict",
        f"{'-' * width}  {'-' * 7}  {'-' * 6}  -------",
    ]
    for i in invariants:
        verdict = "holds" if i.holds else "BROKEN: " + ", ".join(i.broken[:5])
        if i.known_limit:
            verdict = "known limit (docs/job-records.md) " + ", ".join(i.seen[:3])
        lines.append(
            f"{i.name:<{width}}  {i.checked:>7}  {len(i.broken):>6}  {verdict}"
        )
    return "\n".join(lines)
