"""Searching job records: the filters' checks, the same for every store."""

from __future__ import annotations

import datetime as dt

from ._records import JobSearch
from ._records import STATUSES
from ._records import StatusFilter

#: The most records one search returns.
MAX_SEARCH_LIMIT = 500
#: A tag, and a job type, as long as a record keeps them.
MAX_TAG_LENGTH = 64
MAX_JOB_TYPE_LENGTH = 255


def check_status(status: StatusFilter) -> frozenset[str] | None:
    """The statuses ``status`` names (None: any); refuse one no record can have."""
    if status is None:
        return None
    wanted = frozenset((status,) if isinstance(status, str) else status)
    for each in sorted(wanted):
        if each not in STATUSES:
            raise ValueError(
                f"unknown job status {each!r}; use one of {', '.join(STATUSES)}"
            )
    if not wanted:
        raise ValueError(f"no job status given; use one of {', '.join(STATUSES)}")
    return wanted


def job_search(
    tag: str | None = None,
    job_type: str | None = None,
    status: StatusFilter = None,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    limit: int = 50,
) -> JobSearch:
    """Check the filters of ``jobs.find_jobs`` and return them as a :class:`JobSearch`.

    :raises TypeError, ValueError: a filter is wrong; the message names it.
    """
    for name, text, longest in (
        ("tag", tag, MAX_TAG_LENGTH),
        ("job_type", job_type, MAX_JOB_TYPE_LENGTH),
    ):
        if text is None:
            continue
        if not isinstance(text, str):
            raise TypeError(f"{name} must be a str or None; got {type(text).__name__}")
        if not text or len(text) > longest:
            raise ValueError(f"{name} must be 1 to {longest} characters")
    for name, moment in (("since", since), ("until", until)):
        if moment is not None and (
            not isinstance(moment, dt.datetime) or moment.tzinfo is None
        ):
            raise ValueError(f"{name} must be an aware datetime (or None)")
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int; got {type(limit).__name__}")
    if not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise ValueError(f"limit must be 1 to {MAX_SEARCH_LIMIT}; got {limit}")
    return JobSearch(
        tag=tag,
        job_type=job_type,
        statuses=check_status(status),
        since=None if since is None else since.astimezone(dt.UTC),
        until=None if until is None else until.astimezone(dt.UTC),
        limit=limit,
    )
