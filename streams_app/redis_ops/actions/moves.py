"""Requeue across hash slots, on a console connection: the steps are :mod:`eventbus.moves`.

A dead letter whose target is in another slot than its DLQ (``orders:dlq`` -> ``orders`` on Redis
Cluster) cannot be moved by one script; :mod:`eventbus.moves` moves it in steps that each stay
atomic on their node and documents what a kill between them leaves. It is one copy, shared with
``python -m eventbus requeue``, so a console job and a terminal respect each other's leases. This
module only hands it the connection's client; the callers (:mod:`.dlq`) translate errors.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventbus import moves
from eventbus.moves import Moved, Packed

from ..client import get_client


def move_across(
    conn: str, dlq_key: bytes, target: bytes, planned: Sequence[tuple[str, Sequence[bytes]]], *, owner: str
) -> Moved:
    """Lease, add, release and forget ``planned`` (DLQ ID, flat field/value list) on ``conn``."""
    return moves.move_across(get_client(conn), dlq_key, target, planned, owner=owner)


def add_packed_and_release(
    conn: str, dlq_key: bytes, batch: Sequence[Packed], *, order: Sequence[str], at_head: bool
) -> list[Moved]:
    """Add, release and forget the entries ``lua/requeue_rule.lua`` leased and packed, per target."""
    return moves.add_packed_and_release(get_client(conn), dlq_key, batch, order=order, at_head=at_head)
