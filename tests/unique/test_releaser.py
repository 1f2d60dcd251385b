"""The releaser: keys freed off the jobs' path, in batches, failures reported."""

from __future__ import annotations

import threading
import typing as t

from flask_sqs_jobs.engine.unique._releaser import Releaser

from tests.engine.helpers import WAIT


class Keys:
    """A store's keys that records each batch, and fails when told to."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.fail = fail
        self.gate = threading.Event()
        self.gate.set()

    def release_many(self, pairs: t.Sequence[tuple[str, str]]) -> None:
        self.gate.wait(WAIT)
        if self.fail:
            raise RuntimeError("store down")
        self.batches.append(list(pairs))


def test_every_submitted_key_is_freed_by_the_flush() -> None:
    keys = Keys()
    keys.gate.clear()  # the first batch waits, so the others queue up
    releaser = Releaser(lambda: t.cast(t.Any, keys), lambda error: None)
    for n in range(250):
        releaser.submit(f"k{n}", f"j{n}")
    keys.gate.set()

    assert releaser.flush(WAIT)
    freed = [pair for batch in keys.batches for pair in batch]
    assert freed == [(f"k{n}", f"j{n}") for n in range(250)]
    assert max(len(batch) for batch in keys.batches) <= 100
    assert len(keys.batches) < 250  # batched, not one call per key


def test_a_failed_release_is_reported_and_the_releaser_goes_on() -> None:
    keys = Keys(fail=True)
    errors: list[BaseException] = []
    releaser = Releaser(lambda: t.cast(t.Any, keys), errors.append)
    releaser.submit("k", "j")
    assert releaser.flush(WAIT)
    keys.fail = False
    releaser.submit("k2", "j2")
    assert releaser.flush(WAIT)

    assert [str(error) for error in errors] == ["store down"]
    assert keys.batches == [[("k2", "j2")]]


def test_synchronous_frees_in_the_callers_thread() -> None:
    keys = Keys()
    releaser = Releaser(
        lambda: t.cast(t.Any, keys), lambda error: None, synchronous=True
    )
    releaser.submit("k", "j")
    assert keys.batches == [[("k", "j")]]
