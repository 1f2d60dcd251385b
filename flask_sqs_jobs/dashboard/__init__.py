"""The operators' dashboard: a Flask blueprint built by :meth:`SQSJobs.dashboard`.

See ``docs/dashboard.md``. The modules: ``_blueprint`` (the blueprint and how
pages answer), ``_security`` (authorize, CSRF, headers), ``_request_checks``
(Host, cross-site requests, when a page may peek), ``_views_queues``,
``_letters_page`` and ``_dead_letters`` (queues, dead letters, redrive and delete),
``_views_store`` and ``_store_reads`` (what a store adds; schedules),
``_charts``, ``_serve`` (``flask sqs-jobs dashboard``).
"""

from __future__ import annotations

from ._blueprint import make_dashboard
from ._serve import dashboard_command

__all__ = [
    "dashboard_command",
    "make_dashboard",
]
