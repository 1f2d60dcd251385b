"""Schedule ticks in ``sqs_jobs_schedule_ticks``: one row per tick a worker claimed.

A tick is claimed by inserting its row; the primary key (schedule, tick) lets
one worker win. The job's outbox row is written in the same transaction, so
the claim and the job commit together or not at all.
"""

from __future__ import annotations

import collections.abc as cabc
import datetime as dt

import sqlalchemy as sa
import sqlalchemy.exc
import sqlalchemy.orm

from ._tables import schedule_ticks as table

#: Writes the tick's job (its outbox row) in the claim's session.
WriteJob = cabc.Callable[[sa.orm.Session], object]


class SQLScheduleTicks:
    """The ticks of periodic jobs, claimed once however many workers run.

    Made by :meth:`SQLAlchemyStore.schedule_ticks` for the periodic
    scheduler (its ``SqlClaims``); safe to share between threads (each call
    uses a session of its own). With hundreds of workers firing the same tick,
    each tries one ``INSERT``; all but one fail on the primary key and write
    nothing more, so the cost is one round trip per worker and tick.
    """

    def __init__(self, session: cabc.Callable[[], sa.orm.Session]) -> None:
        self._session = session

    def claim(
        self,
        schedule: str,
        tick: dt.datetime,
        job_id: str,
        write_job: WriteJob,
        *,
        keep: dt.timedelta,
    ) -> bool:
        """Claim ``tick`` of ``schedule`` and write its job in one transaction.

        Returns False when another worker claimed it first (nothing is
        written). Ticks of the schedule older than ``keep`` before this one
        are forgotten in the same transaction.

        Three statements in one transaction: the tick's ``INSERT``, whatever
        ``write_job`` writes (the job's outbox row) and the ``DELETE`` of old
        ticks. On PostgreSQL a second claimer waits for the first to commit
        (then fails) or roll back (then wins); on SQLite ``BEGIN IMMEDIATE``
        serialises them.

        :raises sqlalchemy.exc.SQLAlchemyError: any failure but the key's
            conflict (rolled back: no tick, no job); the scheduler logs
            ``schedule_fire_failed`` and goes on to the schedule's next tick.
        """
        with self._session() as session:
            try:
                with session.begin():
                    session.execute(
                        table.insert().values(
                            schedule=schedule,
                            tick=tick,
                            job_id=job_id,
                            claimed_at=dt.datetime.now(dt.UTC),
                        )
                    )
                    write_job(session)
                    session.execute(
                        table.delete().where(
                            table.c.schedule == schedule, table.c.tick < tick - keep
                        )
                    )
            except sa.exc.IntegrityError:
                return False
        return True

    def last_claimed(self, schedule: str) -> dt.datetime | None:
        """The latest tick of ``schedule`` any worker claimed, if any.

        One ``SELECT max(tick)`` on the primary key; the scheduler reads it at
        start to know which ticks it missed (``catch_up``).
        """
        with self._session() as session:
            query = sa.select(sa.func.max(table.c.tick)).where(
                table.c.schedule == schedule
            )
            value = session.execute(query).scalar()
        if value is None:
            return None
        # max() loses the column's type on SQLite: read it back the same way.
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        return value.replace(tzinfo=value.tzinfo or dt.UTC).astimezone(dt.UTC)
