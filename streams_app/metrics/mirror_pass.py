"""A full mirror pass done in parts, one part per tick, so that a first sync of 100k streams fits its
interval however many keys there are (the sync itself, and the pass in one go: :mod:`.mirror`).

Each part goes on with the pass's ``SCAN`` from the cursor the previous part saved on
:class:`~streams_app.metrics.models.MirrorState`, reads and writes up to ``max_keys`` streams (with their
groups and consumers, as a full pass does) within ``budget_s``, and saves the cursor after each chunk it
wrote. Rows the pass writes get ``last_seen`` set to the time they were written.

Nothing is marked deleted until the pass's ``SCAN`` has come back to cursor 0: only then has it seen every
key present for the whole pass (``SCAN``'s guarantee), and the rows of the connection not seen since the
pass started (``last_seen`` before it) are the streams that vanished meanwhile; those it did see are
checked once more (one pipelined ``TYPE`` each), so a stream deleted after its part was written is marked
too, and the mirror ends the pass holding the keys a ``SCAN`` lists then. They are marked once (rows
marked already are left alone), and not at all when a primary could not be read during the pass. Until the
first pass completes, :func:`~streams_app.metrics.mirror.mirror_filling` tells the pages the mirror is
partial ("synced N of about M", M the keys in Redis when the pass started).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from streams_app.metrics.bulk import chunks
from streams_app.metrics.mirror import (
    SYNC_CHUNK,
    SyncResult,
    mark_deleted,
    mark_vanished,
    statistics_refresh,
    sync_chunk,
)
from streams_app.metrics.models import MirrorState, StreamMirror
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.commands import SCAN_COUNT, scan_streams
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads.server import server_overview
from streams_app.redis_ops.reads.streams import existing_streams

#: Keys per pipelined TYPE round trip when the pass's end checks the streams it saw.
CHECK_CHUNK = 5000

_TOTALS = ("created", "changed", "returned", "groups", "groups_created", "groups_deleted", "consumers",
           "consumers_deleted")


def mirror_pass_part(*, conn: str, max_keys: int, budget_s: float | None = None) -> SyncResult:
    """One part of the full pass of ``conn`` (the first part starts one): see the module docstring.

    Raises :class:`OpsError` if Redis fails us; what the part wrote before stays, and the next part
    goes on from the cursor saved with it.
    """
    with gc_paused():
        return _part(conn, max_keys=max(1, max_keys), budget_s=budget_s)


def _seen_then_deleted(conn: str, *, since: datetime, now: datetime) -> int:
    """Mark deleted the streams the pass saw (or a snapshot found) that are gone by its end: one pipelined
    TYPE per key, :data:`CHECK_CHUNK` keys a round trip (at 100k streams 20 round trips). Keys whose node
    did not answer are left as they are."""
    rows = StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True, last_seen__gte=since)
    gone: list[int] = []
    batch: list[tuple[int, bytes]] = []
    for pk, key in rows.values_list("id", "key").iterator(chunk_size=CHECK_CHUNK):
        batch.append((pk, bytes(key)))
        if len(batch) >= CHECK_CHUNK:
            gone += _absent(conn, batch)
            batch = []
    gone += _absent(conn, batch)
    return mark_deleted(gone, now=now)


def _absent(conn: str, rows: list[tuple[int, bytes]]) -> list[int]:
    found, missed = existing_streams(conn, [key for _, key in rows])
    if missed:
        return []
    present = set(found)
    return [pk for pk, key in rows if key not in present]


def _part(conn: str, *, max_keys: int, budget_s: float | None) -> SyncResult:
    started = time.perf_counter()
    deadline = None if budget_s is None else time.monotonic() + budget_s
    state = MirrorState.objects.filter(connection=conn).first()
    if state is None or state.pass_cursor is None:  # a new pass
        about: int | None
        try:
            about = server_overview(conn).dbsize
        except OpsError:
            about = None
        fresh: dict[str, Any] = {"pass_cursor": 0, "pass_started_at": timezone.now(), "pass_streams": 0,
                                 "pass_keys_about": about, "partial": ""}
        state, _ = MirrorState.objects.update_or_create(
            connection=conn, defaults=fresh, create_defaults={**fresh, "synced_at": fresh["pass_started_at"]}
        )
    assert state.pass_cursor is not None and state.pass_started_at is not None
    missed = dict.fromkeys(filter(None, state.partial.split(", ")))
    totals = dict.fromkeys(_TOTALS, 0)
    cursor, written, redis_s, done = state.pass_cursor, 0, 0.0, False
    steps = scan_streams(conn, cursor=cursor, count=min(SCAN_COUNT, max_keys))
    while not done and written < max_keys and (deadline is None or time.monotonic() < deadline):
        read_from = time.perf_counter()
        keys: list[bytes] = []
        for step in steps:  # SCAN until a chunk's worth of keys (or the part's), or the end of the pass
            keys += step.keys
            missed.update(dict.fromkeys(step.missed))
            cursor = step.cursor
            if cursor == 0:
                done = True
                break
            if len(keys) >= min(SYNC_CHUNK, max_keys - written):
                break
            if deadline is not None and time.monotonic() >= deadline:
                break  # a keyspace of few streams among many other keys: SCAN stops at the budget too
        else:
            done = True
        streams, _, unread = snapshot_reads.streams_read_covered(conn, keys, consumers=True)
        missed.update(dict.fromkeys(unread))
        redis_s += time.perf_counter() - read_from
        now = timezone.now()
        for part in chunks(streams, SYNC_CHUNK):
            with transaction.atomic():
                sync_chunk(conn, part, now=now, totals=totals)
        written += len(streams)
        state.pass_streams += len(streams)
        state.pass_cursor, state.partial = (None if done else cursor), ", ".join(missed)
        state.save(update_fields=["pass_cursor", "pass_streams", "partial"])

    now = timezone.now()
    deleted = 0
    if done:
        if not missed:
            deleted = mark_vanished(conn, now=now, unseen_since=state.pass_started_at)
            deleted += _seen_then_deleted(conn, since=state.pass_started_at, now=now)
            state.full_synced_at = now
        statistics_refresh()
    state.synced_at, state.full = now, done
    state.duration_ms = int((time.perf_counter() - started) * 1000)
    state.redis_ms = int(redis_s * 1000)
    state.streams, state.streams_written = state.pass_streams, written
    state.save()
    return SyncResult(
        conn=conn, synced_at=now, streams=state.pass_streams, streams_created=totals["created"],
        streams_changed=totals["changed"], streams_deleted=deleted, streams_returned=totals["returned"],
        groups=totals["groups"], groups_created=totals["groups_created"], groups_deleted=totals["groups_deleted"],
        consumers=totals["consumers"], consumers_deleted=totals["consumers_deleted"], redis_ms=state.redis_ms,
        duration_ms=state.duration_ms, full=True, streams_written=written, missed=tuple(missed),
        pass_complete=done, pass_streams=state.pass_streams,
    )
