"""An app's configuration and what it makes: settings, clients, store, parts.

``SQS_JOBS_*`` is read and checked once (:func:`load_config`) into a
:class:`Config`; :mod:`._make` turns it into the SQS and S3 clients and the job
store; :class:`AppParts` holds them for one app, and :func:`parts_of` finds
it for the rest of the Flask layer.
"""

from __future__ import annotations

from ._make import create_bucket_lines
from ._make import handler_options
from ._make import limits_store_error
from ._make import make_store
from ._make import missing_store_error
from ._parts import AppParts
from ._parts import NEEDS_A_STORE
from ._parts import NOT_INITIALISED
from ._parts import parts_of
from ._settings import AWSSetupError
from ._settings import Config
from ._settings import load_config
from ._unique import with_unique_release

__all__ = [
    "NEEDS_A_STORE",
    "NOT_INITIALISED",
    "AWSSetupError",
    "AppParts",
    "Config",
    "create_bucket_lines",
    "handler_options",
    "limits_store_error",
    "load_config",
    "make_store",
    "missing_store_error",
    "parts_of",
    "with_unique_release",
]
