"""The ``SQS_JOBS_*`` configuration: read once, validated at ``init_app``."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import difflib
import json
import re
import typing as t
import urllib.parse

from botocore.utils import is_valid_endpoint_url
from botocore.utils import is_valid_ipv6_endpoint_url

from ..engine.model import is_int_in
from ..engine.model import MAX_WAIT_SECONDS
from ..engine.sqs import add_name_prefix
from ..engine.sqs import check_settings
from ..engine.sqs import parse_queue_definitions
from ..engine.sqs import QueueDefinition

PREFIX = "SQS_JOBS_"


class AWSSetupError(ValueError):
    """The AWS SDK lacks a setting it needs (a region), so no client can be made."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Validated settings; each field mirrors an ``SQS_JOBS_*`` key."""

    #: ``SQS_JOBS_QUEUES``: logical name -> queue definition (required), as set.
    queues: dict[str, dict[str, t.Any]]
    #: The same definitions, checked once and typed, their names prefixed.
    definitions: dict[str, QueueDefinition] = dataclasses.field(
        default_factory=dict, compare=False
    )
    #: ``SQS_JOBS_QUEUE_NAME_PREFIX``: put before every queue ``name`` (not ``url``).
    queue_name_prefix: str = ""
    #: ``SQS_JOBS_ENDPOINT_URL``: the SQS endpoint, e.g. a local server.
    endpoint_url: str | None = None
    #: ``SQS_JOBS_REGION_NAME``: the AWS region; boto3 resolves it when None.
    region_name: str | None = None
    #: ``SQS_JOBS_IDLE_WAIT_SECONDS``: long-poll wait when every queue is empty.
    idle_wait_seconds: int = 20
    #: ``SQS_JOBS_REQUEST_ID_HEADER``: request header copied into ``request_id``.
    request_id_header: str = "X-Request-ID"
    #: ``SQS_JOBS_EAGER``: run handlers inline at enqueue (for tests).
    eager: bool = False
    #: ``SQS_JOBS_LARGE_PAYLOADS``: large bodies through S3, or None (off).
    large_payloads: dict[str, t.Any] | None = None
    #: ``SQS_JOBS_STORE_URL``: a SQLAlchemy URL for the job store, or None.
    store_url: str | None = None
    #: ``SQS_JOBS_SCHEDULER``: where periodic jobs run, ``"embedded"`` (every
    #: ``flask sqs-worker``) or ``"eventbridge"`` (EventBridge Scheduler).
    scheduler: str = "embedded"
    #: ``SQS_JOBS_SCHEDULE_GROUP``: the EventBridge Scheduler schedule group.
    schedule_group: str = "flask-sqs-jobs"
    #: ``SQS_JOBS_SCHEDULER_ROLE_ARN``: the role EventBridge Scheduler sends as.
    scheduler_role_arn: str | None = None
    #: ``SQS_JOBS_CHECK_JOB_TYPES``: refuse to enqueue a job type with no handler.
    check_job_types: bool = True
    #: ``SQS_JOBS_RECORD_JOBS``: write job records when a store is configured.
    record_jobs: bool = True
    #: ``SQS_JOBS_RECORD_MODE``: which jobs get a record: ``"all"``,
    #: ``"failures"`` or a share of jobs in (0, 1].
    record_mode: str | float = "all"
    #: ``SQS_JOBS_RECORD_RETENTION_SECONDS``: how long workers keep job records.
    record_retention_seconds: int = 604800
    #: ``SQS_JOBS_LOST_WORKER_RETENTION_SECONDS``: how long a worker's row
    #: outlives its last refresh before the workers' pruning deletes it.
    lost_worker_retention_seconds: int = 86400
    #: ``SQS_JOBS_DASHBOARD_SHOW_PAYLOADS``: the dashboard shows payloads and results.
    dashboard_show_payloads: bool = True
    #: ``SQS_JOBS_RECORD_FAILED_PAYLOADS``: the records of failed and
    #: dead-lettered jobs keep the payload (at most 64 KiB), to run them again.
    record_failed_payloads: bool = True
    #: ``SQS_JOBS_OUTBOX_MAX_ATTEMPTS``: failed sends after which an outbox row
    #: is parked (kept with its error, no longer sent).
    outbox_max_attempts: int = 20
    #: ``SQS_JOBS_OUTBOX_RELAYS``: how many outbox relays may be active against
    #: one store at once across the fleet.
    outbox_relays: int = 2
    #: ``SQS_JOBS_OUTBOX_SEND_AFTER_COMMIT``: each commit's outbox rows are
    #: sent at once by this process; False leaves them to the relays.
    outbox_send_after_commit: bool = True
    #: ``SQS_JOBS_SEND_BUFFER_MS``: gather single enqueues for up to this many
    #: milliseconds into SendMessageBatch (0: off).
    send_buffer_ms: int = 0

    def buffers(self, buffered: bool | None) -> bool:
        """Whether a single enqueue goes through the send buffer: ``buffered``,
        or by default whether ``SQS_JOBS_SEND_BUFFER_MS`` is above 0."""
        return self.send_buffer_ms > 0 if buffered is None else bool(buffered)


_KEYS = {
    f"{PREFIX}{field.name.upper()}": field
    for field in dataclasses.fields(Config)
    if field.name != "definitions"
}


def load_config(config: cabc.Mapping[str, t.Any]) -> Config:
    """Read and check every ``SQS_JOBS_*`` key of a Flask config.

    :raises ValueError, TypeError: a key is unknown, missing or has a bad
        value; the message names the key, the value and the fix.
    """
    for key in config:
        if isinstance(key, str) and key.startswith(PREFIX) and key not in _KEYS:
            # Compare what follows the prefix: every key shares the prefix, so
            # whole keys would always look close to some valid key.
            suffixes = [k.removeprefix(PREFIX) for k in _KEYS]
            close = difflib.get_close_matches(key.removeprefix(PREFIX), suffixes, n=1)
            hint = f" Did you mean {PREFIX}{close[0]}?" if close else ""
            raise ValueError(
                f"{key} is not a flask-sqs-jobs setting.{hint} Valid keys:"
                f" {', '.join(sorted(_KEYS))}."
            )
    if f"{PREFIX}QUEUES" not in config:
        raise ValueError(
            "SQS_JOBS_QUEUES is required: set it to a dict of logical queue name ->"
            ' definition, e.g. {"default": {"name": "my-app-jobs"}}'
        )
    queues = _queues(config[f"{PREFIX}QUEUES"])
    name_prefix = config.get(f"{PREFIX}QUEUE_NAME_PREFIX")
    name_prefix = "" if name_prefix is None else name_prefix
    definitions = _prefixed(_definitions(queues), name_prefix)
    return Config(
        queues={name: dict(t.cast(t.Any, d)) for name, d in queues.items()},
        definitions=definitions,
        queue_name_prefix=name_prefix,
        endpoint_url=_endpoint_url(_optional_str(config, "ENDPOINT_URL")),
        region_name=_optional_str(config, "REGION_NAME"),
        idle_wait_seconds=_idle_wait(config.get(f"{PREFIX}IDLE_WAIT_SECONDS", 20)),
        request_id_header=_header(
            config.get(f"{PREFIX}REQUEST_ID_HEADER", "X-Request-ID")
        ),
        eager=_bool(config, "EAGER"),
        large_payloads=_large_payloads(config.get(f"{PREFIX}LARGE_PAYLOADS")),
        store_url=_optional_str(config, "STORE_URL"),
        scheduler=_scheduler(config.get(f"{PREFIX}SCHEDULER", "embedded")),
        schedule_group=_optional_str(config, "SCHEDULE_GROUP") or "flask-sqs-jobs",
        scheduler_role_arn=_optional_str(config, "SCHEDULER_ROLE_ARN"),
        check_job_types=_bool(config, "CHECK_JOB_TYPES", default=True),
        record_jobs=_bool(config, "RECORD_JOBS", default=True),
        record_mode=_record_mode(config.get(f"{PREFIX}RECORD_MODE", "all")),
        record_retention_seconds=_positive_int(
            config, "RECORD_RETENTION_SECONDS", 604800
        ),
        lost_worker_retention_seconds=_positive_int(
            config, "LOST_WORKER_RETENTION_SECONDS", 86400
        ),
        dashboard_show_payloads=_bool(config, "DASHBOARD_SHOW_PAYLOADS", default=True),
        record_failed_payloads=_bool(config, "RECORD_FAILED_PAYLOADS", default=True),
        outbox_max_attempts=_positive_int(
            config, "OUTBOX_MAX_ATTEMPTS", 20, unit="failed sends"
        ),
        outbox_relays=_positive_int(config, "OUTBOX_RELAYS", 2, unit="relays"),
        outbox_send_after_commit=_bool(
            config, "OUTBOX_SEND_AFTER_COMMIT", default=True
        ),
        send_buffer_ms=_buffer_ms(config.get(f"{PREFIX}SEND_BUFFER_MS", 0)),
    )


def _scheduler(value: object) -> str:
    if not isinstance(value, str) or value not in ("embedded", "eventbridge"):
        raise ValueError(
            f'{PREFIX}SCHEDULER must be "embedded" (every flask sqs-worker runs the'
            f' periodic jobs) or "eventbridge" (EventBridge Scheduler); got {value!r}'
        )
    return value


def _buffer_ms(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1000:
        raise ValueError(
            f"{PREFIX}SEND_BUFFER_MS must be an int of milliseconds from 0 (off) to"
            f" 1000 (e.g. 10); got {value!r}"
        )
    return value


def _record_mode(value: object) -> str | float:
    if isinstance(value, str) and value in ("all", "failures"):
        return value
    share: object = value
    if isinstance(value, str):
        try:
            share = float(value)
        except ValueError:
            share = None
    if isinstance(share, bool) or not isinstance(share, int | float):
        share = None
    if share is None or not 0 < share <= 1:
        raise ValueError(
            f'{PREFIX}RECORD_MODE must be "all" (every job), "failures" (only jobs that'
            " end failed or dead_lettered) or a share of jobs between 0 and 1 (e.g."
            f" 0.1); got {value!r}"
        )
    return float(share)


def _large_payloads(value: object) -> dict[str, t.Any] | None:
    key = f"{PREFIX}LARGE_PAYLOADS"
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(
                f"{key} is a string that is not JSON: {value!r}. Set a dict such as"
                ' {"bucket": "my-bucket"}'
            ) from None
    return check_settings(value, key)


def _queues(value: object) -> dict[str, dict[str, t.Any]]:
    key = f"{PREFIX}QUEUES"
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValueError(
                f"{key} is a string that is not JSON: {value!r}. Set a dict, or JSON"
                ' such as \'{"default": {"name": "my-app-jobs"}}\''
            ) from None
        except RecursionError:
            raise ValueError(
                f"{key} is JSON nested too deeply to read; set a dict of logical"
                ' queue name -> definition, e.g. {"default": {"name": "my-app-jobs"}}'
            ) from None
    if not isinstance(value, cabc.Mapping):
        raise TypeError(
            f"{key} must be a dict of logical queue name -> definition;"
            f" got {type(value).__name__}"
        )
    return dict(value)


def _definitions(value: cabc.Mapping[str, t.Any]) -> dict[str, QueueDefinition]:
    try:
        return parse_queue_definitions(value)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{PREFIX}QUEUES: {exc}") from None


def _prefixed(
    definitions: dict[str, QueueDefinition], prefix: object
) -> dict[str, QueueDefinition]:
    try:
        return add_name_prefix(definitions, prefix)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{PREFIX}QUEUE_NAME_PREFIX {exc}") from None


def _optional_str(config: cabc.Mapping[str, t.Any], name: str) -> str | None:
    value = config.get(f"{PREFIX}{name}")
    if value is not None and (not isinstance(value, str) or not value):
        raise TypeError(
            f"{PREFIX}{name} must be a non-empty str or None; got {value!r}"
        )
    return value


_ENDPOINT_EXAMPLE = (
    "e.g. 'http://localhost:9324' or 'https://sqs.eu-west-1.amazonaws.com'"
)


def _endpoint_url(value: str | None) -> str | None:
    """Check that ``value`` is an http(s) URL with a host, as botocore needs."""
    if value is None:
        return None
    key = f"{PREFIX}ENDPOINT_URL"
    problem = None
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as exc:
        problem = str(exc)
    else:
        if any(char.isspace() or not char.isprintable() for char in value):
            problem = "it contains spaces or control characters"
        elif parts.scheme.lower() not in ("http", "https"):
            problem = "it does not start with http:// or https://"
        elif not parts.hostname:
            problem = "it has no host"
        elif not (is_valid_endpoint_url(value) or is_valid_ipv6_endpoint_url(value)):
            problem = "its host is not a valid host name or IP address"
    if problem is not None:
        raise ValueError(
            f"{key} must be an http:// or https:// URL with a host,"
            f" {_ENDPOINT_EXAMPLE}; got {value!r}: {problem}"
        )
    return value


def _idle_wait(value: object) -> int:
    if not is_int_in(value, 0, MAX_WAIT_SECONDS):
        raise ValueError(
            f"{PREFIX}IDLE_WAIT_SECONDS must be an int 0..{MAX_WAIT_SECONDS} (the SQS"
            f" long-poll maximum); got {value!r}"
        )
    return value


#: An HTTP field name: an RFC 7230 ``token``.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")


def _header(value: object) -> str:
    key = f"{PREFIX}REQUEST_ID_HEADER"
    if not isinstance(value, str) or not value:
        raise TypeError(
            f"{key} must be a header name such as 'X-Request-ID'; got {value!r}"
        )
    if not _TOKEN.fullmatch(value):
        raise ValueError(
            f"{key} must be a header name such as 'X-Request-ID': letters, digits"
            f" and !#$%&'*+-.^_`|~ only (an RFC 7230 token); got {value!r}"
        )
    return value


def _bool(
    config: cabc.Mapping[str, t.Any], name: str, *, default: bool = False
) -> bool:
    value = config.get(f"{PREFIX}{name}", default)
    if not isinstance(value, bool):
        raise TypeError(f"{PREFIX}{name} must be True or False; got {value!r}")
    return value


def _positive_int(
    config: cabc.Mapping[str, t.Any], name: str, default: int, unit: str = "seconds"
) -> int:
    value = config.get(f"{PREFIX}{name}", default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(
            f"{PREFIX}{name} must be a positive int of {unit} (e.g. {default});"
            f" got {value!r}"
        )
    return value
