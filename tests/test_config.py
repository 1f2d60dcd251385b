"""``SQS_JOBS_*`` settings: read once in ``init_app`` and checked there."""

from __future__ import annotations

import json
import re
import typing as t

import pytest
from flask import Flask
from flask_sqs_jobs import SQSJobs

QUEUES = {"default": {"name": "app-default"}}


def init(**config: t.Any) -> tuple[Flask, SQSJobs]:
    """A fresh app with ``config``, bound to a fresh extension."""
    app = Flask(__name__)
    app.config.update(config)
    jobs = SQSJobs()
    jobs.init_app(app)
    return app, jobs


def test_the_defaults_are_those_of_the_spec() -> None:
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES)

    config = jobs.config(app)

    assert config.queues == QUEUES
    assert config.endpoint_url is None
    assert config.region_name is None
    assert config.idle_wait_seconds == 20
    assert config.request_id_header == "X-Request-ID"
    assert config.eager is False


def test_every_setting_is_read_from_the_app_config() -> None:
    app, jobs = init(
        SQS_JOBS_QUEUES=QUEUES,
        SQS_JOBS_ENDPOINT_URL="http://127.0.0.1:9324",
        SQS_JOBS_REGION_NAME="eu-west-1",
        SQS_JOBS_IDLE_WAIT_SECONDS=0,
        SQS_JOBS_REQUEST_ID_HEADER="X-Correlation-ID",
        SQS_JOBS_EAGER=True,
    )

    config = jobs.config(app)

    assert config.endpoint_url == "http://127.0.0.1:9324"
    assert config.region_name == "eu-west-1"
    assert config.idle_wait_seconds == 0
    assert config.request_id_header == "X-Correlation-ID"
    assert config.eager is True


def test_queues_may_be_given_as_a_json_string() -> None:
    """As an environment variable would hold them."""
    definition = {"default": {"name": "app-default", "weight": 2}}

    app, jobs = init(SQS_JOBS_QUEUES=json.dumps(definition))

    assert jobs.config(app).queues == definition


def test_settings_from_prefixed_environment_variables_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FLASK_SQS_JOBS_QUEUES", json.dumps(QUEUES))
    monkeypatch.setenv("FLASK_SQS_JOBS_IDLE_WAIT_SECONDS", "5")
    monkeypatch.setenv("FLASK_SQS_JOBS_EAGER", "true")
    app = Flask(__name__)
    app.config.from_prefixed_env()
    jobs = SQSJobs(app)

    config = jobs.config(app)

    assert (config.queues, config.idle_wait_seconds, config.eager) == (QUEUES, 5, True)


def test_the_config_is_read_once_at_init_app() -> None:
    """Changing ``app.config`` afterwards changes nothing, as documented."""
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_IDLE_WAIT_SECONDS=3)

    app.config["SQS_JOBS_QUEUES"] = {"other": {"name": "other"}}
    app.config["SQS_JOBS_IDLE_WAIT_SECONDS"] = 7

    assert jobs.config(app).queues == QUEUES
    assert jobs.config(app).idle_wait_seconds == 3


def test_missing_queues_raise_with_an_example_of_the_setting() -> None:
    with pytest.raises(ValueError, match="SQS_JOBS_QUEUES is required") as info:
        init()

    assert '{"default": {"name": "my-app-jobs"}}' in str(info.value)


def test_queues_that_are_not_a_dict_raise_type_error_naming_the_type() -> None:
    with pytest.raises(TypeError, match=r"SQS_JOBS_QUEUES must be a dict.*got list"):
        init(SQS_JOBS_QUEUES=["app-default"])


def test_a_queues_string_that_is_not_json_raises_naming_the_value() -> None:
    expected = "SQS_JOBS_QUEUES is a string that is not JSON: 'default=app-default'."
    with pytest.raises(ValueError, match=re.escape(expected)):
        init(SQS_JOBS_QUEUES="default=app-default")


def test_a_queues_json_string_that_is_not_an_object_raises() -> None:
    with pytest.raises(TypeError, match=r"SQS_JOBS_QUEUES must be a dict.*got list"):
        init(SQS_JOBS_QUEUES='["app-default"]')


def test_empty_queues_raise() -> None:
    with pytest.raises(ValueError, match=r"SQS_JOBS_QUEUES: .*at least one queue"):
        init(SQS_JOBS_QUEUES={})


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (
            {"name": "a", "url": "https://sqs.example/1/a"},
            "queue 'default': give exactly one of 'name'",
        ),
        ({"weight": 2}, "queue 'default': give exactly one of 'name'"),
        ({"nmae": "a"}, r"queue 'default': unknown key\(s\) \['nmae'\]"),
        ({"name": ""}, "queue 'default': 'name' must be a non-empty str"),
        ({"name": "a", "weight": 0}, "queue 'default': 'weight' must be a positive"),
        ({"name": "a", "weight": "2"}, "queue 'default': 'weight' must be a positive"),
    ],
    ids=["name-and-url", "neither", "unknown-key", "empty-name", "zero", "str-weight"],
)
def test_a_malformed_queue_definition_raises_naming_the_queue_and_the_key(
    definition: dict[str, t.Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^SQS_JOBS_QUEUES: {message}"):
        init(SQS_JOBS_QUEUES={"default": definition})


def test_a_queue_definition_that_is_not_a_dict_raises_type_error() -> None:
    with pytest.raises(TypeError, match="queue 'default': the definition must be"):
        init(SQS_JOBS_QUEUES={"default": "app-default"})


@pytest.mark.parametrize("value", [-1, 21, 2.5, "5", True, None])
def test_an_idle_wait_outside_0_to_20_raises_naming_key_value_and_range(
    value: object,
) -> None:
    expected = (
        "SQS_JOBS_IDLE_WAIT_SECONDS must be an int 0..20 (the SQS long-poll"
        f" maximum); got {value!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_IDLE_WAIT_SECONDS=value)


@pytest.mark.parametrize("value", [0, 20])
def test_idle_waits_of_0_and_20_are_accepted(value: int) -> None:
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_IDLE_WAIT_SECONDS=value)

    assert jobs.config(app).idle_wait_seconds == value


def test_an_unknown_key_raises_with_a_did_you_mean_hint() -> None:
    with pytest.raises(ValueError, match="not a flask-sqs-jobs setting") as info:
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_IDLE_WAIT=5)

    message = str(info.value)
    assert message.startswith("SQS_JOBS_IDLE_WAIT is not a flask-sqs-jobs setting.")
    assert "Did you mean SQS_JOBS_IDLE_WAIT_SECONDS?" in message


def test_an_unknown_key_with_no_close_match_lists_the_valid_keys() -> None:
    with pytest.raises(ValueError, match="not a flask-sqs-jobs setting") as info:
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_MAX_RETRIES=3)

    message = str(info.value)
    assert "SQS_JOBS_MAX_RETRIES is not a flask-sqs-jobs setting." in message
    assert "Did you mean" not in message
    for key in (
        "SQS_JOBS_EAGER",
        "SQS_JOBS_ENDPOINT_URL",
        "SQS_JOBS_IDLE_WAIT_SECONDS",
        "SQS_JOBS_QUEUES",
        "SQS_JOBS_REGION_NAME",
        "SQS_JOBS_REQUEST_ID_HEADER",
    ):
        assert key in message


def test_keys_of_other_extensions_are_left_alone() -> None:
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES, SQS_QUEUE_PREFIX="x", JOBS_EAGER=1)

    assert app.extensions["sqs_jobs"] is jobs


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "SQS_JOBS_ENDPOINT_URL",
            9324,
            "SQS_JOBS_ENDPOINT_URL must be a non-empty str or None; got 9324",
        ),
        (
            "SQS_JOBS_REGION_NAME",
            "",
            "SQS_JOBS_REGION_NAME must be a non-empty str or None; got ''",
        ),
        (
            "SQS_JOBS_REQUEST_ID_HEADER",
            "",
            "SQS_JOBS_REQUEST_ID_HEADER must be a header name such as 'X-Request-ID';"
            " got ''",
        ),
        ("SQS_JOBS_EAGER", "yes", "SQS_JOBS_EAGER must be True or False; got 'yes'"),
        ("SQS_JOBS_EAGER", 1, "SQS_JOBS_EAGER must be True or False; got 1"),
    ],
)
def test_a_value_of_the_wrong_type_raises_type_error_naming_key_and_value(
    key: str, value: object, message: str
) -> None:
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        init(SQS_JOBS_QUEUES=QUEUES, **{key: value})


def test_a_failed_init_app_leaves_the_app_unbound_so_it_can_be_fixed() -> None:
    app = Flask(__name__)
    app.config["SQS_JOBS_QUEUES"] = QUEUES
    app.config["SQS_JOBS_IDLE_WAIT_SECONDS"] = 60
    jobs = SQSJobs()
    with pytest.raises(ValueError, match="SQS_JOBS_IDLE_WAIT_SECONDS"):
        jobs.init_app(app)
    assert "sqs_jobs" not in app.extensions

    app.config["SQS_JOBS_IDLE_WAIT_SECONDS"] = 10
    jobs.init_app(app)

    assert jobs.config(app).idle_wait_seconds == 10


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("not a url", "it contains spaces or control characters"),
        ("localhost:4566", "it does not start with http:// or https://"),
        ("ftp://localhost:4566", "it does not start with http:// or https://"),
        ("http://", "it has no host"),
        ("https://:4566", "it has no host"),
        ("http://localhost:port", "Port could not be cast to integer value"),
        ("http://localhost:99999", "Port out of range"),
        ("http://under_score:4566", "its host is not a valid host name or IP address"),
        ("http://localhost:4566\n", "it contains spaces or control characters"),
    ],
)
def test_an_endpoint_url_botocore_cannot_use_is_refused_at_init_app(
    value: str, problem: str
) -> None:
    """Not later, as a traceback (exit 1) of the first command that makes a client."""
    expected = (
        "SQS_JOBS_ENDPOINT_URL must be an http:// or https:// URL with a host, e.g."
        f" 'http://localhost:9324' or 'https://sqs.eu-west-1.amazonaws.com'; got"
        f" {value!r}: {problem}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}"):
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_ENDPOINT_URL=value)


@pytest.mark.parametrize(
    "value",
    [
        "http://localhost:4566",
        "https://sqs.eu-west-1.amazonaws.com",
        "http://127.0.0.1:9324/",
        "http://[::1]:9324",
        "HTTPS://SQS.example.com",
    ],
)
def test_http_and_https_endpoint_urls_with_a_host_are_accepted(value: str) -> None:
    app, jobs = init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_ENDPOINT_URL=value)

    assert jobs.config(app).endpoint_url == value


@pytest.mark.parametrize(
    "value",
    [
        "X-Request-ID\r\nX-Evil: 1",
        "X-Request-ID\n",
        "X Request ID",
        "X-Request-ID:",
        "é",
    ],
)
def test_a_request_id_header_that_is_not_an_http_token_is_refused(value: str) -> None:
    expected = (
        "SQS_JOBS_REQUEST_ID_HEADER must be a header name such as 'X-Request-ID':"
        " letters, digits and !#$%&'*+-.^_`|~ only (an RFC 7230 token);"
        f" got {value!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        init(SQS_JOBS_QUEUES=QUEUES, SQS_JOBS_REQUEST_ID_HEADER=value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_runtime_seconds", float("nan")),
        ("max_runtime_seconds", float("inf")),
        ("max_runtime_seconds", 10**400),
        ("retry_backoff_seconds", float("nan")),
        ("retry_backoff_seconds", float("inf")),
        ("retry_backoff_seconds", -float("inf")),
        ("retry_backoff_seconds", 10**400),
    ],
)
def test_a_queue_number_that_is_not_finite_is_refused(key: str, value: float) -> None:
    """NaN passes every comparison: a NaN max_runtime_seconds never fires."""
    with pytest.raises(
        ValueError, match=f"queue 'default': {key} must be a positive, finite"
    ):
        init(SQS_JOBS_QUEUES={"default": {"name": "app-default", key: value}})
