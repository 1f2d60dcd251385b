"""What the worker needs from a store to hold limits across every process.

A store's ``limits()`` returns a :class:`LimitStore`. Each call is atomic on
its own (a conditional write), so any number of workers may race: a rate
limit is one token bucket per limit and key, a concurrency limit ``limit``
slots per limit and key, each held by one job under a lease that ends on its
own when the holder dies.
"""

from __future__ import annotations

import typing as t

#: Characters of a limit's key value kept in the store (longer ones are cut).
MAX_LIMIT_KEY_LENGTH = 200


class LimitStore(t.Protocol):
    """Token buckets and concurrency permits, shared by every worker.

    Called on a job's thread (``renew_permit`` on the heartbeat's renewal
    pool), never with a lock held.
    """

    def take_token(self, name: str, key: str, limit: int, per: float) -> float:
        """Take one token of the bucket ``(name, key)``.

        The bucket holds at most ``limit`` tokens and gains ``limit / per``
        each second; a bucket never used starts full. Returns 0 when a token
        was taken, else the seconds until one is there (nothing is taken).
        """
        ...

    def take_tokens(
        self, name: str, key: str, limit: int, per: float, most: int
    ) -> tuple[int, float]:
        """Take up to ``most`` tokens of ``(name, key)`` at once.

        The bucket is ``take_token``'s, holding :func:`capacity` tokens when
        full. Returns how many were taken (at least one when any is there)
        and, when none was, the seconds until one is.
        """
        ...

    def acquire_permit(
        self, name: str, key: str, limit: int, holder: str, lease_seconds: float
    ) -> int | None:
        """Take one of the ``limit`` slots of ``(name, key)`` for ``holder``.

        A slot is free when nobody holds it or its lease has ended. Returns
        the slot taken, or None when all ``limit`` are held.
        """
        ...

    def renew_permit(
        self, name: str, key: str, slot: int, holder: str, lease_seconds: float
    ) -> bool:
        """Push the slot's lease to ``lease_seconds`` from now; False when
        ``holder`` no longer holds it."""
        ...

    def release_permit(self, name: str, key: str, slot: int, holder: str) -> None:
        """Free the slot if ``holder`` still holds it."""
        ...
