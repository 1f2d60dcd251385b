"""Unique jobs and debounce: their options, the store part they need, their release."""

from __future__ import annotations

from ._keys import received_unique
from ._keys import unique_keys_of
from ._keys import UniqueKeys
from ._keys import use_unique_keys
from ._options import DEFAULT_UNIQUE_FOR_SECONDS
from ._options import DuplicateJobError
from ._options import FINISHED
from ._options import HolderJobId
from ._options import NEEDS_A_STORE
from ._options import RAISE
from ._options import read_unique
from ._options import STARTED
from ._options import UNIQUE_OPTION_NAMES
from ._options import UniqueOptions
from ._release import UniqueRelease

__all__ = [
    "DEFAULT_UNIQUE_FOR_SECONDS",
    "FINISHED",
    "NEEDS_A_STORE",
    "RAISE",
    "STARTED",
    "UNIQUE_OPTION_NAMES",
    "DuplicateJobError",
    "HolderJobId",
    "UniqueKeys",
    "UniqueOptions",
    "UniqueRelease",
    "read_unique",
    "received_unique",
    "unique_keys_of",
    "use_unique_keys",
]
