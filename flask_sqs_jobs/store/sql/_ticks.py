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

    Made by :meth:`SQLAlchemyStore.schedule_ticks`; safe to share between
    threads (each call uses a session of its own).
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
        """The latest tick of ``schedule`` any worker claimed, if any."""
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
