"""Five-field cron written in EventBridge Scheduler's six-field syntax."""

from __future__ import annotations

import pytest
from flask_sqs_jobs.periodic._cron import CronExpression


@pytest.mark.parametrize(
    ("cron", "eventbridge"),
    [
        ("0 3 * * *", "cron(0 3 * * ? *)"),
        ("*/15 * * * *", "cron(0,15,30,45 * * * ? *)"),
        ("30 2 1 * *", "cron(30 2 1 * ? *)"),
        ("0 9 * * 1-5", "cron(0 9 ? * MON,TUE,WED,THU,FRI *)"),
        ("0 9 * * 0", "cron(0 9 ? * SUN *)"),
        ("0 9 * * 7", "cron(0 9 ? * SUN *)"),
        ("0 9 * * sat,sun", "cron(0 9 ? * SUN,SAT *)"),
        ("0 0 1 jan-mar *", "cron(0 0 1 1,2,3 ? *)"),
        ("0 8-18/2 * * *", "cron(0 8,10,12,14,16,18 * * ? *)"),
    ],
)
def test_cron_becomes_eventbridges_syntax(cron: str, eventbridge: str) -> None:
    assert CronExpression(cron).eventbridge() == eventbridge


def test_both_day_fields_restricted_cannot_be_written_for_eventbridge() -> None:
    with pytest.raises(ValueError, match="split it into two schedules"):
        CronExpression("0 9 1 * MON").eventbridge()
