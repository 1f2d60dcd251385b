"""Blinker signals sent by the Flask extension; the sender is always the app.

Receivers take the sender plus keyword arguments and should accept
``**extra`` so that new arguments can be added. A receiver that raises is
logged (``signal_receiver_failed``), reported as a ``worker_error`` of kind
``"hook"``, and never changes a job's outcome.
"""

from __future__ import annotations

from blinker import Namespace

_signals = Namespace()

#: A job was sent. Keyword arguments: ``job`` (:class:`~flask_sqs_jobs.Job`),
#: ``queue`` (logical name), ``message_id``.
job_enqueued = _signals.signal("job-enqueued")
#: A worker received a job and leased its message, before its handler runs
#: (also for a job that is deferred or a duplicate). Keyword arguments:
#: ``job``, ``queue``, ``message_id``, ``receive_count``. Every job that sends
#: it sends ``job_finished`` too.
job_received = _signals.signal("job-received")
#: A worker is about to run a job's handler. Keyword arguments: ``job``,
#: ``queue``, ``message_id``, ``receive_count``.
job_started = _signals.signal("job-started")
#: A job's message was settled. Keyword arguments: ``job``, ``queue``,
#: ``message_id``, ``outcome`` (a str such as ``"success"``), ``duration_ms``,
#: ``exception`` (the handler's exception or None), ``result`` (the handler's
#: return value; None when it raised) and ``will_retry`` (True when the
#: message will come back to the queue).
job_finished = _signals.signal("job-finished")
#: A worker started. Keyword arguments: ``queues`` (list of logical names).
worker_started = _signals.signal("worker-started")
#: A worker stopped. Keyword arguments: ``reason`` (``"stop_requested"``,
#: ``"should_stop"`` or ``"receive_failures"``).
worker_stopped = _signals.signal("worker-stopped")
#: Something failed outside a handler. Keyword arguments: ``queue`` (the
#: logical queue, or None when it concerns no single queue), ``exception``
#: and ``kind``: ``"receive"`` (receiving from the queue), ``"settle"`` (a
#: call settling a message: delete, visibility, dead letter, deferral,
#: release), ``"hook"`` (an engine hook or a signal receiver raised) or
#: ``"store"`` (a job-store call: idempotency keys, job records, the worker's
#: row).
worker_error = _signals.signal("worker-error")
