"""Workflows: signatures, chains and batches whose callbacks run once (SQL stores).

``task.s`` / ``task.si`` make a :class:`Signature`; ``jobs.chain`` a chain,
``jobs.batch`` a batch (:class:`Workflows`). Their rows live in the SQL
store's tables and move by conditional updates in the same transaction as
the outbox rows of what each move sends; the worker records outcomes through
:class:`WorkflowMiddleware`, before a message is settled. SQLAlchemy is
imported only when a workflow is used.
"""

from __future__ import annotations

from ._methods import Workflows
from ._outcomes import with_workflows
from ._outcomes import WorkflowHooks
from ._outcomes import WorkflowMiddleware
from ._signature import make_signature
from ._signature import send_signature
from ._signature import Signature
from ._signature import TaskOfSignature
from ._store import sql_store

__all__ = [
    "Signature",
    "TaskOfSignature",
    "WorkflowHooks",
    "WorkflowMiddleware",
    "Workflows",
    "make_signature",
    "send_signature",
    "sql_store",
    "with_workflows",
]
