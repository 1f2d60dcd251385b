"""Keep job payloads out of Sentry events (``SentryMiddleware(send_payloads=False)``).

It does not import sentry-sdk: only ``contrib/sentry.py`` does.

sentry-sdk records the local variables of every frame of an exception by
default (``include_local_variables=True``). The library's own frames hold the
job, its payload and the message body; the handler's frames hold the payload
and what was taken from it. Two event processors remove them:

- one on each job's isolation scope, for events captured while the job runs;
- one on the global scope, for events captured later about a job's exception
  (e.g. by a logging integration when the worker logs the failure).

Both drop the variables of frames inside ``flask_sqs_jobs``, drop ``payload``
keys from contexts and extra, and replace any string of the event that
contains a payload value (of at least :data:`MIN_SECRET_LENGTH` characters)
with ``[Filtered]``.

:meta private:
"""

from __future__ import annotations

import collections.abc as cabc
import contextlib
import json
import threading
import typing as t

from ..engine.model import Job

#: What replaces a removed value.
FILTERED = "[Filtered]"
#: Payload values shorter than this are not searched for (too common to tell).
MIN_SECRET_LENGTH = 4

Event: t.TypeAlias = dict[str, t.Any]
Needles: t.TypeAlias = frozenset[str]

#: The attribute of a handler exception that holds its job's payload values
#: (built-in exceptions cannot be weakly referenced, so no WeakKeyDictionary).
_NEEDLES_ATTRIBUTE = "_flask_sqs_jobs_payload_values"
_installed = False
_install_lock = threading.Lock()


def needles_of(job: Job) -> Needles:
    """Every payload value (strings and numbers, as they may be rendered)."""
    found: set[str] = set()
    _collect(job.payload, found)
    variants = set()
    for value in found:
        variants.update(
            {value, repr(value)[1:-1], json.dumps(value)[1:-1], json.dumps(value)}
        )
    return frozenset(v for v in variants if len(v) >= MIN_SECRET_LENGTH)


def _collect(value: object, found: set[str]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str | int | float):
        found.add(str(value))
    elif isinstance(value, cabc.Mapping):
        for item in value.values():
            _collect(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, found)


def remember(error: BaseException, needles: Needles) -> None:
    """Scrub ``needles`` from later events about ``error``."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, _NEEDLES_ATTRIBUTE, needles)


def job_processor(needles: Needles) -> cabc.Callable[[Event, t.Any], Event]:
    """The event processor of one job's isolation scope."""

    def process(event: Event, hint: t.Any) -> Event:
        return scrub(event, needles | _hinted(hint))

    return process


def install_global_processor(
    add_event_processor: cabc.Callable[[t.Any], None],
) -> None:
    """Add the global scope's processor with ``add_event_processor``, once."""
    global _installed
    with _install_lock:
        if _installed:
            return
        add_event_processor(_global_processor)
        _installed = True


def _global_processor(event: Event, hint: t.Any) -> Event:
    return scrub(event, _hinted(hint))


def _hinted(hint: t.Any) -> Needles:
    """The needles of the job whose exception the event is about, if any."""
    if not isinstance(hint, cabc.Mapping):
        return frozenset()
    exc_info = hint.get("exc_info")
    if exc_info is None and hint.get("log_record") is not None:
        exc_info = getattr(hint["log_record"], "exc_info", None)
    error = exc_info[1] if isinstance(exc_info, tuple) and len(exc_info) > 1 else None
    found: set[str] = set()
    while isinstance(error, BaseException) and len(found) < 10_000:
        found.update(getattr(error, _NEEDLES_ATTRIBUTE, ()))
        error = error.__cause__ or error.__context__
    return frozenset(found)


def scrub(event: Event, needles: Needles) -> Event:
    """Remove the library's frame variables and every payload value from ``event``."""
    for frame in _frames(event):
        module = frame.get("module") or ""
        if isinstance(module, str) and module.startswith("flask_sqs_jobs"):
            frame.pop("vars", None)
    for key in ("contexts", "extra"):
        section = event.get(key)
        if isinstance(section, dict):
            section.pop("payload", None)
            for value in section.values():
                if isinstance(value, dict):
                    value.pop("payload", None)
    if needles:
        _redact(event, needles)
    return event


def _frames(event: Event) -> cabc.Iterator[dict[str, t.Any]]:
    traces: list[object] = [event.get("stacktrace")]
    for key in ("exception", "threads"):
        section = event.get(key)
        values = section.get("values") if isinstance(section, dict) else None
        for value in values if isinstance(values, list) else []:
            if isinstance(value, dict):
                traces.append(value.get("stacktrace"))
    for trace in traces:
        frames = trace.get("frames") if isinstance(trace, dict) else None
        for frame in frames if isinstance(frames, list) else []:
            if isinstance(frame, dict):
                yield frame


def _redact(value: t.Any, needles: Needles) -> t.Any:
    if isinstance(value, str):
        return FILTERED if any(n in value for n in needles) else value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return FILTERED if str(value) in needles else value
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _redact(item, needles)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _redact(item, needles)
    return value
