"""``flask sqs-jobs outbox list|park|retry|drop`` and the parked rows in status."""

from __future__ import annotations

import json
import typing as t

import pytest
import sqlalchemy as sa
import sqlalchemy.orm
from flask_sqs_jobs.engine.ops import PrometheusMetrics
from flask_sqs_jobs.store.outbox import bind_outbox_metrics

from tests.store.outbox_apps import App
from tests.store.outbox_apps import refuse
from tests.store.outbox_apps import World
from tests.store.test_outbox import pending_rows
from tests.store.test_outbox import received


def cli(app: App, *args: str) -> t.Any:
    return app.app.test_cli_runner().invoke(args=["sqs-jobs", "outbox", *args])


def listed(app: App, *args: str) -> list[dict[str, t.Any]]:
    result = cli(app, "list", "--json", *args)
    assert result.exit_code == 0, result.output
    return t.cast(list[dict[str, t.Any]], json.loads(result.output)["rows"])


def test_list_shows_each_row_with_its_state_attempts_and_last_error(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=1)
    ids = made.write("default", 2)
    assert cli(made, "list").output.splitlines()[0].split()[:4] == [
        "ID",
        "QUEUE",
        "STATE",
        "ATTEMPTS",
    ]
    rows = listed(made)
    assert [(r["job_id"], r["queue"], r["state"], r["attempts"]) for r in rows] == [
        (ids[0], "default", "due", 0),
        (ids[1], "default", "due", 0),
    ]
    assert listed(made, "--parked") == []
    assert cli(made, "list", "--parked").output.strip() == "no parked rows"
    with monkeypatch.context() as patch:
        refuse(made, "default", patch)
        assert made.relay().run_pass() == 2
    rows = listed(made, "--parked")
    assert [(r["job_id"], r["state"], r["attempts"]) for r in rows] == [
        (ids[0], "parked", 1),
        (ids[1], "parked", 1),
    ]
    assert rows[0]["last_error"] == "Throttled: slow"
    assert rows[0]["parked_at"] is not None
    shown = cli(made, "list", "--parked").output
    assert f"{rows[0]['id']}: Throttled: slow" in shown
    assert listed(made, "--limit", "1") == rows[:1]


def test_park_retry_and_drop_by_id(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app()
    ids = made.write("default", 3)
    first, second, third = (r.id for r in pending_rows(made.store))

    parked = cli(made, "park", str(first), str(second))
    assert parked.exit_code == 0, parked.output
    assert f"parked 2 row(s): {first}, {second}" in parked.output
    assert made.relay().drain() == 1  # only the third row goes
    assert [b["job_id"] for b in received(world.sqs, world.default_url)] == [ids[2]]
    assert [r["id"] for r in listed(made, "--parked")] == [first, second]

    retried = cli(made, "retry", str(first))
    assert retried.exit_code == 0, retried.output
    assert made.relay().drain() == 1
    assert [b["job_id"] for b in received(world.sqs, world.default_url)] == [ids[0]]

    dropped = cli(made, "drop", str(second))
    assert dropped.exit_code == 0, dropped.output
    assert f"dropped 1 row(s): {second}" in dropped.output
    assert pending_rows(made.store) == []
    assert made.relay().drain() == 0
    assert received(world.sqs, world.default_url) == []

    missing = cli(made, "retry", str(third))  # sent long ago
    assert missing.exit_code == 1
    assert f"no outbox row {third}" in missing.output


def test_retry_all_parked_sends_every_parked_row(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app()
    ids = made.write("default", 3)
    row_ids = [str(r.id) for r in pending_rows(made.store)]
    assert cli(made, "park", *row_ids).exit_code == 0
    assert made.relay().drain() == 0
    retried = cli(made, "retry", "--all-parked")
    assert retried.exit_code == 0, retried.output
    assert "retrying 3 row(s)" in retried.output
    assert made.relay().drain() == 3
    sent = sorted(b["job_id"] for b in received(world.sqs, world.default_url))
    assert sent == sorted(ids)


def test_drop_leaves_a_row_that_is_not_parked(
    world: World, make_app: t.Callable[..., App]
) -> None:
    made = make_app()
    made.write("default", 1)
    (row,) = pending_rows(made.store)
    result = cli(made, "drop", str(row.id))
    assert result.exit_code == 1
    assert "not parked" in result.output
    assert f"flask sqs-jobs outbox park {row.id}" in result.output
    assert len(pending_rows(made.store)) == 1


@pytest.mark.parametrize(
    "args",
    [["park"], ["drop"], ["retry"], ["retry", "1", "--all-parked"], ["park", "x"]],
)
def test_a_wrong_command_line_exits_2(
    world: World, make_app: t.Callable[..., App], args: list[str]
) -> None:
    result = cli(make_app(), *args)
    assert result.exit_code == 2, result.output


def test_untrusted_text_is_escaped_in_the_table(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=1, SQS_JOBS_CHECK_JOB_TYPES=False)
    crafted = "pay\u202emoney\u200b"  # SQS takes it; a terminal would reorder it
    with made.app.app_context(), sa.orm.Session(made.store.engine) as session:
        made.jobs.enqueue("default", crafted, {}, session=session)
        session.commit()
    queue = made.jobs.queue_group(made.app).queue("default")
    monkeypatch.setattr(
        queue,
        "send_batch",
        lambda entries: [("Bad", "line\nnext\x1b[31m")] * len(entries),
    )
    assert made.relay().run_pass() == 1
    shown = cli(made, "list").output
    for raw in ("\x1b", "\u202e", "\u200b"):
        assert raw not in shown
    assert "pay\\u202emoney\\u200b" in shown
    assert "line\\nnext\\x1b[31m" in shown
    as_json = cli(made, "list", "--json").output
    assert as_json.isascii()
    assert json.loads(as_json)["rows"][0]["job_type"] == crafted


def test_status_and_metrics_count_the_parked_rows(
    world: World, make_app: t.Callable[..., App], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = make_app(SQS_JOBS_OUTBOX_MAX_ATTEMPTS=1)
    made.write("default", 3)
    first = pending_rows(made.store)[0].id
    assert cli(made, "park", str(first)).exit_code == 0
    report = json.loads(cli(made, "status", "--json").output)
    assert (report["pending"], report["parked"]) == (2, 1)
    assert report["queues"]["default"]["parked"] == 1
    assert "parked: 1" in cli(made, "status").output
    metrics = PrometheusMetrics()
    bind_outbox_metrics(metrics, made.store)
    text = metrics.render()[0].decode()
    assert "sqs_jobs_outbox_parked 1.0" in text
    assert "sqs_jobs_outbox_pending 2.0" in text
