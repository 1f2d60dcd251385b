"""The after-commit helper against random transactions: a stateful property test.

A state machine drives one world of ``after_commit_worlds`` through random
sequences of enqueue, begin_nested, release, rollback to the savepoint,
commit, rollback and close, and keeps a model of the transactions: each
open transaction (the outermost, then its savepoints) with the jobs
enqueued in it. The property, checked whenever the session's outermost
transaction ends and at the end: the jobs that reached SQS (or ran, eager)
are exactly those whose outermost transaction committed, each once, and
the app rows the database kept are those same jobs'. For eager mode and
``enqueue_after_commit``, whose sends happen in the caller's thread,
nothing may arrive before its commit either, at any step.

The planted bug, the old helper (``old_after_commit.py``) that hands
everything on when a savepoint is released, must fail the same machine.
"""

from __future__ import annotations

import collections
import typing as t

import pytest
import sqlalchemy.orm
from hypothesis import HealthCheck
from hypothesis import Phase
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition
from hypothesis.stateful import rule
from hypothesis.stateful import RuleBasedStateMachine
from hypothesis.stateful import run_state_machine_as_test

from tests.store.after_commit_worlds import holder_module
from tests.store.after_commit_worlds import SESSIONS
from tests.store.after_commit_worlds import USERS
from tests.store.after_commit_worlds import World
from tests.store.old_after_commit import FiresOnRelease

if t.TYPE_CHECKING:
    from mypy_boto3_sqs.client import SQSClient

SETTINGS = settings(
    max_examples=40,
    stateful_step_count=50,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
#: The planted bug's search: until the first failure, which is not shrunk
#: (any failing sequence releases a savepoint; shrinking it costs a minute).
FIND_THE_BUG = settings(
    SETTINGS, max_examples=300, phases=[Phase.explicit, Phase.generate]
)


#: What the random sequences must have come to, for the property to say much.
CASES = (
    "a released savepoint held jobs",
    "a rolled back savepoint held jobs",
    "a commit with savepoints open sent jobs",
    "a rollback dropped jobs",
    "a close dropped jobs",
)


class Transactions(RuleBasedStateMachine):
    """One session's transactions, against a model of what each one holds."""

    #: Makes the world each run drives (set by :func:`machine`).
    make_world: t.ClassVar[t.Callable[[], World]]
    #: How often each case that matters came up, over every run of the class.
    seen: t.ClassVar[collections.Counter[str]]

    def __init__(self) -> None:
        super().__init__()
        self.world = type(self).make_world()
        #: The jobs of each open transaction: the outermost first, then each
        #: savepoint inside the one before it; [] when none is open.
        self.open: list[list[int]] = []
        self.savepoints: list[sqlalchemy.orm.SessionTransaction] = []
        self.committed: list[int] = []
        self.next_job = 0

    @rule(jobs=st.integers(1, 3))
    def enqueue(self, jobs: int) -> None:
        """Enqueue ``jobs`` jobs (each with its app row) in the current transaction."""
        if not self.open:
            self.open.append([])  # the session begins a transaction
        for _ in range(jobs):
            self.world.enqueue(self.next_job)
            self.open[-1].append(self.next_job)
            self.next_job += 1
        self.check_nothing_early()

    @rule()
    def begin_nested(self) -> None:
        self.savepoints.append(self.world.session.begin_nested())
        if not self.open:
            self.open.append([])  # the outermost transaction begins with it
        self.open.append([])

    @precondition(lambda self: self.savepoints)
    @rule(how=st.sampled_from(["release", "rollback"]))
    def end_savepoint(self, how: str) -> None:
        """Release the innermost savepoint, or roll back to it."""
        savepoint, held = self.savepoints.pop(), self.open.pop()
        if how == "release":
            savepoint.commit()
            self.seen["a released savepoint held jobs"] += bool(held)
            self.open[-1].extend(held)
        else:
            savepoint.rollback()
            self.seen["a rolled back savepoint held jobs"] += bool(held)
        self.check_nothing_early()

    @rule(how=st.sampled_from(["commit", "rollback", "close"]))
    def end(self, how: str) -> None:
        """End the outermost transaction: ``session.commit()``, ``rollback()`` or
        ``close()``."""
        getattr(self.world.session, how)()
        held = [job for jobs in self.open for job in jobs]
        if how == "commit":
            self.seen["a commit with savepoints open sent jobs"] += bool(
                held and len(self.open) > 1
            )
            self.committed.extend(held)
        else:
            self.seen[f"a {how} dropped jobs"] += bool(held)
        self.ended()

    def ended(self) -> None:
        self.open, self.savepoints = [], []
        assert self.world.arrived(settled=True) == sorted(self.committed)
        assert self.world.committed_rows() == sorted(self.committed)

    def check_nothing_early(self) -> None:
        assert self.world.arrived(settled=False) == sorted(self.committed)

    def teardown(self) -> None:
        try:
            self.end("rollback")
        finally:
            self.world.close()


def machine(user: str, session_kind: str, sqs: SQSClient) -> type[Transactions]:
    """The state machine for one user of the helper and one kind of session."""
    return type(
        f"Transactions_{user}_{session_kind}",
        (Transactions,),
        {
            "make_world": staticmethod(lambda: World(user, session_kind, sqs)),
            "seen": collections.Counter(),
        },
    )


@pytest.mark.parametrize("session_kind", SESSIONS)
@pytest.mark.parametrize("user", USERS)
def test_only_what_the_outermost_commit_commits_is_sent_each_once(
    sqs: SQSClient, user: str, session_kind: str
) -> None:
    transactions = machine(user, session_kind, sqs)
    run_state_machine_as_test(transactions, settings=SETTINGS)

    # The sequences tried came to every case the property is about.
    assert sorted(transactions.seen) == sorted(CASES), transactions.seen
    assert all(transactions.seen.values()), transactions.seen


#: Users whose sends rest on the helper alone. The outbox's send after commit
#: also looks its rows up in the database before sending (SQLite: under the
#: write lock; PostgreSQL: with row locks), so a row the caller has not
#: committed is never found, whatever the helper hands on.
HELPER_ONLY = tuple(user for user in USERS if user != "outbox")


@pytest.mark.parametrize("user", HELPER_ONLY)
def test_the_old_helper_fails_the_same_machine(
    sqs: SQSClient, user: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, attribute = holder_module(user)
    old = FiresOnRelease.like(getattr(module, attribute))
    monkeypatch.setattr(module, attribute, old)

    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(machine(user, "session", sqs), settings=FIND_THE_BUG)

    steps = "\n".join(getattr(failure.value, "__notes__", []))
    assert "end_savepoint(how='release')" in steps, steps


def test_the_outbox_sends_nothing_uncommitted_even_with_the_old_helper(
    sqs: SQSClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, attribute = holder_module("outbox")
    old = FiresOnRelease.like(getattr(module, attribute))
    monkeypatch.setattr(module, attribute, old)

    run_state_machine_as_test(machine("outbox", "session", sqs), settings=SETTINGS)


@pytest.mark.parametrize(
    ("session_kind", "database"),
    [
        ("session", "sqlite"),
        ("flask_sqlalchemy", "sqlite"),
        ("session", "postgresql"),
    ],
)
@pytest.mark.parametrize("user", USERS)
def test_the_issue_sequence(
    sqs: SQSClient,
    user: str,
    session_kind: str,
    database: str,
    request: pytest.FixtureRequest,
) -> None:
    """enqueue, begin_nested, enqueue, release, rollback: nothing leaves; then
    the same with a commit: both jobs leave, once (PostgreSQL too)."""
    url = request.getfixturevalue("postgres_url") if database == "postgresql" else None
    world_class = type(
        "IssueSequence",
        (Transactions,),
        {
            "make_world": staticmethod(lambda: World(user, session_kind, sqs, url)),
            "seen": collections.Counter(),
        },
    )
    run = world_class()
    try:
        run.enqueue(1)
        run.begin_nested()
        run.enqueue(1)
        run.end_savepoint("release")
        run.end("rollback")
        assert run.world.arrived(settled=True) == []
        run.enqueue(1)
        run.begin_nested()
        run.enqueue(1)
        run.end_savepoint("release")
        run.end("commit")
        assert run.world.arrived(settled=True) == [2, 3]
    finally:
        run.teardown()
