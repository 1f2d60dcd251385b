"""The dashboard blueprint: its checks on every request and how pages answer."""

from __future__ import annotations

import collections.abc as cabc
import typing as t

from flask import abort
from flask import Blueprint
from flask import current_app
from flask import Flask
from flask import request
from flask import Response
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from ._pages import Dashboard
from ._pages import HasParts
from ._pages import respond
from ._request_checks import cross_site_problem
from ._request_checks import loopback_host_problem
from ._security import add_security_headers
from ._security import check_authorized
from ._security import csrf_token
from ._security import has_secret_key

Authorize: t.TypeAlias = cabc.Callable[[], object]

ANONYMOUS_HOSTS = (
    "This dashboard has no login (allow_anonymous=True), so it answers only"
    " requests addressed to this machine itself. To serve it under another name,"
    " list that name in app.config['TRUSTED_HOSTS'], or mount it with"
    " authorize= behind the app's login."
)


def make_dashboard(
    jobs: HasParts,
    authorize: Authorize | None = None,
    *,
    allow_anonymous: bool = False,
    served_app: Flask | None = None,
) -> Blueprint:
    """Build the dashboard's blueprint; see :meth:`SQSJobs.dashboard`."""
    if authorize is None and not allow_anonymous:
        raise ValueError(
            "jobs.dashboard() needs authorize=, a function returning True for the"
            " users who may operate the queues (e.g. lambda:"
            " current_user.is_authenticated and current_user.is_admin); pass"
            " allow_anonymous=True only where nobody else can reach it"
        )
    if authorize is not None and not callable(authorize):
        raise TypeError(
            f"authorize must be a function taking no arguments; got {authorize!r}"
        )
    from . import _views_queues
    from . import _views_retry
    from . import _views_store

    blueprint = Blueprint(
        "sqs_jobs_dashboard",
        __name__,
        template_folder="templates",
        static_folder="static",
        static_url_path="/static",
    )
    dashboard = Dashboard(jobs, served_app)
    blueprint.before_request(lambda: check_request(authorize))
    blueprint.after_request(add_security_headers)
    blueprint.register_error_handler(HTTPException, _http_error)

    @blueprint.context_processor
    def page_context() -> dict[str, t.Any]:
        return {
            "csrf_token": csrf_token(),
            "has_secret_key": has_secret_key(),
            "has_store": dashboard.parts().store is not None,
        }

    _views_queues.register(blueprint, dashboard)
    _views_store.register(blueprint, dashboard)
    _views_retry.register(blueprint, dashboard)
    return blueprint


def check_request(authorize: Authorize | None) -> BaseResponse | None:
    """What runs before every view: the Host, the site, then ``authorize()``.

    Without ``authorize`` the ``Host`` must be a loopback name (421), unless
    the app lists its own in ``TRUSTED_HOSTS`` (Flask then checks them). A
    state-changing request from another site is a 403 for every dashboard.
    """
    if authorize is None and not current_app.config.get("TRUSTED_HOSTS"):
        problem = loopback_host_problem(request.host)
        if problem is not None:
            abort(421, description=f"{problem}. {ANONYMOUS_HOSTS}")
    problem = cross_site_problem(request)
    if problem is not None:
        abort(403, description=problem[0].upper() + problem[1:] + ".")
    return check_authorized(authorize)


def _http_error(error: HTTPException) -> Response | tuple[str, int]:
    status = error.code or 500
    data = {"error": error.name, "message": error.description, "status": status}
    return respond("error.html", data, status)
