"""``SQS_JOBS_OUTBOX_RELAYS``: at most N relays active against one store.

Every ``flask sqs-worker`` runs a relay, so a fleet of hundreds would poll
the outbox hundreds of times a second with nothing pending. A relay first
takes one of N slots, the concurrency permits of the store's limits
(``sqs_jobs_limit_permits``, limit ``sqs_jobs_outbox_relay``): it relays
while it holds one, renewing its lease every few seconds; the others stand
by, asking for a slot every :data:`STANDBY_SECONDS`, and take over a slot
whose holder stopped renewing it (killed, lost host) once its lease ends. A
relay that stops gives its slot back at once. When the slots cannot be read
(a database without the limits table, an error), the relay runs anyway: an
unsent row is worse than a busier database.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
import typing as t

import structlog

from ...engine.flow import LimitStore
from ...engine.model import loggable_text

log = structlog.get_logger(__name__)

#: The limit the relay slots are counted under.
LIMIT_NAME = "sqs_jobs_outbox_relay"
#: How long a slot is held without a renewal (a dead relay's comes back then).
LEASE_SECONDS = 10.0
#: How often a relay holding a slot renews it.
RENEW_SECONDS = 3.0
#: How often a relay standing by asks for a slot.
STANDBY_SECONDS = 2.0


class RelayLease:
    """This relay's slot among ``relays``: taken, renewed, given back.

    Used by one relay's thread only. :meth:`active` answers whether the
    relay may run a pass now; it costs a store call at most every
    :data:`RENEW_SECONDS` while active, every :data:`STANDBY_SECONDS`
    while standing by, and nothing in between.
    """

    def __init__(
        self,
        limits: LimitStore,
        relays: int,
        *,
        clock: t.Callable[[], float] = time.monotonic,
    ) -> None:
        self._limits = limits
        self._relays = relays
        self._clock = clock
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self._slot: int | None = None
        self._next_call = 0.0
        self._failing = False

    @property
    def slot(self) -> int | None:
        """The slot held, or None (standing by)."""
        return self._slot

    def active(self) -> bool:
        """Whether this relay may run a pass: it holds a slot (renewed when
        due), took a free one, or the slots cannot be read."""
        now = self._clock()
        if now < self._next_call:
            return self._slot is not None or self._failing
        try:
            if self._slot is not None and not self._limits.renew_permit(
                LIMIT_NAME, "", self._slot, self.holder, LEASE_SECONDS
            ):
                log.warning("outbox_relay_standing_by", reason="its slot was lost")
                self._slot = None
            if self._slot is None:
                self._slot = self._limits.acquire_permit(
                    LIMIT_NAME, "", self._relays, self.holder, LEASE_SECONDS
                )
                if self._slot is not None:
                    log.info(
                        "outbox_relay_active", slot=self._slot, relays=self._relays
                    )
        except Exception as exc:
            if not self._failing:
                log.warning(
                    "outbox_relay_lease_failed",
                    error=loggable_text(str(exc), 1000),
                    hint="relaying anyway; flask sqs-jobs store init makes the tables",
                )
            self._failing = True
            self._slot = None
            self._next_call = now + STANDBY_SECONDS
            return True
        self._failing = False
        self._next_call = now + (
            RENEW_SECONDS if self._slot is not None else STANDBY_SECONDS
        )
        return self._slot is not None

    def release(self) -> None:
        """Give the slot back (a stopping relay); a failure leaves it to its lease."""
        slot, self._slot = self._slot, None
        self._next_call = 0.0
        if slot is None:
            return
        try:
            self._limits.release_permit(LIMIT_NAME, "", slot, self.holder)
        except Exception as exc:
            log.warning(
                "outbox_relay_lease_failed", error=loggable_text(str(exc), 1000)
            )
