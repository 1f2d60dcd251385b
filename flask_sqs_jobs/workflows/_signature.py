"""Signatures: a task call as a value, checked now, stored and sent later.

``task.s(**kwargs)`` and ``task.si(**kwargs)`` build a :class:`Signature`:
the job type, queue, payload and a few enqueue options, checked against the
task's function and JSON as ``task.enqueue`` checks them. Arguments a
workflow supplies itself (``batch_id`` for a batch's callbacks,
``previous_result`` for a chain's steps) may be left out; the workflow
checks, when it is declared, that what is left out is only that.
A signature is sent through ``jobs.enqueue``, so through the one produce
pipeline, directly or into the outbox (``session=``).
"""

from __future__ import annotations

import collections.abc as cabc
import dataclasses
import inspect
import typing as t

from ..engine.model import JSONObject
from ..engine.producing import check_json

#: The correlation fields that name a job's batch, chain and step (they
#: show in its log lines too).
BATCH_FIELD = "workflow_batch_id"
CHAIN_FIELD, STEP_FIELD = "workflow_chain_id", "workflow_step"

#: The enqueue options a signature may carry: plain JSON values, so it can be
#: stored in a workflow's row and sent by another process.
SIGNATURE_OPTIONS = frozenset(
    {
        "delay_seconds",
        "max_runtime_seconds",
        "message_group_id",
        "correlation_fields",
        "priority",
        "tenant",
        "expires_in",
    }
)


class TaskOfSignature(t.Protocol):
    """What a signature needs of a task: its name, queue, function's signature."""

    name: str
    jobs: t.Any

    @property
    def signature(self) -> inspect.Signature: ...

    def build_payload(
        self,
        args: tuple[object, ...],
        kwargs: cabc.Mapping[str, object],
        *,
        partial: bool = False,
    ) -> JSONObject: ...


@dataclasses.dataclass(frozen=True)
class Signature:
    """One task call, ready to be sent now or later (``task.s`` / ``task.si``).

    ``immutable`` (``task.si``): a chain never adds the previous step's
    result to its payload.
    """

    job_type: str
    queue: str
    payload: JSONObject
    immutable: bool = False
    enqueue_options: JSONObject = dataclasses.field(default_factory=dict)
    _task: TaskOfSignature | None = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def options(self, **options: t.Any) -> Signature:
        """This signature with enqueue options (``delay_seconds``, ``priority``,
        ``message_group_id``, ``tenant``, ``expires_in``, ``max_runtime_seconds``,
        ``correlation_fields``) or another ``queue``.

        :raises TypeError: an option a stored signature cannot carry, or a
            value that is not JSON.
        """
        queue = options.pop("queue", None) or self.queue
        unknown = sorted(set(options) - SIGNATURE_OPTIONS)
        if unknown:
            raise TypeError(
                f"a signature cannot carry {', '.join(unknown)}; it takes"
                f" {', '.join(sorted(SIGNATURE_OPTIONS))} and queue"
            )
        merged = {**self.enqueue_options, **options}
        check_json(f"the options of the signature of {self.job_type!r}", merged)
        return dataclasses.replace(self, queue=queue, enqueue_options=merged)

    def missing(self) -> list[str]:
        """The task's required arguments this payload leaves out (unknown: none)."""
        if self._task is None:
            return []
        return [
            name
            for name, parameter in self._task.signature.parameters.items()
            if parameter.default is parameter.empty
            and parameter.kind
            in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            and name not in self.payload
        ]

    def accepts(self, name: str) -> bool:
        """Whether the task takes ``name`` as a keyword argument (unknown: yes)."""
        if self._task is None:
            return True
        parameters = self._task.signature.parameters
        return name in parameters or any(
            p.kind is p.VAR_KEYWORD for p in parameters.values()
        )

    def check_complete(self, what: str, supplied: cabc.Iterable[str] = ()) -> None:
        """Raise ``TypeError`` if the task would miss arguments when sent.

        :param supplied: the arguments the workflow adds itself.
        """
        supplied = set(supplied)
        for name in supplied:
            if not self.accepts(name):
                raise TypeError(
                    f"{what}: task {self.job_type!r} must take {name}= (the"
                    " workflow passes it)"
                )
        left = [name for name in self.missing() if name not in supplied]
        if left:
            raise TypeError(
                f"{what}: task {self.job_type!r} is missing argument(s)"
                f" {', '.join(left)}"
            )

    def enqueue(self, *, session: t.Any = None) -> str:
        """Send the job now (or into the outbox with ``session=``); its job id.

        :raises TypeError: the payload misses a required argument.
        """
        self.check_complete(f"signature of {self.job_type!r}")
        if self._task is None:
            raise RuntimeError(
                "a signature read back from storage has no task; send it with"
                " send_signature(jobs, signature)"
            )
        return send_signature(self._task.jobs, self, session=session)

    def as_json(self) -> JSONObject:
        """The signature as stored in a workflow's row."""
        return {
            "job_type": self.job_type,
            "queue": self.queue,
            "payload": self.payload,
            "immutable": self.immutable,
            "options": self.enqueue_options,
        }

    @classmethod
    def from_json(cls, value: JSONObject) -> Signature:
        """A signature stored by :meth:`as_json`."""
        return cls(
            job_type=str(value["job_type"]),
            queue=str(value["queue"]),
            payload=dict(value["payload"]),
            immutable=bool(value.get("immutable", False)),
            enqueue_options=dict(value.get("options") or {}),
        )


def make_signature(
    task: TaskOfSignature,
    queue: str,
    kwargs: cabc.Mapping[str, object],
    *,
    immutable: bool,
    options: JSONObject | None = None,
) -> Signature:
    """The signature of calling ``task`` with ``kwargs``, checked as enqueue checks.

    :raises TypeError: an unknown argument, or one that is not JSON.
    """
    payload = task.build_payload((), kwargs, partial=True)
    chosen = {k: v for k, v in (options or {}).items() if k in SIGNATURE_OPTIONS}
    return Signature(task.name, queue, payload, immutable, chosen, task)


def send_signature(
    jobs: t.Any,
    signature: Signature,
    *,
    session: t.Any = None,
    extra: JSONObject | None = None,
    job_id: str | None = None,
    correlation_fields: JSONObject | None = None,
) -> str:
    """Send ``signature`` through ``jobs.enqueue``; return its job id.

    :param extra: arguments the workflow adds to the payload.
    :param correlation_fields: the workflow's own fields, over the signature's.
    """
    from ..engine.model import new_job_id

    options = dict(signature.enqueue_options)
    fields = {**(options.pop("correlation_fields", None) or {})}
    fields.update(correlation_fields or {})
    job_id = job_id or new_job_id()
    payload = {**signature.payload, **(extra or {})}
    if fields:
        options["correlation_fields"] = fields
    if session is not None:
        options["session"] = session
    jobs.enqueue(signature.queue, signature.job_type, payload, job_id=job_id, **options)
    return job_id
