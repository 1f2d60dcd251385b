"""Random and hostile Flask configs: load_config raises only TypeError or ValueError."""

from __future__ import annotations

import typing as t

from flask_sqs_jobs.config._settings import _KEYS
from flask_sqs_jobs.config._settings import load_config
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ
from tests.fuzz.strategies import hostile_text
from tests.fuzz.strategies import hostile_values

keys = st.sampled_from(sorted(_KEYS)) | hostile_text | st.just("SQS_JOBS_QUEUE")
queue_definition = st.dictionaries(
    st.sampled_from(["url", "name", "weight", "fifo", "visibility_timeout"])
    | hostile_text,
    hostile_values,
    max_size=5,
)
queues = st.dictionaries(hostile_text, queue_definition | hostile_values, max_size=4)
configs = st.dictionaries(keys, hostile_values, max_size=8) | st.builds(
    lambda base, q: {**base, "SQS_JOBS_QUEUES": q},
    st.dictionaries(keys, hostile_values, max_size=6),
    queues,
)


@FUZZ
@given(configs)
def test_load_config_accepts_or_raises_type_or_value_error(
    config: dict[t.Any, t.Any],
) -> None:
    error: Exception | None = None
    try:
        load_config(config)
    except (TypeError, ValueError) as exc:
        error = exc

    assert error is None or str(error)
