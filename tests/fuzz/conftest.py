"""Hypothesis profiles of the fuzz tier: short in ``make test``, long in ``make fuzz``.

``HYPOTHESIS_PROFILE=fuzz-long`` (what ``make fuzz`` sets) runs many random
examples; the default, ``fuzz-short``, a few deterministic ones.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck
from hypothesis import settings

_SUPPRESSED = [
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
    HealthCheck.function_scoped_fixture,
]

settings.register_profile(
    "fuzz-short",
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "fuzz-long",
    max_examples=5_000,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)

#: The settings every fuzz test runs with.
FUZZ = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "fuzz-short"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/fuzz/" in item.nodeid:
            item.add_marker(pytest.mark.fuzz)
