"""Why a waiting retry failed: its own group's ``failed`` metric event, found by the retry's time.

The retry set keeps no error. The worker writes each failure to the stream's metric events
(``{S}:metrics``, event ``failed`` with ``group``, ``event_id``, ``entry_id`` and ``error``, see
:mod:`eventbus.metrics`) and schedules the retry right after, so the error is looked up there. One event
fails in several groups with different errors, so a failure is matched on the group as well as the event.

- A member scheduled by a current worker names the attempt that failed (``_failed_id``) and when the
  retry was scheduled (``_failed_at``, on the server's clock, as metric entry IDs are): its metric event
  was added within a flush of that moment (the worker writes metric events every ``metrics_interval``,
  1 s by default), so it is the ``failed`` event of that group and ``entry_id``, read forward from
  :data:`BEFORE_MS` before ``_failed_at`` and at most :data:`AFTER_MS` after it.
- A member from a worker before those fields holds only its event id, group and due time: its failure is
  the newest ``failed`` event of that event id *in that group* added before its due time (the retry is
  scheduled after the failure; a later failure of the same event would have run the retry first), read
  backwards from the due time plus :data:`AFTER_MS`.

Bounded: pages of :data:`PAGE` entries (XRANGE/XREVRANGE with COUNT, cheap at any depth), at most
:data:`READ_BUDGET` metric entries per call, twice the ~10,000 each metrics stream is capped at (the
worker's ``metrics_maxlen``, MAXLEN ~), and the walks move one way, so windows that overlap (retries
scheduled in the same second) are read once. A failure not found within them (trimmed away, or a flush
that never reached Redis) leaves the retry without an error, which the page says.

Written here rather than taken from a library: it is a bounded walk over one Redis stream with the
bus's own field names; nothing off the shelf knows either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventbus import keys as bus_keys
from eventbus.connection import SyncClient
from eventbus.text import id_order

from .client import get_client
from .commands import pipelined
from .errors import translated

#: How far before a retry's ``_failed_at`` its failure's metric event may sit (written by a flush that
#: ran while the scheduling script was on its way), and how far after (the next flush, or a slow one).
BEFORE_MS = 1_000
AFTER_MS = 60_000
PAGE = 1_000
READ_BUDGET = 20_000

_FAILED = b"failed"


@dataclass(frozen=True, slots=True)
class Wanted:
    """What identifies one retry's failure: see the module docstring."""

    ref: str
    group: bytes | None
    event_id: bytes | None
    failed_id: bytes | None  # the member's ``_failed_id`` (current workers)
    failed_at_ms: int | None  # the member's ``_failed_at``
    due_ms: int

    @property
    def anchored(self) -> bool:
        return self.failed_id is not None and self.failed_at_ms is not None and self.group is not None


#: ref -> (error text, entry ID that failed)
Found = dict[str, tuple[str | None, str | None]]


def _fields(flat: Sequence[bytes] | None) -> dict[bytes, bytes]:
    flat = flat or []
    return {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}


def _read(client: SyncClient, *command: object) -> list[Any]:
    """One XRANGE/XREVRANGE; [] when Redis refuses it (the metrics key holds another type): the errors are
    then unknown, and the retries are still listed."""
    reply = pipelined(client, [command], raise_on_error=False)[0]
    return [] if isinstance(reply, Exception) else reply


def _ms(entry_id: bytes) -> int:
    return id_order(entry_id)[0]


def _result(fields: dict[bytes, bytes]) -> tuple[str | None, str | None]:
    error, entry_id = fields.get(b"error"), fields.get(b"entry_id")
    return (
        error.decode("utf-8", "replace") if error else None,
        entry_id.decode("ascii", "replace") if entry_id else None,
    )


def failures_find(conn: str, stream: bytes, wanted: Sequence[Wanted]) -> Found:
    """The failure of each retry in ``wanted`` found in ``stream``'s metric events (absent when not found)."""
    if not wanted:
        return {}
    metrics = bus_keys.in_slot_of(stream, bus_keys.METRICS_SUFFIX.encode())
    client = get_client(conn)
    found: Found = {}
    with translated(conn):
        budget = _forward(client, metrics, [w for w in wanted if w.anchored], found, READ_BUDGET)
        _backward(client, metrics, [w for w in wanted if not w.anchored and w.event_id], found, budget)
    return found


def _forward(client: SyncClient, metrics: bytes, wanted: list[Wanted], found: Found, budget: int) -> int:
    """Current members: forward from each one's ``_failed_at`` (soonest first), matching group and entry."""
    by_key: dict[tuple[bytes, bytes], list[str]] = {}
    for w in wanted:
        by_key.setdefault((w.group, w.failed_id), []).append(w.ref)  # type: ignore[arg-type]  # failed_id is set on every wanted row (the query filtered the others out)
    cursor: bytes | None = None  # the last entry read: nothing before it is read again
    for w in sorted(wanted, key=lambda w: w.failed_at_ms or 0):
        start_ms = (w.failed_at_ms or 0) - BEFORE_MS
        end = str((w.failed_at_ms or 0) + AFTER_MS)
        while w.ref not in found and budget > 0:
            start = b"(" + cursor if cursor is not None and _ms(cursor) >= start_ms else str(max(start_ms, 0))
            batch = _read(client, "XRANGE", metrics, start, end, "COUNT", min(PAGE, budget))
            budget -= len(batch)
            for _entry_id, flat in batch:
                fields = _fields(flat)
                if fields.get(b"event") != _FAILED:
                    continue
                for ref in by_key.get((fields.get(b"group", b""), fields.get(b"entry_id", b"")), ()):
                    found.setdefault(ref, _result(fields))
            if batch:
                cursor = batch[-1][0]
            if len(batch) < PAGE:
                break
    return budget


def _backward(client: SyncClient, metrics: bytes, wanted: list[Wanted], found: Found, budget: int) -> None:
    """Members without ``_failed_at``: the newest failure of their event in their group before their due
    time, from one walk back from the latest due time."""
    if not wanted:
        return
    by_key: dict[tuple[bytes | None, bytes], list[Wanted]] = {}
    for w in wanted:
        by_key.setdefault((w.group, w.event_id), []).append(w)  # type: ignore[arg-type]  # event_id is set on every wanted row (the query filtered the others out)
    top: bytes = str(max(w.due_ms for w in wanted) + AFTER_MS).encode()
    while budget > 0 and any(w.ref not in found for w in wanted):
        batch = _read(client, "XREVRANGE", metrics, top, "-", "COUNT", min(PAGE, budget))
        budget -= len(batch)
        for entry_id, flat in batch:
            fields = _fields(flat)
            if fields.get(b"event") != _FAILED:
                continue
            event_id = fields.get(b"event_id", b"")
            for key in ((fields.get(b"group", b""), event_id), (None, event_id)):
                for w in by_key.get(key, ()):
                    if w.ref not in found and _ms(entry_id) <= w.due_ms + AFTER_MS:
                        found[w.ref] = _result(fields)
        if len(batch) < PAGE:
            break
        top = b"(" + batch[-1][0]
