"""Refuse, at enqueue, a job type the app registers no handler for."""

from __future__ import annotations

import collections.abc as cabc
import difflib

from .engine.model import loggable_text

#: Registered job types named in the error, at most.
_LISTED = 20


def check_known_job_type(job_type: object, handlers: cabc.Collection[str]) -> None:
    """Raise ``ValueError`` when ``job_type`` has no handler among ``handlers``.

    Nothing is checked when the app registers no handler at all (it only
    produces) or when ``job_type`` is not a str (the engine's own check says
    what is wrong with it).

    :raises ValueError: naming the close matches, the registered job types and
        ``SQS_JOBS_CHECK_JOB_TYPES``.
    """
    if not handlers or not isinstance(job_type, str) or job_type in handlers:
        return
    known = sorted(handlers)
    close = difflib.get_close_matches(job_type, known, n=3)
    hint = (
        f" Did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
    )
    listed = ", ".join(repr(name) for name in known[:_LISTED])
    if len(known) > _LISTED:
        listed += f", ... ({len(known)} in all)"
    raise ValueError(
        f"no handler is registered for job type '{loggable_text(job_type, 200)}'."
        f"{hint} Registered job types: {listed}. To enqueue jobs that another"
        " service's worker handles, set SQS_JOBS_CHECK_JOB_TYPES = False."
    )


def check_known_job_types(
    specs: cabc.Sequence[object], handlers: cabc.Collection[str]
) -> None:
    """:func:`check_known_job_type` for each job of an ``enqueue_many`` call."""
    for index, spec in enumerate(specs):
        if isinstance(spec, cabc.Mapping):
            try:
                check_known_job_type(spec.get("job_type"), handlers)
            except ValueError as exc:
                raise ValueError(f"jobs[{index}]: {exc}") from None
