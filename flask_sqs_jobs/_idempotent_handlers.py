"""Idempotent handlers in the Flask layer: their options, and the store they need."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from .engine._handlers import check_idempotency
from .engine._handlers import DEFAULT_IDEMPOTENCY_TTL_SECONDS
from .engine._handlers import JOB_TYPE_SCOPE
from .engine._handlers import JobHandler
from .engine._handlers import KeyFunc
from .store._base import JobStore

NEEDS_A_STORE = (
    "idempotent handlers ({names}) need a job store for their keys: set"
    " SQS_JOBS_STORE_URL (e.g. 'sqlite:///instance/jobs.db') or pass"
    " SQSJobs(store=...), then run `flask sqs-jobs store init`"
)


def handler_options(
    job_type: str,
    idempotent: object,
    idempotency_key: object,
    idempotency_ttl_seconds: object,
    idempotency_scope: object = JOB_TYPE_SCOPE,
) -> dict[str, t.Any]:
    """Check ``@jobs.handler``'s idempotency arguments; return JobHandler's."""
    if not isinstance(idempotent, bool):
        raise TypeError(
            f"@jobs.handler({job_type!r}): idempotent must be True or False;"
            f" got {idempotent!r}"
        )
    try:
        check_idempotency(idempotency_key, idempotency_ttl_seconds, idempotency_scope)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"@jobs.handler({job_type!r}): {exc}") from None
    plain = not idempotent and idempotency_key is None
    for name, value, default in (
        (
            "idempotency_ttl_seconds",
            idempotency_ttl_seconds,
            DEFAULT_IDEMPOTENCY_TTL_SECONDS,
        ),
        ("idempotency_scope", idempotency_scope, JOB_TYPE_SCOPE),
    ):
        if plain and value != default:
            raise ValueError(
                f"@jobs.handler({job_type!r}): {name} only applies to idempotent"
                " handlers; add idempotent=True or idempotency_key=..."
            )
    return {
        "idempotent": idempotent or idempotency_key is not None,
        "idempotency_key": t.cast("KeyFunc | None", idempotency_key),
        "idempotency_ttl_seconds": idempotency_ttl_seconds,
        "idempotency_scope": idempotency_scope,
    }


def idempotent_job_types(handlers: cabc.Mapping[str, JobHandler]) -> list[str]:
    return sorted(name for name, handler in handlers.items() if handler.idempotent)


def missing_store_error(handlers: cabc.Mapping[str, JobHandler]) -> str | None:
    """The one-line error when idempotent handlers have no store, else None."""
    names = idempotent_job_types(handlers)
    if not names:
        return None
    return NEEDS_A_STORE.format(names=", ".join(map(repr, names)))


def worker_store_options(
    store: JobStore | None, handlers: cabc.Mapping[str, JobHandler]
) -> dict[str, t.Any]:
    """``JobWorker``'s ``idempotency_keys`` and ``session_factory`` from a store."""
    if store is None:
        error = missing_store_error(handlers)
        if error is not None:
            raise ValueError(error)
        return {}
    options: dict[str, t.Any] = {"session_factory": getattr(store, "session", None)}
    if idempotent_job_types(handlers):
        options["idempotency_keys"] = store.idempotency_keys()
    return options


def eager_store_options(
    store: JobStore | None, handlers: cabc.Mapping[str, JobHandler]
) -> dict[str, t.Any]:
    """As :func:`worker_store_options`; without a store, idempotency is off."""
    return {} if store is None else worker_store_options(store, handlers)
