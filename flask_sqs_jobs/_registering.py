"""Registering handlers and schedules on :class:`~flask_sqs_jobs.SQSJobs`."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from .config import handler_options
from .engine.flow import check_limits
from .engine.flow import Limit
from .engine.model import DEFAULT_IDEMPOTENCY_TTL_SECONDS
from .engine.model import HandlerFunc
from .engine.model import JobHandler
from .engine.model import JSONObject
from .engine.model import Retry

if t.TYPE_CHECKING:
    from .periodic import Enqueuer
    from .periodic import Schedule

F = t.TypeVar("F", bound=HandlerFunc)


class Registering:
    """``handler``, ``periodic`` and ``schedule`` of the extension."""

    #: job type -> handler, shared by every app the extension is bound to.
    handlers: dict[str, JobHandler]
    #: schedule name -> :class:`Schedule`, likewise.
    schedules: dict[str, Schedule]

    def handler(
        self,
        job_type: str,
        *,
        max_runtime_seconds: float | None = None,
        retry: Retry | None = None,
        idempotent: bool = False,
        idempotency_key: cabc.Callable[[JSONObject], str] | None = None,
        idempotency_ttl_seconds: float = DEFAULT_IDEMPOTENCY_TTL_SECONDS,
        idempotency_scope: t.Literal["job_type", "global"] = "job_type",
        limits: cabc.Sequence[Limit] | None = None,
    ) -> cabc.Callable[[F], F]:
        """Register the decorated function as the handler of ``job_type``.

        The function takes the job's payload (a dict); it may be ``async def``.
        Delivery is at least once, so make it idempotent.

        :param max_runtime_seconds: overrides the queue's limit for this job type.
        :param retry: a :class:`~flask_sqs_jobs.Retry` policy for this job type,
            overriding the queue's ``retry_backoff_seconds``.
        :param idempotent: run each job id at most once (needs a store); see
            ``docs/idempotency.md``.
        :param idempotency_key: the key from the payload instead of the job id
            (implies ``idempotent``).
        :param idempotency_ttl_seconds: how long a completed key is remembered.
        :param idempotency_scope: ``"job_type"`` (default): the key belongs to
            this job type, so another job type's job with the same job id or
            key is not a duplicate; ``"global"``: shared on purpose with every
            job type whose scope is global.
        :param limits: :class:`~flask_sqs_jobs.RateLimit` and
            :class:`~flask_sqs_jobs.ConcurrencyLimit` values its starts obey
            across every worker process (needs a store); see
            ``docs/flow-control.md``.
        """
        if not isinstance(job_type, str) or not job_type:
            raise ValueError(f"job_type must be a non-empty str; got {job_type!r}")
        options = handler_options(
            job_type,
            idempotent,
            idempotency_key,
            idempotency_ttl_seconds,
            idempotency_scope,
        )
        checked = check_limits(f"@jobs.handler({job_type!r})", limits)

        def decorator(func: F) -> F:
            existing = self.handlers.get(job_type)
            if existing is not None and existing.func is not func:
                raise ValueError(
                    f"job type {job_type!r} already has a handler"
                    f" ({existing.func.__module__}.{existing.func.__qualname__});"
                    " each job type has exactly one"
                )
            self.handlers[job_type] = JobHandler(
                func, max_runtime_seconds, retry=retry, limits=checked, **options
            )
            return func

        return decorator

    def periodic(
        self,
        name: str,
        *,
        cron: str,
        timezone: str = "UTC",
        queue: str = "default",
        payload: JSONObject | None = None,
        catch_up: bool = False,
    ) -> cabc.Callable[[F], F]:
        """Register the decorated function as job type ``name``, run on ``cron``.

        See ``docs/periodic.md``. :raises ValueError: a bad expression or zone.
        """

        def decorator(func: F) -> F:
            self.schedule(
                name, cron=cron, timezone=timezone, queue=queue, payload=payload,
                catch_up=catch_up,
            )  # fmt: skip
            return self.handler(name)(func)

        return decorator

    def schedule(
        self,
        name: str,
        *,
        cron: str,
        job_type: t.Any = None,
        timezone: str = "UTC",
        queue: str = "default",
        payload: JSONObject | None = None,
        catch_up: bool = False,
    ) -> Schedule:
        """Run ``job_type`` (a job type or a task; default ``name``) on ``cron``."""
        from .periodic import declare
        from .periodic import job_type_of

        return declare(
            self.schedules,
            t.cast("Enqueuer", self),
            name,
            cron=cron,
            job_type=job_type_of(job_type),
            timezone=timezone,
            queue=queue,
            payload=payload,
            catch_up=catch_up,
        )
