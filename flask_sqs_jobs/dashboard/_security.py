"""The dashboard's defences: authorize(), CSRF tokens, response headers.

CSRF: a random value is kept in the app's (signed) session, and the form
carries that value signed with ``SECRET_KEY`` through itsdangerous. A POST is
accepted only when its token verifies and names this session's value, so a
token from another session, a forged one or none at all is refused.
"""

from __future__ import annotations

import collections.abc as cabc
import hmac
import secrets

import structlog
from flask import abort
from flask import current_app
from flask import request
from flask import Response
from flask import session
from itsdangerous import BadSignature
from itsdangerous import URLSafeTimedSerializer

log = structlog.get_logger(__name__)

#: The form field (and header) that carries the token.
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
_SESSION_KEY = "_sqs_jobs_dashboard_csrf"
_SALT = "flask-sqs-jobs-dashboard-csrf"
#: How long a token is accepted after the page carrying it was rendered.
CSRF_MAX_AGE_SECONDS = 12 * 3600

NO_SECRET_KEY = (
    "the app has no SECRET_KEY, so the dashboard cannot protect its actions"
    " against cross-site requests: set app.config['SECRET_KEY'] (a long random"
    " value) to redrive or delete dead letters"
)

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class CsrfError(Exception):
    """A state-changing request without a valid token; the text says why."""


def check_authorized(authorize: cabc.Callable[[], object] | None) -> None:
    """Call ``authorize()``: False is a 403, an exception a 500 (logged, not shown)."""
    if authorize is None:
        return
    try:
        allowed = authorize()
    except Exception:
        log.exception("dashboard_authorize_failed", path=request.path)
        abort(500)
    if not allowed:
        abort(403)


def has_secret_key() -> bool:
    return bool(current_app.secret_key)


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(current_app.secret_key), salt=_SALT)


def _secret(value: object) -> str | bytes:
    return value if isinstance(value, (str, bytes)) else str(value)


def csrf_token() -> str | None:
    """This session's token for a form, or None when the app has no SECRET_KEY."""
    if not has_secret_key():
        return None
    value = session.get(_SESSION_KEY)
    if not isinstance(value, str):
        value = secrets.token_urlsafe(32)
        session[_SESSION_KEY] = value
    return _serializer().dumps(value)


def check_csrf() -> None:
    """Refuse (:class:`CsrfError`) a POST without this session's token."""
    if not has_secret_key():
        raise CsrfError(NO_SECRET_KEY)
    token = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    if not token:
        raise CsrfError(
            "the request has no CSRF token: submit the dashboard's own form"
            " (reload the page and try again)"
        )
    expected = session.get(_SESSION_KEY)
    try:
        value = _serializer().loads(token, max_age=CSRF_MAX_AGE_SECONDS)
    except BadSignature:
        value = None
    if (
        not isinstance(value, str)
        or not isinstance(expected, str)
        or not hmac.compare_digest(value, expected)
    ):
        raise CsrfError(
            "the CSRF token is not valid for this session (expired, forged or from"
            " another browser session): reload the page and try again"
        )


def add_security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value
    response.vary.add("Accept")
    return response
