"""The dashboard's defences: authorize(), CSRF tokens, response headers.

``authorize()`` follows Flask's ``before_request`` convention, strictly:
exactly ``True`` lets the request through, a Response is the answer (a
redirect to a login page, say), False or None is a 403, and anything else is
a mistake in the app (a function returned uncalled, a string, a truthy
object): a 500, logged as ``dashboard_authorize_invalid`` with what was
returned, and never a pass.

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
from werkzeug.wrappers import Response as BaseResponse

from ..engine.model import loggable_text

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


def check_authorized(
    authorize: cabc.Callable[[], object] | None,
) -> BaseResponse | None:
    """Call ``authorize()``: None to go on, or the Response it returned.

    False or None is a 403; an exception, or any value but True, False, None
    and a Response, a 500 (logged, not shown).
    """
    if authorize is None:
        return None
    try:
        allowed = authorize()
    except Exception:
        log.exception("dashboard_authorize_failed", path=request.path)
        abort(500)
    if allowed is True:
        return None
    if isinstance(allowed, BaseResponse):
        return allowed
    if allowed is False or allowed is None:
        abort(403)
    log.error(
        "dashboard_authorize_invalid",
        path=request.path,
        returned=loggable_text(_describe(allowed)),
        fix=(
            "authorize() must return True to let the request through, False or"
            " None to refuse it (403), or a Response to answer with (e.g."
            " redirect(url_for('login'))); it returned something else"
            + (", a function: call it" if callable(allowed) else "")
        ),
    )
    abort(500)


def _describe(value: object) -> str:
    """``value`` as the log shows it: its type, and its repr when short."""
    try:
        text = repr(value)
    except Exception:
        text = "(repr failed)"
    if len(text) > 80:
        text = text[:80] + "..."
    return f"{type(value).__module__}.{type(value).__qualname__}: {text}"


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
