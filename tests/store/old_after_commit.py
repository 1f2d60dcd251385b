"""The after-commit logic of the outbox and eager mode before the helper: a planted bug.

A copy, for the tests only, of what ``store/_outbox.py`` did (and, without
even the savepoint rollback, ``_outbox_enqueue.py``), behind the helper's
interface so it can stand in for :class:`AfterCommit`: it hands everything
on at SQLAlchemy's ``after_commit``, which also fires when a SAVEPOINT is
released, so a released savepoint's jobs leave before the transaction they
belong to has committed, and whatever it held before them with them.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import sqlalchemy as sa
import sqlalchemy.event
import sqlalchemy.orm
from flask_sqs_jobs.store.outbox import AfterCommit
from flask_sqs_jobs.store.outbox import AnySession
from flask_sqs_jobs.store.outbox import session_of

T = t.TypeVar("T")


class FiresOnRelease(t.Generic[T]):
    """Holds items until ``after_commit``: the old logic, fire on release included."""

    def __init__(
        self,
        name: str,
        run: cabc.Callable[[list[T]], object],
        dropped: cabc.Callable[[list[T]], object] | None = None,
    ) -> None:
        self.name = name
        self.run = run
        self.dropped = dropped
        self._key = f"tests.old_after_commit.{name}"

        def on_commit(session: sa.orm.Session) -> None:
            self.run([item for item, _ in session.info.pop(self._key, [])])

        def on_rollback(
            session: sa.orm.Session, previous: sa.orm.SessionTransaction
        ) -> None:
            # Forget the items of a savepoint rolled back (and of those inside it).
            if not previous.nested or self._key not in session.info:
                return
            session.info[self._key] = [
                entry
                for entry in session.info[self._key]
                if not _within(entry[1], previous)
            ]

        def on_end(session: sa.orm.Session, ended: sa.orm.SessionTransaction) -> None:
            if ended.parent is None:
                session.info.pop(self._key, None)

        self._listeners: tuple[tuple[str, cabc.Callable[..., None]], ...] = (
            ("after_commit", on_commit),
            ("after_soft_rollback", on_rollback),
            ("after_transaction_end", on_end),
        )

    @classmethod
    def like(cls, helper: AfterCommit[T]) -> FiresOnRelease[T]:
        """The old logic for what ``helper`` holds, with its ``run`` and ``dropped``."""
        return cls(helper.name, helper.run, helper.dropped)

    def hold(self, session: AnySession, item: T) -> None:
        target = session_of(session)
        if not target.in_transaction():
            target.begin()
        pending = target.info.setdefault(self._key, [])
        pending.append((item, target.get_nested_transaction()))
        if not sa.event.contains(target, "after_commit", self._listeners[0][1]):
            for event, listener in self._listeners:
                sa.event.listen(target, event, listener)


def _within(
    savepoint: sa.orm.SessionTransaction | None, ended: sa.orm.SessionTransaction
) -> bool:
    while savepoint is not None:
        if savepoint is ended:
            return True
        savepoint = savepoint.parent
    return False
