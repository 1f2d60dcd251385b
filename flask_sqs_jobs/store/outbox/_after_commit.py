"""After commit: things held per session transaction, handed on by the outermost commit.

One helper for everything that must wait for the caller's transaction: the
outbox's send after commit, eager mode's ``enqueue(..., session=)`` and
``flask_sqs_jobs.contrib.sqlalchemy.enqueue_after_commit``. The rules:

- what is held belongs to the innermost transaction in progress: the
  savepoint (``begin_nested()``) if any, else the transaction itself; a
  session with no transaction begins one, so its rollback can drop it;
- a savepoint released (``commit()`` on it, or leaving its ``with`` block)
  is not a commit: what it held passes to the enclosing transaction;
- a savepoint rolled back drops what it held, and what its savepoints held;
- the outermost transaction's rollback, however it happens (``rollback()``,
  a failed ``commit()`` followed by ``rollback()``, ``close()``), drops
  everything;
- the outermost commit hands each held thing on exactly once, in the order
  they were held.

SQLAlchemy sends ``after_commit`` for a savepoint released as for a real
commit, so the helper never acts on that event alone: it notes which
transaction committed, and acts when that transaction ends
(``after_transaction_end``), by then knowing whether it was the outermost.
"""

from __future__ import annotations

import collections.abc as cabc
import typing as t

import sqlalchemy as sa
import sqlalchemy.event
import sqlalchemy.orm

#: A session, or a scoped session (Flask-SQLAlchemy's ``db.session``).
AnySession: t.TypeAlias = sa.orm.Session | sa.orm.scoped_session[t.Any]

T = t.TypeVar("T")

_STATE = "flask_sqs_jobs.after_commit"


class AfterCommit(t.Generic[T]):
    """Items held in sessions' transactions until the outermost commit.

    Contract: :meth:`hold` is called in the session's thread, inside or
    outside a transaction; once the outermost transaction commits,
    ``run`` gets that transaction's items of this holder, in order, inside
    ``Session.commit()`` after the database committed (an exception from it
    propagates out of ``commit()``; the session is usable). When a
    transaction ends without committing, ``dropped`` (if given) gets the
    items it took with it. Each user makes one holder at import time.

    :param name: names the holder in errors and ``session.info``.
    """

    def __init__(
        self,
        name: str,
        run: cabc.Callable[[list[T]], object],
        dropped: cabc.Callable[[list[T]], object] | None = None,
    ) -> None:
        self.name = name
        self.run = run
        self.dropped = dropped

    def hold(self, session: AnySession, item: T) -> None:
        """Hold ``item`` in ``session``'s innermost transaction (beginning one)."""
        target = session_of(session)
        if not target.in_transaction():
            # Without a transaction a rollback would be a no-op with no
            # event, and the item would leave with the next, unrelated commit.
            target.begin()
        transaction = target.get_nested_transaction() or target.get_transaction()
        assert transaction is not None
        _held(target).items.setdefault(transaction, []).append((self, item))

    def __repr__(self) -> str:
        return f"<AfterCommit {self.name!r}>"


def session_of(session: AnySession) -> sa.orm.Session:
    """The :class:`Session` behind ``session`` (a scoped session's current one)."""
    if isinstance(session, sa.orm.scoped_session):
        return t.cast(sa.orm.Session, session())
    return session


#: One thing held, with the holder it is for.
_Entry: t.TypeAlias = tuple[AfterCommit[t.Any], t.Any]


class _Held:
    """What one session holds, by transaction; only its own listeners touch it.

    Lives in ``session.info`` for the session's life, so it needs no lock:
    a session belongs to one thread at a time, and SQLAlchemy calls the
    listeners in that thread.
    """

    def __init__(self) -> None:
        self.items: dict[sa.orm.SessionTransaction, list[_Entry]] = {}
        #: The transaction whose ``after_commit`` fired and whose end is due.
        self.committed: sa.orm.SessionTransaction | None = None


def _held(session: sa.orm.Session) -> _Held:
    """The session's :class:`_Held`, made (and its listeners added) on first use.

    One pair of listeners per session serves every holder, so the order in
    which things were held is kept across holders too.
    """
    held = session.info.get(_STATE)
    if held is None:
        held = session.info[_STATE] = _Held()
        if not sa.event.contains(session, "after_transaction_end", _on_end):
            sa.event.listen(session, "after_commit", _on_commit)
            sa.event.listen(session, "after_transaction_end", _on_end)
    return t.cast(_Held, held)


def _on_commit(session: sa.orm.Session) -> None:
    """Note which transaction committed; its end decides what that means."""
    # Fired for the transaction committing now, which is the innermost one:
    # a savepoint being released, or the outermost transaction.
    held: _Held | None = session.info.get(_STATE)
    if held is not None:
        held.committed = session.get_nested_transaction() or session.get_transaction()


def _on_end(session: sa.orm.Session, transaction: sa.orm.SessionTransaction) -> None:
    """A transaction ended (committed, rolled back or closed): apply the rules.

    A transaction's savepoints always end before it does, so by now what
    they held has either passed to it (released) or gone (rolled back).
    """
    held: _Held | None = session.info.get(_STATE)
    if held is None:
        return  # the app cleared session.info: nothing is held any more
    committed = held.committed is transaction
    if committed:
        held.committed = None
    if transaction.parent is None:
        # The outermost transaction: everything held is in its tree.
        items = [entry for entries in held.items.values() for entry in entries]
        held.items.clear()
        held.committed = None
        if committed:
            _hand_on(items)
        else:
            _drop(items)
        return
    entries = held.items.pop(transaction, None)
    if not entries:
        return  # nothing held here (a flush's subtransaction, an empty savepoint)
    if committed:
        held.items.setdefault(_enclosing(transaction), []).extend(entries)
    else:
        _drop(entries)


def _enclosing(transaction: sa.orm.SessionTransaction) -> sa.orm.SessionTransaction:
    """The savepoint or outermost transaction around ``transaction``."""
    parent = t.cast(sa.orm.SessionTransaction, transaction.parent)
    while not parent.nested and parent.parent is not None:
        parent = parent.parent
    return parent


def _by_holder(
    entries: list[_Entry],
) -> dict[AfterCommit[t.Any], list[t.Any]]:
    """Each holder's items, in the order they were held."""
    grouped: dict[AfterCommit[t.Any], list[t.Any]] = {}
    for holder, item in entries:
        grouped.setdefault(holder, []).append(item)
    return grouped


def _hand_on(entries: list[_Entry]) -> None:
    """Run each holder on its items; every holder runs even if one raises."""
    error: BaseException | None = None
    for holder, items in _by_holder(entries).items():
        try:
            holder.run(items)
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error


def _drop(entries: list[_Entry]) -> None:
    """Tell each holder (that wants to know) what a transaction took with it."""
    for holder, items in _by_holder(entries).items():
        if holder.dropped is not None:
            holder.dropped(items)
