"""Exit statuses: of ``flask sqs-worker``, ``flask sqs-jobs`` and ``JobWorker.run``.

Defined here once: the worker returns the first two, the command line adds
the others (SPEC's CLI section fixes 0, 1 and 2).
"""

from __future__ import annotations

#: The worker stopped gracefully (a signal, ``should_stop`` or a recycling limit).
EXIT_OK = 0
#: Every queue failed to receive 10 times in a row; let the supervisor restart.
EXIT_RECEIVE_FAILURES = 1
#: A command's SQS call was refused or could not reach SQS.
EXIT_SQS_ERROR = 1
#: A usage or configuration error: fix the command line or the config.
EXIT_USAGE = 2
#: A worker process died of an unexpected exception (``EX_SOFTWARE``).
EXIT_CRASHED = 70
#: A worker process of ``--processes`` reached a recycling limit and stopped
#: gracefully: its supervisor replaces it at once. A single worker process
#: exits :data:`EXIT_OK` instead (SPEC).
EXIT_RECYCLED = 75
