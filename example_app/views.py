"""Views that enqueue jobs."""

from __future__ import annotations

import datetime

from flask import Blueprint
from flask import jsonify
from flask import request
from flask.typing import ResponseReturnValue

from .extensions import jobs

bp = Blueprint("example", __name__)


@bp.post("/signup")
def signup() -> ResponseReturnValue:
    email = request.form.get("email", "").strip()
    if not email:
        return jsonify(error="email is required"), 400
    message_id = jobs.enqueue("critical", "send_welcome_email", {"email": email})
    day = datetime.date.today().isoformat()
    jobs.enqueue("reports", "build_signup_report", {"day": day})
    return jsonify(queued=message_id), 202


@bp.post("/orders")
def order() -> ResponseReturnValue:
    card = request.form.get("card", "ok")
    message_id = jobs.enqueue("critical", "charge_card", {"amount": 1200, "card": card})
    return jsonify(queued=message_id), 202
