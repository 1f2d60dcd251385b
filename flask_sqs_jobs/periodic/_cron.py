"""Cron expressions in an IANA time zone, through ``cronsim`` (the ``periodic`` extra).

Standard five fields (minute, hour, day of month, month, day of week) with
``*``, lists, ranges, steps and the English month and day names. ``cronsim``
decides what a wall-clock time means across a daylight-saving change (see
``docs/periodic.md``); this module only checks, iterates and translates.
"""

from __future__ import annotations

import datetime as dt
import re
import typing as t
import zoneinfo

try:
    from cronsim import CronSim
    from cronsim import CronSimError
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        'periodic jobs need the "periodic" extra (cronsim):'
        ' pip install "flask-sqs-jobs[periodic]"'
    ) from exc

#: What a standard field may hold: numbers, names, ``* , - /``.
_STANDARD_FIELD = re.compile(r"[0-9A-Za-z*,/-]+")
_FIELD_NAMES = ("minute", "hour", "day of month", "month", "day of week")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_MONTH_NAMES = (
    "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()  # noqa: SIM905
)
_NAMES = re.compile("|".join((*_DAY_NAMES, *_MONTH_NAMES)))
#: The longest ScheduleExpression EventBridge Scheduler accepts.
_MAX_EXPRESSION = 256


class CronExpression:
    """A checked five-field cron expression evaluated in ``zone``.

    :raises ValueError: the expression or the zone is not valid; the message
        says what is wrong.
    """

    def __init__(self, expression: str, timezone: str = "UTC") -> None:
        if not isinstance(expression, str):
            raise ValueError(f"cron must be a str; got {type(expression).__name__}")
        fields = expression.split()
        if len(fields) != 5:
            raise ValueError(
                f"cron {expression!r} has {len(fields)} fields; standard cron has five:"
                " minute hour day-of-month month day-of-week, e.g. '0 3 * * *'"
            )
        for name, field in zip(_FIELD_NAMES, fields, strict=True):
            if not _STANDARD_FIELD.fullmatch(field) or re.search(
                "[A-Z]", _NAMES.sub("", field.upper())
            ):
                raise ValueError(
                    f"cron {expression!r}: the {name} field {field!r} is not standard"
                    " cron (use numbers, names, '*', ',', '-' and '/' only)"
                )
        self.expression = " ".join(field.upper() for field in fields)
        self.zone = zone_named(timezone)
        try:
            next(CronSim(self.expression, dt.datetime(2000, 1, 1, tzinfo=self.zone)))
        except CronSimError as exc:
            raise ValueError(f"cron {expression!r} is not valid: {exc}") from None
        except StopIteration:  # pragma: no cover - cronsim's own limit
            raise ValueError(f"cron {expression!r} never fires") from None
        self.timezone = timezone

    def next_after(self, moment: dt.datetime) -> dt.datetime:
        """The first tick strictly after ``moment`` (aware), in UTC."""
        start = moment.astimezone(self.zone)
        return next(CronSim(self.expression, start)).astimezone(dt.UTC)

    def latest_at_or_before(self, moment: dt.datetime) -> dt.datetime:
        """The last tick at or before ``moment`` (aware), in UTC."""
        start = (moment.replace(microsecond=0) + dt.timedelta(seconds=1)).astimezone(
            self.zone
        )
        return next(CronSim(self.expression, start, reverse=True)).astimezone(dt.UTC)

    def next_times(self, count: int, after: dt.datetime) -> list[dt.datetime]:
        """The next ``count`` ticks after ``after``, in UTC."""
        times: list[dt.datetime] = []
        moment = after
        for _ in range(count):
            moment = self.next_after(moment)
            times.append(moment)
        return times

    def eventbridge(self) -> str:
        """The expression in EventBridge Scheduler's six-field ``cron(...)`` syntax.

        One of day-of-month and day-of-week must be ``?`` there; days of the
        week are written as names (EventBridge numbers them 1-7 from Sunday).

        :raises ValueError: both day fields are restricted (standard cron then
            fires on either, which EventBridge cannot express).
        """
        minute, hour, dom, month, dow = self.expression.split()
        if dom != "*" and dow != "*":
            raise ValueError(
                f"cron {self.expression!r} restricts both the day of month and the day"
                " of week, which EventBridge Scheduler cannot express; split it into"
                " two schedules"
            )
        if dow == "*":
            dow = "?"
        else:
            days = {day % 7 for day in _expand(dow, 0, 7, _DAY_NAMES)}  # 7 is Sunday
            dom, dow = "?", ",".join(_DAY_NAMES[day] for day in sorted(days))
        fields = [
            _eventbridge_field(minute, 0, 59, ()),
            _eventbridge_field(hour, 0, 23, ()),
            _eventbridge_field(dom, 1, 31, ()),
            _eventbridge_field(month, 1, 12, _MONTH_NAMES),
            dow,
        ]
        text = f"cron({' '.join(fields)} *)"
        if len(text) > _MAX_EXPRESSION:
            raise ValueError(
                f"cron {self.expression!r} is too long once written for EventBridge"
                f" Scheduler ({len(text)} characters, at most {_MAX_EXPRESSION})"
            )
        return text


def zone_named(name: str) -> zoneinfo.ZoneInfo:
    """The IANA zone ``name``; a clear ``ValueError`` when it does not exist."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"timezone must be an IANA zone name; got {name!r}")
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone {name!r} is not an IANA time zone (e.g. 'UTC', 'Europe/Berlin');"
            ' on machines without system zone data, pip install "tzdata"'
        ) from None


_SIMPLE = re.compile(r"\*|\d+(-\d+)?(,\d+(-\d+)?)*")


def _eventbridge_field(field: str, low: int, high: int, names: t.Sequence[str]) -> str:
    """A field as is when EventBridge reads it the same way, else as a list."""
    if field == "?" or _SIMPLE.fullmatch(field):
        return field
    return ",".join(str(value) for value in sorted(_expand(field, low, high, names)))


def _expand(field: str, low: int, high: int, names: t.Sequence[str]) -> set[int]:
    """The values a (checked) cron field matches."""
    offset = 1 if names is _MONTH_NAMES else 0
    values: set[int] = set()

    def number(text: str) -> int:
        return names.index(text) + offset if text in names else int(text)

    for part in field.split(","):
        span, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            start, end = span.split("-")
            first, last = number(start), number(end)
        else:
            first = number(span)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return values
