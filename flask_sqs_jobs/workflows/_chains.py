"""Chains: steps sent one after another, each when the one before succeeded.

:class:`Chain` is what ``jobs.chain(...)`` declares; :meth:`Chain.enqueue`
writes the chain's row and its first step's outbox row in one transaction.
:func:`record_step` moves the chain on from a step's final outcome, in the
transaction that writes the next step's outbox row: only the step the row
names (its job id) moves it, so a redelivered step moves it once. A failed
step stops the chain (``failed``, naming the step); that step's later
success (a redrive) resumes it.
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

import sqlalchemy as sa

from ..engine.model import JSONObject
from ..engine.model import new_job_id
from ..engine.producing import check_json
from ..store.sql import chains_table as chains
from ._signature import CHAIN_FIELD
from ._signature import send_signature
from ._signature import Signature
from ._signature import STEP_FIELD
from ._store import in_transaction
from ._store import now

RESULT_ARGUMENT = "previous_result"
RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"


@dataclasses.dataclass(frozen=True)
class EnqueuedChain:
    """A chain written (its first step sent once the transaction commits)."""

    chain_id: str
    #: The first step's job id.
    job_id: str


class Chain:
    """Steps run one after another: ``jobs.chain(a.s(...), b.s(...))``.

    With ``pass_result=True`` each step after the first gets the previous
    step's JSON result as ``previous_result=`` (never a ``task.si`` step).
    """

    def __init__(
        self, jobs: t.Any, steps: cabc.Sequence[Signature], *, pass_result: bool
    ) -> None:
        steps = list(steps)
        if not steps:
            raise ValueError("a chain needs at least one step")
        for index, step in enumerate(steps):
            if not isinstance(step, Signature):
                raise TypeError(
                    f"step {index} must be a Signature (task.s(...)); got"
                    f" {type(step).__name__}"
                )
            passed = pass_result and index > 0 and not step.immutable
            step.check_complete(
                f"step {index}", supplied=[RESULT_ARGUMENT] if passed else []
            )
        self.jobs = jobs
        self.steps = steps
        self.pass_result = bool(pass_result)

    def enqueue(self, *, session: t.Any = None) -> EnqueuedChain:
        """Write the chain and send its first step when ``session`` commits.

        Without ``session`` it is written in a transaction of its own.
        """
        return in_transaction(self.jobs, session, self._write)

    def _write(self, session: t.Any) -> EnqueuedChain:
        chain_id, job_id = new_job_id(), new_job_id()
        session.execute(
            sa.insert(chains).values(
                chain_id=chain_id,
                status=RUNNING,
                steps=[step.as_json() for step in self.steps],
                pass_result=self.pass_result,
                current_step=0,
                current_job_id=job_id,
                job_ids=[job_id],
                created_at=now(),
            )
        )
        _send_step(self.jobs, session, chain_id, 0, self.steps[0], job_id, None)
        return EnqueuedChain(chain_id, job_id)


def _send_step(
    jobs: t.Any,
    session: t.Any,
    chain_id: str,
    index: int,
    step: Signature,
    job_id: str,
    extra: JSONObject | None,
) -> None:
    send_signature(
        jobs,
        step,
        session=session,
        extra=extra,
        job_id=job_id,
        correlation_fields={CHAIN_FIELD: chain_id, STEP_FIELD: index},
    )


def record_step(
    jobs: t.Any,
    session: t.Any,
    chain_id: str,
    index: int,
    job_id: str,
    *,
    succeeded: bool,
    result: object = None,
    error: str | None = None,
) -> None:
    """Move the chain on from step ``index``'s final outcome, in ``session``.

    A success sends the next step (or ends the chain); a failure stops it.
    Only the step the chain waits on, by job id, moves it. Nothing is
    committed here.
    """
    c = chains.c
    row = session.execute(
        sa.select(c.steps, c.pass_result, c.job_ids).where(
            c.chain_id == chain_id,
            c.current_step == index,
            c.current_job_id == job_id,
            c.status.in_([RUNNING, FAILED]),
        )
    ).one_or_none()
    if row is None:
        return
    waiting = sa.and_(
        c.chain_id == chain_id,
        c.current_step == index,
        c.current_job_id == job_id,
        c.status.in_([RUNNING, FAILED]),
    )
    if not succeeded:
        session.execute(
            sa.update(chains)
            .where(waiting, c.status == RUNNING)
            .values(status=FAILED, failed_step=index, error=error)
        )
        return
    steps = [Signature.from_json(s) for s in row.steps]
    if index + 1 >= len(steps):
        session.execute(
            sa.update(chains)
            .where(waiting)
            .values(status=SUCCEEDED, failed_step=None, error=None, finished_at=now())
        )
        return
    step, next_id = steps[index + 1], new_job_id()
    extra = None
    if row.pass_result and not step.immutable:
        try:
            check_json("the result passed to the next step", result)
        except (TypeError, ValueError) as exc:
            session.execute(
                sa.update(chains)
                .where(waiting)
                .values(status=FAILED, failed_step=index, error=str(exc))
            )
            return
        extra = {RESULT_ARGUMENT: result}
    moved = session.execute(
        sa.update(chains)
        .where(waiting)
        .values(
            status=RUNNING,
            current_step=index + 1,
            current_job_id=next_id,
            job_ids=[*row.job_ids, next_id],
            failed_step=None,
            error=None,
        )
    )
    if moved.rowcount == 1:
        _send_step(jobs, session, chain_id, index + 1, step, next_id, extra)
