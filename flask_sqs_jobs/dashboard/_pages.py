"""What every page of the dashboard shares: the app it shows, and how it answers.

:class:`Dashboard` is handed to each view; :func:`respond` renders a page's
data as HTML (every string made printable first) or JSON.
"""

from __future__ import annotations

import dataclasses
import typing as t

from flask import current_app
from flask import Flask
from flask import jsonify
from flask import render_template
from flask import request
from flask import Response

from ..config import AppParts
from ..engine.model import escape
from ._store_reads import json_ready


@dataclasses.dataclass(frozen=True)
class Dashboard:
    """What the views share: the extension and, when served standalone, its app."""

    jobs: HasParts
    served_app: Flask | None = None

    def parts(self) -> AppParts:
        """The settings and parts of the app shown."""
        return self.jobs.parts(self.app())

    def app(self) -> Flask:
        """The app whose queues and store are shown (not the standalone server's)."""
        if self.served_app is not None:
            return self.served_app
        return t.cast(Flask, current_app._get_current_object())  # type: ignore[attr-defined]

    def show_payloads(self) -> bool:
        return self.parts().config.dashboard_show_payloads


class HasParts(t.Protocol):
    """What the dashboard needs of the extension (``SQSJobs``): each app's parts."""

    def parts(self, app: Flask | None = None) -> AppParts: ...


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
