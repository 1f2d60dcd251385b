"""Request-id correlation: one id per web request, carried by its jobs."""

from __future__ import annotations

import re
import uuid

from flask import has_request_context
from flask import request
from flask import Response

#: Incoming ids longer than this, or with other characters, are replaced by a
#: generated id: the header is untrusted and travels with every job.
_ACCEPTABLE_ID = re.compile(r"[A-Za-z0-9._:/@+=-]{1,128}")
#: Where the id is kept: the WSGI environ is the request's own. (``g`` is not:
#: a request reuses an app context that is already pushed, as in tests.)
_ENVIRON_KEY = "flask_sqs_jobs.request_id"


def current_request_id(header: str) -> str | None:
    """Return this request's id (from ``header``, or generated); None outside one."""
    if not has_request_context():
        return None
    request_id: str | None = request.environ.get(_ENVIRON_KEY)
    if request_id is None:
        incoming = request.headers.get(header)
        if incoming is not None and _ACCEPTABLE_ID.fullmatch(incoming):
            request_id = incoming
        else:
            request_id = uuid.uuid4().hex
        request.environ[_ENVIRON_KEY] = request_id
    return request_id


def add_request_id_header(response: Response, header: str) -> Response:
    """Put the request's id on the response, so a client can quote it."""
    if header not in response.headers:
        request_id = current_request_id(header)
        if request_id is not None:
            response.headers[header] = request_id
    return response
