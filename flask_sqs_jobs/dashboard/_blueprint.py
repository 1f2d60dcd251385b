"""The dashboard blueprint: its checks on every request and how pages answer."""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import typing as t

from flask import abort
from flask import Blueprint
from flask import current_app
from flask import Flask
from flask import jsonify
from flask import render_template
from flask import request
from flask import Response
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as BaseResponse

from ..engine.model import escape
from ._request_checks import cross_site_problem
from ._request_checks import loopback_host_problem
from ._security import add_security_headers
from ._security import check_authorized
from ._security import csrf_token
from ._security import has_secret_key
from ._store_views import json_ready

if t.TYPE_CHECKING:
    from .._extension import SQSJobs

Authorize: t.TypeAlias = cabc.Callable[[], object]

ANONYMOUS_HOSTS = (
    "This dashboard has no login (allow_anonymous=True), so it answers only"
    " requests addressed to this machine itself. To serve it under another name,"
    " list that name in app.config['TRUSTED_HOSTS'], or mount it with"
    " authorize= behind the app's login."
)


@dataclasses.dataclass(frozen=True)
class Dashboard:
    """What the views share: the extension and, when served standalone, its app."""

    jobs: SQSJobs
    served_app: Flask | None = None

    def app(self) -> Flask:
        """The app whose queues and store are shown (not the standalone server's)."""
        if self.served_app is not None:
            return self.served_app
        return t.cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]

    def show_payloads(self) -> bool:
        return self.jobs.config(self.app()).dashboard_show_payloads


def make_dashboard(
    jobs: SQSJobs,
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
            "has_store": jobs.has_store(dashboard.app()),
        }

    _views_queues.register(blueprint, dashboard)
    _views_store.register(blueprint, dashboard)
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


def wants_json() -> bool:
    """Whether the client asked for JSON (``Accept: application/json``)."""
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json"


def respond(
    template: str, data: dict[str, t.Any], status: int = 200
) -> Response | tuple[str, int]:
    """Answer with ``data`` as JSON or rendered into ``template`` (escaped)."""
    if wants_json():
        response = jsonify(json_ready(data))
        response.status_code = status
        return response
    page = t.cast(dict[str, t.Any], shown(data))
    return render_template(f"sqs_jobs_dashboard/{template}", **page), status


def shown(value: t.Any) -> t.Any:
    """``value`` with every string, keys too, made printable (:func:`escape`).

    Controls, lone surrogates, bidi overrides, zero-width and other invisible
    characters are shown escaped (``\\u202e``). Newlines stay (a payload is
    shown pretty-printed); HTML renders them as spaces elsewhere.
    Autoescaping then takes care of HTML; this keeps a crafted message from
    breaking the page's encoding, or hiding or reordering its text.
    """
    if isinstance(value, str):
        return "\n".join(escape(line) for line in value.split("\n"))
    if isinstance(value, dict):
        return {shown(k): shown(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown(v) for v in value]
    return value


def _http_error(error: HTTPException) -> Response | tuple[str, int]:
    status = error.code or 500
    data = {"error": error.name, "message": error.description, "status": status}
    return respond("error.html", data, status)
