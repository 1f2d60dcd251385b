"""``SQS_JOBS_RECORD_MODE``: which jobs get a record.

``"all"`` (the default) records every job. ``"failures"`` records only the
jobs that end ``failed`` or ``dead_lettered``: their one record is written
when they end, with the attempts it took, the times and the error. A float
in (0, 1] records that share of jobs, chosen by a hash of the job id, so a
job is recorded wholly (every transition, on every process) or not at all.
"""

from __future__ import annotations

import dataclasses
import hashlib

from .. import model as r

#: The statuses a ``"failures"`` mode records.
FAILURE_STATUSES = frozenset({r.FAILED, r.DEAD_LETTERED})


@dataclasses.dataclass(frozen=True)
class RecordMode:
    """A record mode: ``"all"``, ``"failures"`` or a share of jobs."""

    failures_only: bool = False
    #: The share of job ids recorded, in (0, 1].
    share: float = 1.0

    @classmethod
    def of(cls, setting: str | float) -> RecordMode:
        """The mode of a checked ``SQS_JOBS_RECORD_MODE`` value."""
        if setting == "failures":
            return cls(failures_only=True)
        if setting == "all":
            return cls()
        return cls(share=float(setting))

    def keeps(self, job_id: str, status: str) -> bool:
        """Whether a transition of ``job_id`` to ``status`` is written."""
        if self.failures_only:
            return status in FAILURE_STATUSES
        return self.share >= 1.0 or sampled(job_id, self.share)


def sampled(job_id: str, share: float) -> bool:
    """Whether ``job_id`` falls in ``share`` of all job ids (the same answer on
    every process and every run: a hash, not a random draw)."""
    digest = hashlib.blake2b(job_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2**64
