"""Job handlers. Delivery is at least once, so each one is idempotent."""

from __future__ import annotations

import typing as t

import structlog
from flask_sqs_jobs import current_job
from flask_sqs_jobs import NonRetryableError

from .extensions import jobs

log = structlog.get_logger(__name__)

#: What was already done, keyed by an idempotency key. A real app keeps this
#: in its database (a unique constraint on the key).
SENT_EMAILS: set[str] = set()


@jobs.handler("send_welcome_email")
def send_welcome_email(payload: dict[str, t.Any]) -> None:
    """Send the welcome email once per address, even if the job runs twice."""
    email = payload["email"]
    if email in SENT_EMAILS:
        log.info("welcome_email_already_sent", email=email)
        return
    if current_job.receive_count == 1:
        # Stands in for a flaky mail server: the first attempt fails and the
        # job is retried after the queue's retry backoff.
        raise ConnectionError("mail server busy, try again")
    SENT_EMAILS.add(email)
    log.info("welcome_email_sent", email=email)


@jobs.handler("build_signup_report")
def build_signup_report(payload: dict[str, t.Any]) -> None:
    """Recompute a report: running it twice gives the same result."""
    log.info("signup_report_built", day=payload["day"])


@jobs.handler("charge_card")
def charge_card(payload: dict[str, t.Any]) -> None:
    """Charge a card; a declined card will never succeed, so do not retry it."""
    if payload.get("card") == "declined":
        raise NonRetryableError("card declined")
    log.info("card_charged", amount=payload["amount"])


@jobs.periodic(
    "purge_expired_sessions",
    cron="30 2 * * *",
    timezone="Europe/Berlin",
    queue="housekeeping",
    payload={"older_than_days": 30},
)
def purge_expired_sessions(payload: dict[str, t.Any]) -> None:
    """Every night at 02:30 Berlin time: deleting what is gone already is a no-op."""
    log.info(
        "expired_sessions_purged",
        older_than_days=payload["older_than_days"],
        scheduled_for=current_job.scheduled_for,
    )
