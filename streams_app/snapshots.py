"""The mirror sync, the metric snapshots, their rollups and retention, and the series charts read.

Three beat tasks (thin interfaces in :mod:`streams_app.tasks`) call into this module:

- :func:`mirror_sync` brings the mirror tables of one connection in line with what Redis reports: new
  streams, groups and consumers get rows, changed ones are updated, vanished ones are marked
  ``deleted_at`` (never forgotten: their history stays, and a key that returns gets its old row back).
- :func:`snapshot_take` records one sample per stream, group and DLQ of every connection for one *tick*,
  the interval-aligned time (:func:`snapshot_tick_for`). The tick's :class:`SnapshotRun` row is unique, so
  two overlapping runs for the same tick write one snapshot; the samples are bulk-inserted with
  ``ignore_conflicts`` under their own unique (object, resolution, at) constraints as a second guard. The
  beat task also holds a Redis lock (SET NX PX, shorter than the interval) so runs rarely overlap at all.
- :func:`samples_downsample` rolls raw samples up into 1-minute and 1-hour rows (averages of length, rate,
  lag, pending and depth; maximum of the oldest pending entry's idle time; sum of entries added) and
  :func:`samples_prune` applies the retention: raw rows are deleted only once both rollups cover them.

:func:`series` is what charts read: one metric of one object over a window, at the finest resolution whose
retention still covers the window's start.
"""

from __future__ import annotations

import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings
from django.db import models, transaction
from django.db.models import Avg, Max, Sum
from django.utils import timezone

from streams_app import signals
from streams_app.models_metrics import (
    TEXT_MAX,
    ConsumerMirror,
    DlqSample,
    GroupMirror,
    GroupSample,
    Resolution,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.conventions import detect_dlq, dlq_source_streams
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.snapshot_reads import ConsumerFacts, GroupFacts, StreamFacts

log = logging.getLogger(__name__)

#: Rows per INSERT/UPDATE batch and ids per ``IN (...)`` (SQLite limits the parameters of a statement).
BATCH = 500
#: A rate is computed against the previous tick only if that tick is at most this old.
RATE_MAX_GAP = timedelta(minutes=10)
#: Rollup buckets (per resolution and table) one call of :func:`samples_downsample` may compute.
MAX_BUCKETS = {Resolution.MINUTE: 240, Resolution.HOUR: 6}
BUCKET_SIZE = {Resolution.MINUTE: timedelta(minutes=1), Resolution.HOUR: timedelta(hours=1)}


# ------------------------------------------------------------------------------------------ mirror


@dataclass(frozen=True, slots=True)
class SyncResult:
    """What one :func:`mirror_sync` found and changed."""

    conn: str
    synced_at: datetime
    streams: int  # present in Redis
    streams_created: int
    streams_changed: int
    streams_deleted: int
    streams_returned: int
    groups: int
    groups_created: int
    groups_deleted: int
    consumers: int
    consumers_deleted: int
    redis_ms: int
    duration_ms: int


_STREAM_FIELDS = (
    "key_text", "length", "first_id", "last_id", "last_entry_ms", "last_generated_id", "entries_added",
    "groups_count", "pending", "lag", "is_dlq", "dlq_convention", "dlq_sources",
)
_GROUP_FIELDS = (
    "name_text", "consumers", "pending", "last_delivered_id", "entries_read", "lag", "oldest_pending_id",
    "oldest_pending_idle_ms",
)
_CONSUMER_FIELDS = ("name_text", "pending", "idle_ms", "inactive_ms")


def _id_ms(entry_id: str | None) -> int | None:
    return int(entry_id.split("-", 1)[0]) if entry_id else None


def _stream_values(facts: StreamFacts) -> dict[str, Any]:
    kind = detect_dlq(facts.key)
    lags = [g.lag for g in facts.groups if g.lag is not None]
    return {
        "key_text": display_text(facts.key)[:TEXT_MAX],
        "length": facts.length,
        "first_id": facts.first_id,
        "last_id": facts.last_id,
        "last_entry_ms": _id_ms(facts.last_id),
        "last_generated_id": facts.last_generated_id,
        "entries_added": facts.entries_added,
        "groups_count": len(facts.groups),
        "pending": facts.pending,
        "lag": max(lags) if lags else None,
        "is_dlq": kind is not None,
        "dlq_convention": kind.convention if kind else "",
        "dlq_sources": [display_text(s) for s in dlq_source_streams(facts.key)] if kind else [],
    }


def _group_values(facts: GroupFacts) -> dict[str, Any]:
    return {
        "name_text": display_text(facts.name)[:TEXT_MAX],
        "consumers": facts.consumers,
        "pending": facts.pending,
        "last_delivered_id": facts.last_delivered_id or "",
        "entries_read": facts.entries_read,
        "lag": facts.lag,
        "oldest_pending_id": facts.oldest_pending_id,
        "oldest_pending_idle_ms": facts.oldest_pending_idle_ms,
    }


def _consumer_values(facts: ConsumerFacts) -> dict[str, Any]:
    return {
        "name_text": display_text(facts.name)[:TEXT_MAX],
        "pending": facts.pending,
        "idle_ms": facts.idle_ms,
        "inactive_ms": facts.inactive_ms,
    }


def _chunks(items: Sequence, size: int = BATCH) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(slots=True)
class _Upsert:
    ids: dict[Any, int]
    created: int = 0
    changed: int = 0
    deleted: int = 0
    returned: int = 0


def _upsert(
    *,
    model: type[models.Model],
    existing: dict[Any, models.Model],
    wanted: dict[Any, tuple[dict[str, Any], dict[str, Any]]],
    fields: Sequence[str],
    now: datetime,
    reread: Any,
) -> _Upsert:
    """Create, update, mark deleted and un-delete ``model`` rows so they match ``wanted``.

    ``wanted`` maps a row's natural key to (identity kwargs used only on creation, compared values);
    ``existing`` maps natural keys to the rows present (deleted or not); ``reread(keys)`` returns the ids
    of rows by natural key after a creation that may have lost a race (``ignore_conflicts``).
    """
    result = _Upsert(ids={})
    create: list[models.Model] = []
    change: list[models.Model] = []
    for natural, (identity, values) in wanted.items():
        row = existing.get(natural)
        if row is None:
            create.append(model(**identity, **values, first_seen=now, last_seen=now))
            continue
        result.ids[natural] = row.pk
        dirty = False
        if row.deleted_at is not None:  # it came back
            row.deleted_at = None
            result.returned += 1
            dirty = True
        for name, value in values.items():
            if getattr(row, name) != value:
                setattr(row, name, value)
                dirty = True
        if dirty:
            change.append(row)
    if create:
        model.objects.bulk_create(create, batch_size=BATCH, ignore_conflicts=True)
        result.ids.update(reread([natural for natural in wanted if natural not in result.ids]))
        result.created = len(create)
    if change:
        model.objects.bulk_update(change, [*fields, "deleted_at"], batch_size=BATCH)
        result.changed = len(change)
    present = set(result.ids.values())
    vanished = [row.pk for row in existing.values() if row.deleted_at is None and row.pk not in present]
    for part in _chunks(vanished):
        model.objects.filter(pk__in=part).update(deleted_at=now)
    result.deleted = len(vanished)
    return result


def mirror_sync(*, conn: str) -> SyncResult:
    """Bring the mirror of ``conn`` in line with Redis (raises :class:`OpsError` if Redis fails us).

    Redis is read first, outside any transaction; then one transaction writes the differences. A failed
    read changes nothing, so an unreachable server never marks its streams deleted.
    """
    started = time.perf_counter()
    facts = snapshot_reads.server_read(conn, consumers=True)
    redis_ms = int(facts.seconds * 1000)
    now = timezone.now()
    streams = facts.streams
    hashes = [name_hash(s.key) for s in streams]
    with transaction.atomic():
        # streams
        existing_streams = {row.key_hash: row for row in StreamMirror.objects.filter(connection=conn).defer("key")}
        wanted_streams = {
            h: ({"connection": conn, "key": s.key, "key_hash": h, "synced_at": now}, _stream_values(s))
            for h, s in zip(hashes, streams, strict=True)
        }
        s_up = _upsert(
            model=StreamMirror, existing=existing_streams, wanted=wanted_streams, fields=_STREAM_FIELDS,
            now=now, reread=lambda keys: _stream_ids(conn, keys),
        )
        StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True).update(last_seen=now, synced_at=now)

        # groups
        existing_groups = {
            (row.stream_id, row.name_hash): row
            for row in GroupMirror.objects.filter(stream__connection=conn).defer("name")
        }
        wanted_groups: dict[tuple[int, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        group_facts: dict[tuple[int, str], GroupFacts] = {}
        for h, s in zip(hashes, streams, strict=True):
            stream_id = s_up.ids[h]
            for g in s.groups:
                natural = (stream_id, name_hash(g.name))
                wanted_groups[natural] = ({"stream_id": stream_id, "name": g.name, "name_hash": natural[1]},
                                          _group_values(g))
                group_facts[natural] = g
        g_up = _upsert(
            model=GroupMirror, existing=existing_groups, wanted=wanted_groups, fields=_GROUP_FIELDS, now=now,
            reread=lambda keys: _group_ids(conn, keys),
        )
        GroupMirror.objects.filter(stream__connection=conn, deleted_at__isnull=True).update(last_seen=now)

        # consumers
        existing_consumers = {
            (row.group_id, row.name_hash): row
            for row in ConsumerMirror.objects.filter(group__stream__connection=conn).defer("name")
        }
        wanted_consumers: dict[tuple[int, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        for natural, g in group_facts.items():
            group_id = g_up.ids[natural]
            for c in g.consumer_list or ():
                key = (group_id, name_hash(c.name))
                wanted_consumers[key] = ({"group_id": group_id, "name": c.name, "name_hash": key[1]},
                                         _consumer_values(c))
        c_up = _upsert(
            model=ConsumerMirror, existing=existing_consumers, wanted=wanted_consumers, fields=_CONSUMER_FIELDS,
            now=now, reread=lambda keys: _consumer_ids(conn, keys),
        )
        ConsumerMirror.objects.filter(group__stream__connection=conn, deleted_at__isnull=True).update(last_seen=now)

    return SyncResult(
        conn=conn,
        synced_at=now,
        streams=len(streams),
        streams_created=s_up.created,
        streams_changed=s_up.changed,
        streams_deleted=s_up.deleted,
        streams_returned=s_up.returned,
        groups=len(wanted_groups),
        groups_created=g_up.created,
        groups_deleted=g_up.deleted,
        consumers=len(wanted_consumers),
        consumers_deleted=c_up.deleted,
        redis_ms=redis_ms,
        duration_ms=int((time.perf_counter() - started) * 1000),
    )


def _stream_ids(conn: str, hashes: Sequence[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for part in _chunks(list(hashes)):
        found.update(StreamMirror.objects.filter(connection=conn, key_hash__in=part).values_list("key_hash", "id"))
    return found


def _group_ids(conn: str, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    wanted = set(keys)
    stream_ids = sorted({stream_id for stream_id, _ in wanted})
    found: dict[tuple[int, str], int] = {}
    for part in _chunks(stream_ids):
        for stream_id, h, pk in GroupMirror.objects.filter(stream_id__in=part).values_list("stream_id", "name_hash", "id"):
            if (stream_id, h) in wanted:
                found[(stream_id, h)] = pk
    return found


def _consumer_ids(conn: str, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    wanted = set(keys)
    group_ids = sorted({group_id for group_id, _ in wanted})
    found: dict[tuple[int, str], int] = {}
    for part in _chunks(group_ids):
        for group_id, h, pk in ConsumerMirror.objects.filter(group_id__in=part).values_list("group_id", "name_hash", "id"):
            if (group_id, h) in wanted:
                found[(group_id, h)] = pk
    return found


# ---------------------------------------------------------------------------------------- snapshots


def snapshot_tick_for(*, now: datetime, interval_s: int | None = None) -> datetime:
    """The tick ``now`` belongs to: ``now`` rounded down to a multiple of the interval (UTC epoch)."""
    interval = interval_s or settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    return datetime.fromtimestamp(math.floor(now.timestamp() / interval) * interval, tz=UTC)


def snapshot_take(*, tick: datetime) -> SnapshotRun:
    """Record the samples of ``tick`` for every connection, once: a second call returns the first's run.

    An unreachable connection is recorded in ``run.errors`` and skipped; the others are still sampled.
    The mirror's figures of streams and groups are refreshed on the way (see :func:`_mirror_refresh`).
    """
    done = SnapshotRun.objects.filter(tick=tick).first()
    if done is not None:
        return done
    started_at = timezone.now()
    t0 = time.perf_counter()
    read: dict[str, snapshot_reads.ServerFacts] = {}
    errors: list[dict[str, str]] = []
    for conn in redis_client.connections():
        try:
            read[conn.name] = snapshot_reads.server_read(conn.name)
        except OpsError as exc:
            errors.append({"conn": conn.name, "error": exc.message})
            log.warning("snapshot %s: %s", tick.isoformat(), exc.message)
    redis_ms = int((time.perf_counter() - t0) * 1000)

    with transaction.atomic():
        run, created = SnapshotRun.objects.get_or_create(
            tick=tick, defaults={"started_at": started_at, "redis_ms": redis_ms, "errors": errors}
        )
        if not created:  # another run of this tick committed first
            return run
        previous = _previous_counters(tick)
        stream_rows: list[StreamSample] = []
        group_rows: list[GroupSample] = []
        dlq_rows: list[DlqSample] = []
        for conn, facts in read.items():
            stream_ids, group_ids = _mirror_refresh(conn, facts.streams, now=started_at)
            for s in facts.streams:
                h = name_hash(s.key)
                stream_id = stream_ids[h]
                added, rate = _added(s, previous.get(stream_id), previous_tick=previous.tick, tick=tick)
                stream_rows.append(StreamSample(
                    stream_id=stream_id, at=tick, resolution=Resolution.RAW, length=s.length, added=added,
                    rate_per_s=rate, entries_added=s.entries_added,
                ))
                if detect_dlq(s.key) is not None:
                    dlq_rows.append(DlqSample(stream_id=stream_id, at=tick, resolution=Resolution.RAW, depth=s.length))
                for g in s.groups:
                    group_rows.append(GroupSample(
                        group_id=group_ids[(stream_id, name_hash(g.name))], at=tick, resolution=Resolution.RAW,
                        lag=g.lag, pending=g.pending, oldest_pending_idle_ms=g.oldest_pending_idle_ms,
                    ))
        for model, rows in ((StreamSample, stream_rows), (GroupSample, group_rows), (DlqSample, dlq_rows)):
            model.objects.bulk_create(rows, batch_size=BATCH, ignore_conflicts=True)
        run.finished_at = timezone.now()
        run.duration_ms = int((time.perf_counter() - t0) * 1000)
        run.streams = len(stream_rows)
        run.groups = len(group_rows)
        run.save(update_fields=["finished_at", "duration_ms", "streams", "groups"])
        transaction.on_commit(lambda: _announce(tick, run))
    return run


@dataclass(frozen=True, slots=True)
class _Previous:
    tick: datetime | None
    counters: dict[int, tuple[int | None, int]]  # stream id -> (entries_added, length)

    def get(self, stream_id: int) -> tuple[int | None, int] | None:
        return self.counters.get(stream_id)


def _previous_counters(tick: datetime) -> _Previous:
    prev = (
        SnapshotRun.objects.filter(tick__lt=tick, tick__gte=tick - RATE_MAX_GAP)
        .order_by("-tick")
        .values_list("tick", flat=True)
        .first()
    )
    if prev is None:
        return _Previous(tick=None, counters={})
    rows = StreamSample.objects.filter(resolution=Resolution.RAW, at=prev).values_list("stream_id", "entries_added", "length")
    return _Previous(tick=prev, counters={sid: (added, length) for sid, added, length in rows})


def _added(
    facts: StreamFacts, prev: tuple[int | None, int] | None, *, previous_tick: datetime | None, tick: datetime
) -> tuple[int | None, float | None]:
    """Entries added since the previous tick, and per second.

    From Redis 7's ``entries-added`` counter (a drop means the stream was deleted and created again: all
    its entries are new). Before Redis 7 only the growth of the length is known, a lower bound.
    """
    if prev is None or previous_tick is None:
        return None, None
    prev_added, prev_length = prev
    if facts.entries_added is not None and prev_added is not None:
        added = facts.entries_added - prev_added if facts.entries_added >= prev_added else facts.entries_added
    else:
        added = max(0, facts.length - prev_length)
    seconds = (tick - previous_tick).total_seconds()
    return added, (added / seconds if seconds > 0 else None)


def _mirror_refresh(
    conn: str, streams: Sequence[StreamFacts], *, now: datetime
) -> tuple[dict[str, int], dict[tuple[int, str], int]]:
    """Mirror ids of ``streams`` and their groups; creates missing rows and updates changed ones.

    So the mirror is as fresh as the snapshot (alert rules read it right after ``snapshot_taken``) at the
    cost of writing only what changed: an idle server costs two reads here. Consumers, deletions and
    ``last_seen`` are left to :func:`mirror_sync`; a stream or group that came back is un-deleted at once.
    """
    current = {
        row[0]: row[1:]
        for row in StreamMirror.objects.filter(connection=conn).values_list(
            "key_hash", "id", "deleted_at", *_STREAM_FIELDS
        )
    }
    stream_ids: dict[str, int] = {}
    create: list[StreamMirror] = []
    change: list[StreamMirror] = []
    for s in streams:
        h = name_hash(s.key)
        values = _stream_values(s)
        row = current.get(h)
        if row is None:
            create.append(StreamMirror(connection=conn, key=s.key, key_hash=h, first_seen=now, last_seen=now,
                                       synced_at=now, **values))
            continue
        stream_ids[h] = row[0]
        if row[1] is not None or row[2:] != tuple(values[f] for f in _STREAM_FIELDS):
            change.append(StreamMirror(pk=row[0], deleted_at=None, **values))
    if create:
        StreamMirror.objects.bulk_create(create, batch_size=BATCH, ignore_conflicts=True)
        stream_ids.update(_stream_ids(conn, [row.key_hash for row in create]))
    if change:
        StreamMirror.objects.bulk_update(change, [*_STREAM_FIELDS, "deleted_at"], batch_size=BATCH)

    current_groups = {
        (row[0], row[1]): row[2:]
        for row in GroupMirror.objects.filter(stream__connection=conn).values_list(
            "stream_id", "name_hash", "id", "deleted_at", *_GROUP_FIELDS
        )
    }
    group_ids: dict[tuple[int, str], int] = {}
    new_groups: list[GroupMirror] = []
    changed_groups: list[GroupMirror] = []
    for s in streams:
        stream_id = stream_ids[name_hash(s.key)]
        for g in s.groups:
            natural = (stream_id, name_hash(g.name))
            values = _group_values(g)
            row = current_groups.get(natural)
            if row is None:
                new_groups.append(GroupMirror(stream_id=stream_id, name=g.name, name_hash=natural[1], first_seen=now,
                                              last_seen=now, **values))
                continue
            group_ids[natural] = row[0]
            if row[1] is not None or row[2:] != tuple(values[f] for f in _GROUP_FIELDS):
                changed_groups.append(GroupMirror(pk=row[0], deleted_at=None, **values))
    if new_groups:
        GroupMirror.objects.bulk_create(new_groups, batch_size=BATCH, ignore_conflicts=True)
        group_ids.update(_group_ids(conn, [(g.stream_id, g.name_hash) for g in new_groups]))
    if changed_groups:
        GroupMirror.objects.bulk_update(changed_groups, [*_GROUP_FIELDS, "deleted_at"], batch_size=BATCH)
    return stream_ids, group_ids


def _announce(tick: datetime, run: SnapshotRun) -> None:
    """After the commit: the signal (alerts), then the channel-layer event (pages). Neither may fail us."""
    for receiver, response in signals.snapshot_taken.send_robust(sender=SnapshotRun, tick=tick, run=run):
        if isinstance(response, Exception):
            log.error("snapshot_taken receiver %r failed", receiver, exc_info=response)
    signals.snapshot_broadcast(tick)


# ----------------------------------------------------------------------------- locks (console Redis)

_console: dict[str, redis.Redis] = {}
_console_lock = threading.Lock()
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def _console_redis() -> redis.Redis:
    """The console's own Redis (REDIS_URL), built on first use."""
    url = settings.REDIS_URL
    client = _console.get(url)
    if client is None:
        with _console_lock:
            client = _console.get(url)
            if client is None:
                client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
                _console[url] = client
    return client


@contextmanager
def lock_held(*, name: str, ttl_ms: int) -> Iterator[bool]:
    """``SET busconsole:lock:<name> <token> NX PX ttl_ms`` for the block; yields whether it was acquired.

    The lock expires by itself after ``ttl_ms`` (a killed worker never wedges the schedule) and is released
    at the end of the block only if it is still ours (compare-and-delete).
    """
    key = f"busconsole:lock:{name}"
    token = secrets.token_hex(16)
    client = _console_redis()
    acquired = bool(client.set(key, token, nx=True, px=max(1, ttl_ms)))
    try:
        yield acquired
    finally:
        if acquired:
            try:
                client.eval(_RELEASE, 1, key, token)
            except redis.RedisError as exc:  # it expires anyway
                log.warning("could not release lock %s: %s", key, exc)


def interval_lock_ms(interval_s: int) -> int:
    """A lock that is shorter than the interval, so a stuck holder costs at most one run."""
    return max(100, int(interval_s * 900))


def snapshot_take_guarded(*, now: datetime) -> SnapshotRun | None:
    """The beat task's body: the snapshot of ``now``'s tick under the overlap lock (None: another run holds it)."""
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    with lock_held(name="snapshot", ttl_ms=interval_lock_ms(interval)) as acquired:
        if not acquired:
            log.info("snapshot skipped: another run holds the lock")
            return None
        return snapshot_take(tick=snapshot_tick_for(now=now, interval_s=interval))


def mirror_sync_guarded() -> dict[str, SyncResult | str] | None:
    """Sync the mirror of every connection under the overlap lock (None: another run holds it).

    A connection that fails is reported by its error text and does not stop the others.
    """
    with lock_held(name="mirror-sync", ttl_ms=interval_lock_ms(settings.BUSCONSOLE_MIRROR_INTERVAL_S)) as acquired:
        if not acquired:
            return None
        out: dict[str, SyncResult | str] = {}
        for conn in redis_client.connections():
            try:
                out[conn.name] = mirror_sync(conn=conn.name)
            except OpsError as exc:
                log.warning("mirror sync of %s failed: %s", conn.name, exc.message)
                out[conn.name] = exc.message
        return out


# ---------------------------------------------------------------------------- rollups and retention

#: Per table: the foreign key, and per rolled-up column its aggregate.
_ROLLUPS: dict[type[models.Model], tuple[str, dict[str, type[models.Aggregate]]]] = {
    StreamSample: ("stream", {"length": Avg, "rate_per_s": Avg, "added": Sum}),
    GroupSample: ("group", {"lag": Avg, "pending": Avg, "oldest_pending_idle_ms": Max}),
    DlqSample: ("stream", {"depth": Avg}),
}
_FLOAT_COLUMNS = {"rate_per_s"}
_TABLE_NAMES = {StreamSample: "stream", GroupSample: "group", DlqSample: "dlq"}


def _floor(at: datetime, size: timedelta) -> datetime:
    step = size.total_seconds()
    return datetime.fromtimestamp(math.floor(at.timestamp() / step) * step, tz=UTC)


def _rounded(column: str, value: Any) -> Any:
    """Averages of counts are stored as whole numbers, rounded half up; rates stay floats."""
    if value is None or column in _FLOAT_COLUMNS:
        return value
    return math.floor(float(value) + 0.5)


def rollup_grace() -> timedelta:
    """How long after a bucket ends it is rolled up: late snapshot commits land before that."""
    return timedelta(seconds=max(60, 3 * settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))


def _rolled_until(model: type[models.Model], resolution: str) -> datetime | None:
    """End of the newest rollup bucket: raw rows before it are covered by this resolution."""
    last = model.objects.filter(resolution=resolution).aggregate(m=Max("at"))["m"]
    return last + BUCKET_SIZE[resolution] if last else None


def _rollup(model: type[models.Model], resolution: str, *, limit: datetime) -> int:
    """Roll raw rows of ``model`` up into ``resolution`` buckets that ended before ``limit``.

    Buckets are taken in time order from the end of the newest rollup, skipping stretches without raw
    rows; one query per bucket, grouped by object. Re-running is harmless (ignore_conflicts).
    """
    fk, aggregates = _ROLLUPS[model]
    size = BUCKET_SIZE[resolution]
    cursor = _rolled_until(model, resolution)
    made = 0
    for _ in range(MAX_BUCKETS[resolution]):
        raw = model.objects.filter(resolution=Resolution.RAW)
        if cursor is not None:
            raw = raw.filter(at__gte=cursor)
        first = raw.order_by("at").values_list("at", flat=True).first()
        if first is None:
            break
        start = _floor(first, size)
        end = start + size
        if end > limit:
            break
        rows = (
            model.objects.filter(resolution=Resolution.RAW, at__gte=start, at__lt=end)
            .values(fk)
            .annotate(**{f"v_{column}": agg(column) for column, agg in aggregates.items()})
            .order_by()
        )
        model.objects.bulk_create(
            [
                model(**{f"{fk}_id": row[fk]}, at=start, resolution=resolution,
                      **{column: _rounded(column, row[f"v_{column}"]) for column in aggregates})
                for row in rows
            ],
            batch_size=BATCH,
            ignore_conflicts=True,
        )
        made += len(rows)
        cursor = end
    return made


def samples_downsample(*, now: datetime) -> dict[str, dict[str, int]]:
    """Compute the 1-minute and 1-hour rollups due at ``now``: ``{"1m": {"stream": n, ...}, "1h": {...}}``.

    Both are computed from raw samples (so an hour's average weighs every raw sample alike), for buckets
    that ended at least :func:`rollup_grace` ago.
    """
    limit = now - rollup_grace()
    return {
        str(resolution): {_TABLE_NAMES[model]: _rollup(model, resolution, limit=limit) for model in _ROLLUPS}
        for resolution in (Resolution.MINUTE, Resolution.HOUR)
    }


def samples_prune(*, now: datetime) -> dict[str, int]:
    """Apply retention at ``now``; returns the rows deleted per table and resolution.

    Raw rows go after BUSCONSOLE_RETENTION_RAW_H hours, but never before both rollups cover them (a
    downsampler that fell behind loses nothing); 1-minute rows after _1M_D days, 1-hour rows after _1H_D
    days. Snapshot runs follow the raw retention, and mirror rows of things deleted longer ago than the
    1-hour retention are forgotten with the last of their history.
    """
    raw_cut = now - timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H)
    cuts = {
        Resolution.MINUTE: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1M_D),
        Resolution.HOUR: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1H_D),
    }
    deleted: dict[str, int] = {}
    for model in _ROLLUPS:
        name = _TABLE_NAMES[model]
        covered = [_rolled_until(model, res) for res in (Resolution.MINUTE, Resolution.HOUR)]
        if all(covered):
            cut = min(raw_cut, *covered)
            deleted[f"{name}.raw"] = model.objects.filter(resolution=Resolution.RAW, at__lt=cut).delete()[0]
        for res, cut in cuts.items():
            deleted[f"{name}.{res}"] = model.objects.filter(resolution=res, at__lt=cut).delete()[0]
    deleted["runs"] = SnapshotRun.objects.filter(tick__lt=raw_cut).delete()[0]
    deleted["mirror"] = StreamMirror.objects.filter(deleted_at__lt=cuts[Resolution.HOUR]).delete()[0]
    return deleted


# ------------------------------------------------------------------------------------------- series

_SERIES: dict[tuple[str, str], tuple[type[models.Model], str, str]] = {
    ("stream", "length"): (StreamSample, "stream_id", "length"),
    ("stream", "rate"): (StreamSample, "stream_id", "rate_per_s"),
    ("group", "lag"): (GroupSample, "group_id", "lag"),
    ("group", "pending"): (GroupSample, "group_id", "pending"),
    ("group", "oldest_pending_idle_ms"): (GroupSample, "group_id", "oldest_pending_idle_ms"),
    ("dlq", "depth"): (DlqSample, "stream_id", "depth"),
}
SERIES_METRICS = tuple(_SERIES)


def series_resolution(*, since: datetime, now: datetime | None = None) -> str:
    """The finest resolution whose retention still reaches back to ``since``."""
    now = now or timezone.now()
    if since >= now - timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H):
        return Resolution.RAW
    if since >= now - timedelta(days=settings.BUSCONSOLE_RETENTION_1M_D):
        return Resolution.MINUTE
    return Resolution.HOUR


def series(
    *, kind: str, obj_id: int, metric: str, since: datetime, until: datetime | None = None
) -> list[tuple[datetime, float | None]]:
    """``[(at, value)]`` of one metric of one object, oldest first.

    ``kind`` is "stream" (metrics "length", "rate"), "group" ("lag", "pending", "oldest_pending_idle_ms")
    or "dlq" ("depth"; ``obj_id`` is the DLQ's StreamMirror id). None values are gaps (a lag Redis could
    not tell, a rate without a previous tick).
    """
    try:
        model, fk, column = _SERIES[(kind, metric)]
    except KeyError:
        raise ValueError(f"unknown series {kind}/{metric}; known: {SERIES_METRICS}") from None
    rows = model.objects.filter(**{fk: obj_id}, resolution=series_resolution(since=since), at__gte=since)
    if until is not None:
        rows = rows.filter(at__lte=until)
    return [
        (at, None if value is None else float(value))
        for at, value in rows.order_by("at").values_list("at", column)
    ]


# ------------------------------------------------------------------------------- the streams page


@dataclass(frozen=True, slots=True)
class MirrorPage:
    """One page of a connection's mirrored streams, and how fresh the mirror is."""

    rows: list[StreamMirror]
    total: int  # streams matching the filter
    offset: int
    count: int
    as_of: datetime | None


#: Sort orders of the streams page over the mirror (largest first; ties and "" by name).
MIRROR_SORTS: dict[str, tuple[Any, ...]] = {
    "": ("key_text", "id"),
    "name": ("key_text", "id"),
    "length": (models.F("length").desc(), "key_text", "id"),
    "pending": (models.F("pending").desc(), "key_text", "id"),
    "lag": (models.F("lag").desc(nulls_last=True), "key_text", "id"),
    "last": (models.F("last_entry_ms").desc(nulls_last=True), "key_text", "id"),
}
_GLOB_CHARS = frozenset("*?[")


def glob_regex(pattern: str) -> str:
    """A Redis glob (``*``, ``?``, ``[abc]``, ``[^a-z]``, ``\\x``) as an anchored regular expression."""
    out = ["^"]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            negate = body.startswith("^")
            body = body[1:] if negate else body
            out.append("[" + ("^" if negate else "") + re.sub(r"([\\\[\]^])", r"\\\1", body) + "]")
            i = close + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return "".join(out)


def stream_mirror_page(*, conn: str, match: str, sort: str, offset: int, count: int) -> MirrorPage | None:
    """Streams of ``conn`` from the mirror, filtered, sorted and paged; None while the mirror is empty.

    ``match`` is a Redis glob when it holds ``*``, ``?`` or ``[`` (matched against the key's display
    text), else a case-insensitive substring; ``"*"`` or ``""`` matches everything. Vanished streams
    (``deleted_at``) are left out.
    """
    if not StreamMirror.objects.filter(connection=conn).exists():
        return None
    rows = StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True).defer("dlq_sources")
    if match and match != "*":
        if _GLOB_CHARS & set(match):
            rows = rows.filter(key_text__regex=glob_regex(match))
        else:
            rows = rows.filter(key_text__icontains=match)
    total = rows.count()
    page = list(rows.order_by(*MIRROR_SORTS.get(sort, MIRROR_SORTS[""]))[offset : offset + count])
    return MirrorPage(rows=page, total=total, offset=offset, count=count, as_of=mirror_as_of(conn=conn))


def mirror_as_of(*, conn: str) -> datetime | None:
    """When the mirror of ``conn`` was last brought up to date, by a mirror sync or a snapshot."""
    synced = StreamMirror.objects.filter(connection=conn).aggregate(m=Max("synced_at"))["m"]
    run = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").first()
    snapped = run.started_at if run and not any(e.get("conn") == conn for e in run.errors) else None
    known = [t for t in (synced, snapped) if t is not None]
    return max(known) if known else None
