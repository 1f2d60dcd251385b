"""``flask sqs-jobs dashboard``: the dashboard alone, on the local machine.

Served by werkzeug's threaded server (one thread per request), which Flask
already depends on: fine for a few operators on one machine, which is all
this command is for. It listens on a loopback address only and has no
``authorize``; to reach the dashboard from elsewhere, mount the blueprint in
the app behind its login (``docs/dashboard.md``).
"""

from __future__ import annotations

import ipaddress
import secrets
import typing as t

import click
from flask import Flask
from flask.cli import with_appcontext
from werkzeug.serving import make_server

from ..commands import ConfigurationError
from ..commands import current_app_and_parts
from ..commands import option
from ._blueprint import make_dashboard

if t.TYPE_CHECKING:
    from .._extension import SQSJobs


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def standalone_app(jobs: SQSJobs, app: Flask) -> Flask:
    """A small app serving only the dashboard of ``app``, at ``/``, without authorize.

    Its session key is the app's ``SECRET_KEY`` or, when it has none, a random
    one for this run (sessions then end with the server).
    """
    server_app = Flask("flask_sqs_jobs.dashboard")
    server_app.config["SECRET_KEY"] = app.secret_key or secrets.token_hex(32)
    server_app.register_blueprint(
        make_dashboard(jobs, allow_anonymous=True, served_app=app)
    )
    return server_app


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

    To reach it from elsewhere, mount jobs.dashboard(authorize=...) in the
    app behind its login instead (docs/dashboard.md).
    """
    if not is_loopback(host):
        raise ConfigurationError(
            f"--host {host!r} is not a loopback address: the standalone dashboard"
            " has no login, so it listens on this machine only (e.g. 127.0.0.1 or"
            " ::1). To reach it from elsewhere, register jobs.dashboard(authorize=...)"
            " in your app behind its login, or tunnel (ssh -L 8000:127.0.0.1:8000)"
        )
    app, _ = current_app_and_parts()
    jobs: SQSJobs = app.extensions["sqs_jobs"]
    server = make_server(host, port, standalone_app(jobs, app), threaded=True)
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(f"dashboard on http://{shown_host}:{server.port}/ (Ctrl+C stops it)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
