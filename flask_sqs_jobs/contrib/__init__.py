"""Integrations with tracing, error-reporting, metrics and hosting services.

Each integration is a module of its own, backed by an extra that installs its
SDK; importing a module whose SDK is missing raises an ``ImportError`` that
names the ``pip install "flask-sqs-jobs[...]"`` command to run:

- :mod:`.sentry`: :class:`~.sentry.SentryMiddleware` (extra ``sentry``)
- :mod:`.otel`: :class:`~.otel.OTelMiddleware` (extra ``otel``)
- :mod:`.newrelic`: :class:`~.newrelic.NewRelicMiddleware` (extra ``newrelic``)
- :mod:`.ecs`: :class:`~.ecs.EcsDrainMiddleware` (boto3 only, no extra)
- :mod:`.prometheus`: worker metrics (extra ``metrics``)

Only one trace-injecting middleware (Sentry, OpenTelemetry or New Relic) may
be active in a process. A failure inside a tracing integration is logged
(``integration_failed``) and never changes a job's outcome.
"""
