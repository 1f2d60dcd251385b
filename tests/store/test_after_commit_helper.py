"""``AfterCommit`` on its own: what its holders get, and when."""

from __future__ import annotations

import collections.abc as cabc
import pathlib

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask_sqs_jobs.store.outbox import AfterCommit

from tests.store.after_commit_worlds import serializable_sqlite


class Recorder:
    """A holder's ``run`` and ``dropped``, writing down what each got."""

    def __init__(self, name: str) -> None:
        self.ran: list[list[str]] = []
        self.dropped: list[list[str]] = []
        self.helper: AfterCommit[str] = AfterCommit(
            name, self.ran.append, self.dropped.append
        )


@pytest.fixture
def session(tmp_path: pathlib.Path) -> cabc.Iterator[sa.orm.Session]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    serializable_sqlite(engine)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE rows (n INTEGER)")
    with sa.orm.Session(engine) as session:
        yield session
    engine.dispose()


def test_the_outermost_commit_hands_each_holder_its_items_in_order(
    session: sa.orm.Session,
) -> None:
    first, second = Recorder("first"), Recorder("second")
    first.helper.hold(session, "a")
    second.helper.hold(session, "x")
    with session.begin_nested():
        first.helper.hold(session, "b")
        with session.begin_nested():
            second.helper.hold(session, "y")
    first.helper.hold(session, "c")

    assert first.ran == second.ran == []
    session.commit()

    assert first.ran == [["a", "b", "c"]]
    assert second.ran == [["x", "y"]]
    assert first.dropped == second.dropped == []


def test_a_rolled_back_savepoint_drops_what_it_and_its_savepoints_held(
    session: sa.orm.Session,
) -> None:
    holder = Recorder("jobs")
    holder.helper.hold(session, "kept")
    outer = session.begin_nested()
    holder.helper.hold(session, "outer")
    with session.begin_nested():
        holder.helper.hold(session, "inner")
    outer.rollback()
    session.commit()

    assert holder.dropped == [["outer", "inner"]]
    assert holder.ran == [["kept"]]


@pytest.mark.parametrize("end", ["rollback", "close"])
def test_the_outermost_rollback_or_close_drops_everything(
    session: sa.orm.Session, end: str
) -> None:
    holder = Recorder("jobs")
    holder.helper.hold(session, "a")
    with session.begin_nested():
        holder.helper.hold(session, "b")
    getattr(session, end)()
    session.commit()

    assert holder.ran == []
    assert holder.dropped == [["a", "b"]]


def test_a_session_outside_a_transaction_begins_one_so_a_rollback_drops(
    session: sa.orm.Session,
) -> None:
    holder = Recorder("jobs")
    holder.helper.hold(session, "a")  # no SQL ran: the session had no transaction
    assert session.in_transaction()
    session.rollback()
    session.commit()

    assert holder.ran == []
    assert holder.dropped == [["a"]]


def test_a_failed_run_raises_out_of_commit_after_every_holder_ran(
    session: sa.orm.Session,
) -> None:
    def refuse(items: list[str]) -> None:
        raise ConnectionError(f"refused {items}")

    failing: AfterCommit[str] = AfterCommit("failing", refuse)
    holder = Recorder("jobs")
    failing.hold(session, "a")
    holder.helper.hold(session, "b")
    session.execute(sa.text("INSERT INTO rows (n) VALUES (1)"))

    with pytest.raises(ConnectionError, match=r"refused \['a'\]"):
        session.commit()

    assert holder.ran == [["b"]]
    assert session.execute(sa.text("SELECT n FROM rows")).scalars().all() == [1]
    holder.helper.hold(session, "c")
    session.commit()
    assert holder.ran == [["b"], ["c"]]


def test_each_commit_hands_on_only_its_own_items(session: sa.orm.Session) -> None:
    holder = Recorder("jobs")
    holder.helper.hold(session, "a")
    session.commit()
    session.commit()
    holder.helper.hold(session, "b")
    session.commit()

    assert holder.ran == [["a"], ["b"]]
