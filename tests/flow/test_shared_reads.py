"""SharedReads: jobs arriving together read their tombstones in one store call."""

from __future__ import annotations

import threading
import time

import pytest
from flask_sqs_jobs.engine.flow._shared_reads import SharedReads


class Store:
    """A set of present keys whose reads can be held until released."""

    def __init__(self, present: set[str]) -> None:
        self.present = present
        self.reads: list[list[str]] = []
        self.hold = threading.Event()
        self.hold.set()
        self.reading = threading.Event()
        self.fail_next = False

    def read_many(self, keys: list[str]) -> set[str]:
        self.reads.append(keys)
        self.reading.set()
        assert self.hold.wait(30), "the test never released the read"
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("store down")
        return self.present & set(keys)


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def _ask_all(
    reads: SharedReads, keys: list[str], results: dict[str, object]
) -> list[threading.Thread]:
    def ask(key: str) -> None:
        try:
            results[key] = reads.contains(key)
        except Exception as exc:
            results[key] = exc

    threads = [threading.Thread(target=ask, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    return threads


def test_callers_that_come_during_a_read_share_the_next_one() -> None:
    store = Store({"job-3", "job-7"})
    reads = SharedReads(store.read_many)
    store.hold.clear()
    results: dict[str, object] = {}
    first = _ask_all(reads, ["job-0"], results)
    assert store.reading.wait(30)
    others = _ask_all(reads, [f"job-{n}" for n in range(1, 10)], results)
    _until(lambda: len(reads._waiting) == 9, "the other callers never queued")
    store.hold.set()
    for thread in first + others:
        thread.join(30)
    assert results == {f"job-{n}": n in (3, 7) for n in range(10)}
    assert store.reads == [["job-0"], [f"job-{n}" for n in range(1, 10)]]


def test_a_key_present_only_after_a_read_began_is_seen_by_a_later_caller() -> None:
    store = Store(set())
    reads = SharedReads(store.read_many)
    store.hold.clear()
    results: dict[str, object] = {}
    first = _ask_all(reads, ["job-1"], results)
    assert store.reading.wait(30)
    store.present.add("job-2")  # cancelled while the first read travels
    later = _ask_all(reads, ["job-2"], results)
    _until(lambda: len(reads._waiting) == 1, "the later caller never queued")
    store.hold.set()
    for thread in first + later:
        thread.join(30)
    assert results == {"job-1": False, "job-2": True}


def test_a_failed_read_fails_its_callers_and_the_next_read_works() -> None:
    store = Store({"job-1"})
    reads = SharedReads(store.read_many)
    store.fail_next = True
    with pytest.raises(ConnectionError, match="store down"):
        reads.contains("job-1")
    assert reads.contains("job-1") is True
    assert reads.contains("job-2") is False
    assert store.reads == [["job-1"], ["job-1"], ["job-2"]]


def test_many_threads_each_get_their_own_answer() -> None:
    present = {f"job-{n}" for n in range(0, 200, 3)}
    store = Store(present)
    reads = SharedReads(store.read_many)
    results: dict[str, object] = {}
    threads = _ask_all(reads, [f"job-{n}" for n in range(200)], results)
    for thread in threads:
        thread.join(30)
    assert results == {f"job-{n}": f"job-{n}" in present for n in range(200)}
    asked = [key for batch in store.reads for key in batch]
    assert sorted(asked) == sorted(results)  # each key read once
