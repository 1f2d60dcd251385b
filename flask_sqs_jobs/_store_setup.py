"""Build the job store that ``SQS_JOBS_STORE_URL`` names."""

from __future__ import annotations

from ._config import Config
from .store.model import JobStore


def make_store(config: Config) -> JobStore | None:
    """The :class:`SQLAlchemyStore` of ``SQS_JOBS_STORE_URL``, or None when unset.

    :raises ValueError: the URL is not one SQLAlchemy can use; the message
        names the key.
    :raises ImportError: the ``sqlalchemy`` extra (or the URL's driver) is
        not installed; the message names what to install.
    """
    if config.store_url is None:
        return None
    try:
        from .store.sql import SQLAlchemyStore
    except ImportError as exc:
        raise ImportError(f"SQS_JOBS_STORE_URL is set, but {exc}") from None
    try:
        return SQLAlchemyStore(config.store_url)
    except ValueError as exc:
        raise ValueError(f"SQS_JOBS_STORE_URL: {exc}") from None
    except ImportError as exc:
        raise ImportError(
            f"SQS_JOBS_STORE_URL names a database whose driver is not installed"
            f' ({exc}); for PostgreSQL: pip install "flask-sqs-jobs[postgres]"'
        ) from None
