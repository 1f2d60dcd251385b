"""``flask sqs-jobs dashboard``: the dashboard alone, on the local machine.

Served by werkzeug's threaded server (one thread per request), which Flask
already depends on: fine for a few operators on one machine, which is all
this command is for. It listens on a loopback address only and has no
``authorize``; to reach the dashboard from elsewhere, mount the blueprint in
the app behind its login (``docs/dashboard.md``).

Listening on loopback keeps other machines out, not other users of this one
nor a web page: so every request must name a loopback ``Host`` with the
served port (a DNS-rebinding page names its own), and carry the token made
for this run. The token is printed once, in the URL; a browser that opens it
gets it as a cookie (``SameSite=Strict``, ``HttpOnly``) and is sent on to the
same page without it; a script may send ``Authorization: Bearer TOKEN``.
"""

from __future__ import annotations

import hmac
import secrets
import socket
import urllib.parse

import click
from flask import Flask
from flask import redirect
from flask import request
from flask import Response
from flask.cli import with_appcontext
from werkzeug.serving import make_server
from werkzeug.urls import iri_to_uri
from werkzeug.wrappers import Response as BaseResponse

from ..commands import ConfigurationError
from ..commands import current_app_and_parts
from ..commands import option
from ._blueprint import make_dashboard
from ._pages import HasParts
from ._request_checks import is_loopback as is_loopback
from ._request_checks import loopback_host_problem
from ._security import SECURITY_HEADERS

#: The query parameter that carries the token in the printed URL.
TOKEN_PARAMETER = "token"
_COOKIE_PREFIX = "sqs_jobs_dashboard_token"
#: Where :func:`standalone_app` keeps the token of the run.
TOKEN_EXTENSION = "sqs_jobs_dashboard_token"


def standalone_app(jobs: HasParts, app: Flask, *, token: str | None = None) -> Flask:
    """A small app serving only the dashboard of ``app``, at ``/``, without authorize.

    Every request must name a loopback ``Host`` with the port it was received
    on, and carry ``token`` (see the module's docstring; by default a random
    one, kept in ``extensions[TOKEN_EXTENSION]``). Its session key is the
    app's ``SECRET_KEY`` or, when it has none, a random one for this run
    (sessions then end with the server).
    """
    if token is None:
        token = secrets.token_urlsafe(32)
    elif not token:
        raise ValueError("the dashboard's token must not be empty")
    server_app = Flask("flask_sqs_jobs.dashboard")
    server_app.extensions[TOKEN_EXTENSION] = token
    server_app.config["SECRET_KEY"] = app.secret_key or secrets.token_hex(32)
    server_app.config["SESSION_COOKIE_SAMESITE"] = "Strict"
    server_app.register_blueprint(
        make_dashboard(jobs, allow_anonymous=True, served_app=app)
    )
    server_app.before_request(lambda: _check_local_request(token))
    return server_app


def name_cookies(server_app: Flask, port: int) -> None:
    """Name the session cookie after ``port``: cookies do not tell ports apart, so
    the dashboard's would replace an app's of the same name on this machine."""
    server_app.config["SESSION_COOKIE_NAME"] = f"sqs_jobs_dashboard_session_{port}"


def _check_local_request(token: str) -> BaseResponse | None:
    port = int(request.environ.get("SERVER_PORT") or 80)
    problem = loopback_host_problem(request.environ.get("HTTP_HOST"), port)
    if problem is not None:
        return _refused(
            421,
            f"Refused: {problem}. The standalone dashboard answers only"
            f" http://127.0.0.1:{port}/, http://localhost:{port}/ and"
            f" http://[::1]:{port}/ (whichever it listens on).",
        )
    cookie = f"{_COOKIE_PREFIX}_{port}"
    offered = request.args.get(TOKEN_PARAMETER)
    if offered is not None and _matches(offered, token):
        if request.method not in ("GET", "HEAD"):
            return None
        # Take the token out of the address bar and the history.
        args = request.args.copy()
        args.poplist(TOKEN_PARAMETER)
        query = urllib.parse.urlencode(args.to_dict(flat=False), doseq=True)
        location = iri_to_uri(request.path) + ("?" + query if query else "")
        response = redirect(location, code=303)
        response.set_cookie(cookie, token, httponly=True, samesite="Strict")
        return response
    bearer = request.headers.get("Authorization", "")
    scheme, _, credentials = bearer.partition(" ")
    if _matches(request.cookies.get(cookie), token) or (
        scheme.lower() == "bearer" and _matches(credentials.strip(), token)
    ):
        return None
    return _refused(
        403,
        "Refused: this dashboard needs the token of this run. Open the address"
        " `flask sqs-jobs dashboard` printed when it started"
        f" (http://127.0.0.1:{port}/?token=...), or send the header"
        " 'Authorization: Bearer TOKEN'. A token of an earlier run no longer works.",
    )


def _matches(offered: str | None, token: str) -> bool:
    if not offered:
        return False
    return hmac.compare_digest(offered.encode(), token.encode())


def _refused(status: int, message: str) -> Response:
    response = Response(message + "\n", status, mimetype="text/plain")
    response.headers.update(SECURITY_HEADERS)
    return response


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host`` (an address or ``localhost``) and ``port``.

    Bound here rather than by werkzeug, which answers a port in use with a
    message of its own and exits.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(128)
    except OSError:
        listening.close()
        raise
    return listening


@click.command("dashboard")
@option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="A loopback address: only this machine can reach the dashboard.",
)
@with_appcontext
def dashboard_command(port: int, host: str) -> None:
    """Serve the dashboard on this machine only, without a login.

    The address it prints carries a token made for this run: only a browser
    that opened it (or a script sending the token) is answered. To reach the
    dashboard from elsewhere, mount jobs.dashboard(authorize=...) in the app
    behind its login instead (docs/dashboard.md).
    """
    if not is_loopback(host):
        raise ConfigurationError(
            f"--host {host!r} is not a loopback address: the standalone dashboard"
            " has no login, so it listens on this machine only (e.g. 127.0.0.1 or"
            " ::1). To reach it from elsewhere, register jobs.dashboard(authorize=...)"
            " in your app behind its login, or tunnel (ssh -L 8000:127.0.0.1:8000)"
        )
    bind = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    shown_host = f"[{bind}]" if ":" in bind else bind
    app, _ = current_app_and_parts()
    jobs: HasParts = app.extensions["sqs_jobs"]
    server_app = standalone_app(jobs, app)
    token = server_app.extensions[TOKEN_EXTENSION]
    try:
        listening = _listen(bind, port)
    except OSError as exc:
        raise click.ClickException(
            f"cannot listen on {shown_host} port {port}: {exc.strerror or exc}"
            + (
                " (is IPv6 turned off on this machine? try --host 127.0.0.1)"
                if ":" in bind
                else ""
            )
        ) from None
    with listening:
        server = make_server(
            bind, port, server_app, threaded=True, fd=listening.fileno()
        )
    name_cookies(server_app, server.port)
    click.echo(
        f"dashboard on http://{shown_host}:{server.port}/?{TOKEN_PARAMETER}={token}"
        " (Ctrl+C stops it)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
