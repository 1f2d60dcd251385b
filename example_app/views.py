"""Views that enqueue jobs."""

from __future__ import annotations

import datetime

import sqlalchemy as sa
from flask import Blueprint
from flask import jsonify
from flask import request
from flask.typing import ResponseReturnValue

from .extensions import jobs
from .models import database
from .models import users

bp = Blueprint("example", __name__)


@bp.post("/signup")
def signup() -> ResponseReturnValue:
    email = request.form.get("email", "").strip()
    if not email:
        return jsonify(error="email is required"), 400
    # The user and the jobs about them commit together (the transactional
    # outbox): a rolled-back sign-up sends no email, and a crash right after
    # the commit still sends it, through the worker's outbox relay.
    with database().session() as session:
        session.execute(sa.insert(users).values(email=email))
        job_id = jobs.enqueue(
            "critical", "send_welcome_email", {"email": email}, session=session
        )
        day = datetime.date.today().isoformat()
        jobs.enqueue("reports", "build_signup_report", {"day": day}, session=session)
        session.commit()
    return jsonify(queued=job_id), 202


@bp.post("/orders")
def order() -> ResponseReturnValue:
    card = request.form.get("card", "ok")
    message_id = jobs.enqueue("critical", "charge_card", {"amount": 1200, "card": card})
    return jsonify(queued=message_id), 202
