"""Times on the wire: ISO 8601 in UTC (``run_at``, ``expires_at``, ticks)."""

from __future__ import annotations

import datetime as dt


def format_utc(moment: dt.datetime) -> str:
    """Format an aware datetime as ISO 8601 in UTC (``...Z``), as the wire does."""
    return (
        moment.astimezone(dt.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def parse_run_at(value: str) -> dt.datetime | None:
    """Parse a ``run_at`` value into an aware UTC datetime, or None if invalid."""
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(dt.UTC)
    except OverflowError:
        # e.g. year 9999 at -14:00: valid ISO 8601, but past datetime.max in UTC.
        return None
