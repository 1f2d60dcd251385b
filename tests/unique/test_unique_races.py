"""100 enqueues of one unique key, from 8 threads in each of 2 processes: one is sent.

Each store decides the race itself (SQLite's write lock, PostgreSQL's primary
key, DynamoDB's conditional put); the enqueues start together on one event.
"""

from __future__ import annotations

import multiprocessing
import typing as t

import pytest

from tests.unique.racers import race_in_child

#: 2 processes of 8 threads each, 50 enqueues per process.
THREADS, PER_PROCESS = 8, 50


@pytest.fixture(params=["sqlite", "postgresql", "dynamodb"])
def where(request: pytest.FixtureRequest, tmp_path: t.Any) -> dict[str, str]:
    """Where the keys live, as a spawned process can reach it."""
    from flask_sqs_jobs.store import SQLAlchemyStore

    if request.param == "dynamodb":
        from tests.unique.racers import store_for

        endpoint = request.getfixturevalue("dynamodb_endpoint")
        spot = {"endpoint": endpoint, "table": request.getfixturevalue("table_name")}
        store_for(spot).create_tables()
        return spot
    url = (
        f"sqlite:///{tmp_path / 'jobs.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    store = SQLAlchemyStore(url)
    store.create_tables()
    store.close()
    return {"url": url}


def test_exactly_one_of_a_hundred_concurrent_enqueues_is_sent(
    where: dict[str, str],
) -> None:
    spawn = multiprocessing.get_context("spawn")
    ready, results, go = spawn.Queue(), spawn.Queue(), spawn.Event()
    sizes = {"a": PER_PROCESS, "b": PER_PROCESS}
    processes = [
        spawn.Process(
            target=race_in_child,
            args=(name, where, THREADS, total, ready, go, results),
        )
        for name, total in sizes.items()
    ]
    for process in processes:
        process.start()
    try:
        assert {ready.get(timeout=120) for _ in processes} == set(sizes)
        go.set()
        returned = dict(results.get(timeout=180) for _ in processes)
    finally:
        for process in processes:
            process.join(60)
    values = [value for name in sizes for value in returned[name]]
    ours = {
        f"{n}-{t}-{i}"
        for n, total in sizes.items()
        for t in range(THREADS)
        for i in range(total)  # a superset of each thread's ids
    }
    sent = [value for value in values if value not in ours]
    holders = {value for value in values if value in ours}

    assert len(values) == sum(sizes.values()) == 100
    assert len(sent) == 1
    assert len(holders) == 1  # every duplicate names the one job sent
