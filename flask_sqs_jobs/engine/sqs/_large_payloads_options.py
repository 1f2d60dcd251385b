"""The options of large payloads, checked before anything is built."""

from __future__ import annotations

import re
import typing as t

from ..model import DEFAULT_MAX_MESSAGE_SIZE

#: The longest S3 object key.
MAX_KEY_LENGTH = 1024
#: The default of ``max_bytes``: the largest object a worker reads (64 MiB).
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
#: The largest message SQS accepts, so the largest useful ``threshold_bytes``.
MAX_THRESHOLD_BYTES = DEFAULT_MAX_MESSAGE_SIZE
# Bucket names: 3-63 characters of lowercase letters, digits, dots and hyphens.
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
CONFIG_KEYS = (
    "bucket",
    "prefix",
    "threshold_bytes",
    "always",
    "delete_after_processing",
    "max_bytes",
)


def normalize_prefix(prefix: str) -> str:
    """A prefix is a folder: ``"sqs-jobs"`` means ``"sqs-jobs/"``; ``""`` stays."""
    return prefix if not prefix or prefix.endswith("/") else f"{prefix}/"


def check_options(
    *,
    bucket: object,
    prefix: object = "sqs-jobs/",
    threshold_bytes: object = None,
    always: object = False,
    delete_after_processing: object = True,
    max_bytes: object = DEFAULT_MAX_BYTES,
) -> None:
    """Raise TypeError/ValueError naming the first invalid large-payload option."""
    if not isinstance(bucket, str):
        raise TypeError(f"bucket must be an S3 bucket name (a str); got {bucket!r}")
    if not _BUCKET_NAME.match(bucket):
        raise ValueError(
            "bucket must be an S3 bucket name (3-63 lowercase letters, digits, dots"
            f" and hyphens); got {bucket!r}"
        )
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str (may be ''); got {prefix!r}")
    if len(prefix) > MAX_KEY_LENGTH - 64 or not prefix.isprintable():
        raise ValueError(f"prefix must be a short printable key prefix; got {prefix!r}")
    if threshold_bytes is not None:
        _check_size("threshold_bytes", threshold_bytes, "an int or None", minimum=0)
        if t.cast(int, threshold_bytes) > MAX_THRESHOLD_BYTES:
            raise ValueError(
                f"threshold_bytes must be at most {MAX_THRESHOLD_BYTES:,} (1 MiB, the"
                f" largest message SQS accepts); got {threshold_bytes:,}. Use None"
                " for the queue's MaximumMessageSize"
            )
    _check_size("max_bytes", max_bytes, "a positive int (bytes)", minimum=1)
    for name, value in (
        ("always", always),
        ("delete_after_processing", delete_after_processing),
    ):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False; got {value!r}")


def _check_size(name: str, value: object, what: str, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be {what}; got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")


def check_settings(settings: object, where: str) -> dict[str, t.Any]:
    """Check a settings dict; errors name ``where`` and the key."""
    if not isinstance(settings, t.Mapping):
        raise TypeError(
            f"{where} must be a dict such as {{'bucket': 'my-bucket'}}; got"
            f" {type(settings).__name__}"
        )
    unknown = sorted(str(k) for k in settings if k not in CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {unknown}; valid keys are {list(CONFIG_KEYS)}"
        )
    if "bucket" not in settings:
        raise ValueError(f"{where}: 'bucket' is required (the S3 bucket name)")
    try:
        check_options(**dict(settings))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{where}: {exc}") from None
    return dict(settings)
