"""The metadata mirror: keeping it in line with Redis, and reading it for the streams page.

:func:`mirror_sync` (a beat task, every BUSCONSOLE_MIRROR_INTERVAL_S) brings the rows of streams, groups
and consumers in line with Redis. It runs in one of two ways:

- an *incremental* pass reads every stream's cheap facts (XINFO STREAM and GROUPS, as a snapshot does),
  compares each with the digest the last sync stored on its row (:func:`stream_fingerprint`: length,
  first, last and last-generated IDs, entries added, and per group its consumers count, pending count,
  last-delivered ID, entries read and lag) and reads the consumers of, and rewrites, only the streams
  whose digest changed (or that are new, or came back). On a bus where a few hundred of 100k streams move
  between two syncs, that is a few hundred streams' worth of XINFO CONSUMERS and rows;
- a *full* pass (the first sync of a connection, then at most every BUSCONSOLE_MIRROR_FULL_EVERY_S
  seconds; the beat does it in parts across ticks, :mod:`.mirror_pass`) reads and rewrites everything,
  and is the only one that marks vanished streams deleted (an incremental pass cannot tell a vanished
  stream from one it did not look at). Consumer idle times of
  groups that did not change are refreshed by it too: between two full passes they are as of the row's
  ``last_seen``, which is what the consumer-inactive alert compares (it never overstates an idle time).

Either way rows are written in transactions of :data:`SYNC_CHUNK` streams (with their groups and
consumers), so a sync of 100k streams never holds the database for more than a moment and a snapshot
can commit in between. Vanished groups and consumers of a rewritten stream are marked ``deleted_at``
(never forgotten: their history stays, and a key that comes back gets its old row back, un-deleted).

:mod:`streams_app.metrics.snapshot_write` is the lighter pass each snapshot makes over the streams and
groups it has just read (set-based, in SQL), so the mirror's figures are as fresh as the last snapshot
(alert rules read them right after it): it writes :data:`STREAM_FIGURES` and :data:`GROUP_FIGURES`,
creates rows but marks nothing deleted, and leaves a group row alone when only the idle time of the same
idlest pending entry grew. The group columns
``oldest_pending_id`` and ``oldest_pending_idle_ms`` keep their names but hold the entry pending the
longest since its last delivery and that idle time (the maximum over the PEL, bounded: see
:mod:`streams_app.redis_ops.pending_idle`), not the lowest pending ID.

Redis is read before any transaction opens, so a server that fails midway changes nothing (and never
gets its streams marked deleted); nor does a cluster primary that could not be read (``facts.missed``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Max
from django.utils import timezone

from eventbus.glob import Glob, glob_compile
from eventbus.text import display_text, id_ms
from streams_app.metrics.bulk import chunks, rows_insert, rows_update
from streams_app.metrics.models import (
    TEXT_MAX,
    ConsumerMirror,
    GroupMirror,
    MirrorState,
    SnapshotRun,
    StreamMirror,
    name_hash,
)
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.conventions import detect_dlq, dlq_source_streams
from streams_app.redis_ops.types import ConsumerInfo, GroupInfo, StreamInfo

#: Ids per ``IN (...)`` (SQLite limits the parameters of one statement).
IN_BATCH = 500
#: Streams (with their groups and consumers) written per transaction by :func:`mirror_sync`.
SYNC_CHUNK = 500

STREAM_FIELDS = (
    "key_text", "length", "first_id", "last_id", "last_entry_ms", "last_generated_id", "entries_added",
    "groups_count", "pending", "lag", "lag_unknown_groups", "is_dlq", "dlq_convention", "dlq_sources",
)
GROUP_FIELDS = (
    "name_text", "consumers", "pending", "last_delivered_id", "entries_read", "lag", "oldest_pending_id",
    "oldest_pending_idle_ms",
)
CONSUMER_FIELDS = ("name_text", "pending", "idle_ms", "inactive_ms")
#: What a snapshot refreshes: the figures. Names and DLQ facts are set on creation and kept by the sync.
STREAM_FIGURES = STREAM_FIELDS[1:11]
GROUP_FIGURES = GROUP_FIELDS[1:]
_STREAM_NAMES = ("key_text", "is_dlq", "dlq_convention", "dlq_sources")
#: What a sync writes of a stream: everything, and the digest the next incremental pass compares.
_SYNC_FIELDS = (*STREAM_FIELDS, "sync_fingerprint")


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
    full: bool = True
    streams_written: int = 0  # streams whose rows this sync compared and rewrote (all of them on a full pass)
    missed: tuple[str, ...] = ()  # cluster primaries not read: their streams were left as they were
    pass_complete: bool = True  # False: a part of a full pass done across ticks (:mod:`.mirror_pass`), more to come
    pass_streams: int = 0  # streams the pass in parts has written so far (this part included)


# ------------------------------------------------------------------------------- values of a row


def stream_figures(facts: StreamInfo) -> tuple[Any, ...]:
    """The figures of a stream, in :data:`STREAM_FIGURES` order.

    A snapshot stages these for every stream every tick: the groups' pending entries, largest lag (a lower
    bound when a group's is unknown: :func:`~streams_app.redis_ops.types.groups_lag`) and unknown lags are
    counted in one loop here rather than by the three helpers' generators, which cost more
    (tests/console/metrics/test_mirror_figures.py holds the two equal).
    """
    pending = unknown = 0
    lag = None
    for group in facts.groups:
        pending += group.pending
        group_lag = group.lag
        if group_lag is None:
            unknown += 1
        elif lag is None or group_lag > lag:
            lag = group_lag
    return (
        facts.length,
        facts.first_id,
        facts.last_id,
        id_ms(facts.last_id),
        facts.last_generated_id,
        facts.entries_added,
        len(facts.groups),
        pending,
        lag,
        unknown,
    )


def stream_names(key: bytes) -> tuple[Any, ...]:
    """What the key alone says (text, DLQ convention and sources), in :data:`_STREAM_NAMES` order."""
    kind = detect_dlq(key)
    return (
        display_text(key)[:TEXT_MAX],
        kind is not None,
        kind.convention if kind else "",
        [display_text(s) for s in dlq_source_streams(key)] if kind else [],
    )


def stream_values(facts: StreamInfo) -> tuple[Any, ...]:
    """Everything the mirror holds of a stream, in :data:`STREAM_FIELDS` order."""
    text, *dlq = stream_names(facts.key)
    return (text, *stream_figures(facts), *dlq)


def stream_fingerprint(facts: StreamInfo) -> str:
    """A short digest of what a stream's mirror rows depend on, except the idle times.

    Anything a consumer does that changes its row (reads, acks, claims, being created or deleted)
    changes its group's pending count, last-delivered ID or consumers count, so a stream whose digest
    is unchanged has nothing new to write but idle times. blake2b rather than ``hash()``: the digest is
    stored and compared across processes.
    """
    parts = [
        facts.length, facts.first_id, facts.last_id, facts.last_generated_id, facts.entries_added,
        facts.max_deleted_entry_id,
        *((bytes(g.name).hex(), g.consumers, g.pending, g.last_delivered_id, g.entries_read, g.lag)
          for g in facts.groups),
    ]
    return hashlib.blake2b(repr(parts).encode(), digest_size=12).hexdigest()


def group_figures(facts: GroupInfo) -> tuple[Any, ...]:
    """The figures of a group, in :data:`GROUP_FIGURES` order."""
    return (
        facts.consumers,
        facts.pending,
        facts.last_delivered_id or "",
        facts.entries_read,
        facts.lag,
        *((facts.longest_idle.id, facts.longest_idle.idle_ms) if facts.longest_idle else (None, None)),
    )


def group_values(facts: GroupInfo) -> tuple[Any, ...]:
    """Everything the mirror holds of a group, in :data:`GROUP_FIELDS` order."""
    return (display_text(facts.name)[:TEXT_MAX], *group_figures(facts))


def consumer_values(facts: ConsumerInfo) -> tuple[Any, ...]:
    return (display_text(facts.name)[:TEXT_MAX], facts.pending, facts.idle_ms, facts.inactive_ms)


# --------------------------------------------------------------------------------------- upsert


@dataclass(slots=True)
class _Upsert:
    ids: dict[Any, int]
    created: int = 0
    changed: int = 0
    deleted: int = 0
    returned: int = 0


def _upsert(
    *,
    model: type[StreamMirror] | type[GroupMirror] | type[ConsumerMirror],
    fields: Sequence[str],
    current: dict[Any, tuple[Any, ...]],
    wanted: dict[Any, tuple[Any, tuple[Any, ...]]],
    identity: Sequence[str],
    identity_of: Callable[[Any], tuple[Any, ...]],
    reread: Callable[[list[Any]], dict[Any, int]],
    now: datetime,
    mark_vanished: bool,
) -> _Upsert:
    """Make the rows of ``model`` match ``wanted``; returns their ids by natural key and what changed.

    ``current`` maps natural keys to ``(pk, deleted_at, *fields)`` of the rows present (deleted or not);
    ``wanted`` maps natural keys to (source, field values in ``fields`` order); ``identity_of(source)``
    gives the values set on creation only, in ``identity`` order. Rows are created with
    ``ignore_conflicts`` (a concurrent snapshot or sync may have created them first) and their ids read
    back with ``reread``.
    """
    result = _Upsert(ids={})
    create: list[tuple[Any, ...]] = []
    change: list[tuple[int, tuple[Any, ...]]] = []
    for natural, (source, values) in wanted.items():
        row = current.get(natural)
        if row is None:
            create.append((*identity_of(source), *values, now, now))
            continue
        result.ids[natural] = row[0]
        if row[1] is not None:
            result.returned += 1
        if row[1] is not None or row[2:] != values:
            change.append((row[0], (*values, None)))
    if create:
        rows_insert(model, [*identity, *fields, "first_seen", "last_seen"], create, ignore_conflicts=True)
        result.ids.update(reread([natural for natural in wanted if natural not in result.ids]))
        result.created = len(create)
    rows_update(model, [*fields, "deleted_at"], change)
    result.changed = len(change)
    if mark_vanished:
        present = set(result.ids.values())
        vanished = [row[0] for row in current.values() if row[1] is None and row[0] not in present]
        for part in chunks(vanished, IN_BATCH):
            model.objects.filter(pk__in=part).update(deleted_at=now)
        result.deleted = len(vanished)
    return result


def _streams_upsert(conn: str, streams: Sequence[StreamInfo], *, now: datetime) -> _Upsert:
    """Every field of the rows of ``streams`` and the digest the next incremental pass compares."""
    hashes = [name_hash(s.key) for s in streams]
    rows = _rows_in(StreamMirror.objects.filter(connection=conn), "key_hash", hashes,
                    "key_hash", "id", "deleted_at", *_SYNC_FIELDS)
    wanted = {h: (s, (*stream_values(s), stream_fingerprint(s))) for h, s in zip(hashes, streams, strict=True)}
    current = {row[0]: row[1:] for row in rows}
    return _upsert(
        model=StreamMirror, fields=_SYNC_FIELDS, current=current, wanted=wanted,
        identity=("connection", "key", "key_hash", "synced_at"),
        identity_of=lambda s: (conn, s.key, name_hash(s.key), now),
        reread=lambda keys: stream_ids(conn, keys), now=now, mark_vanished=False,
    )


def _groups_upsert(
    conn: str, streams: Sequence[StreamInfo], ids: dict[str, int], *, now: datetime
) -> tuple[_Upsert, dict[tuple[int, str], GroupInfo]]:
    """The groups of ``streams``, marking deleted those that vanished from them."""
    rows = _rows_in(GroupMirror.objects.all(), "stream_id", sorted(ids.values()),
                    "stream_id", "name_hash", "id", "deleted_at", *GROUP_FIELDS)
    current = {(row[0], row[1]): row[2:] for row in rows}
    wanted: dict[tuple[int, str], tuple[Any, tuple[Any, ...]]] = {}
    facts: dict[tuple[int, str], GroupInfo] = {}
    for s in streams:
        stream_id = ids[name_hash(s.key)]
        for g in s.groups:
            natural = (stream_id, name_hash(g.name))
            wanted[natural] = ((natural, g), group_values(g))
            facts[natural] = g
    return _upsert(
        model=GroupMirror, fields=GROUP_FIELDS, current=current, wanted=wanted,
        identity=("stream_id", "name", "name_hash"),
        identity_of=lambda source: (source[0][0], source[1].name, source[0][1]),
        reread=lambda keys: group_ids(conn, keys), now=now, mark_vanished=True,
    ), facts


def _rows_in(rows: models.QuerySet, field: str, values: Sequence[Any], *columns: str) -> list[tuple[Any, ...]]:
    """``rows.filter(field__in=values).values_list(*columns)``, in queries of :data:`IN_BATCH` values."""
    out: list[tuple[Any, ...]] = []
    for part in chunks(values, IN_BATCH):
        out.extend(rows.filter(**{f"{field}__in": list(part)}).values_list(*columns))
    return out


def stream_ids(conn: str, hashes: Iterable[str]) -> dict[str, int]:
    """Ids of ``conn``'s mirror rows by key hash (after a creation): a few keys by ``IN``, many by one scan."""
    wanted = list(hashes)
    rows = StreamMirror.objects.filter(connection=conn)
    if len(wanted) <= IN_BATCH:
        return dict(rows.filter(key_hash__in=wanted).values_list("key_hash", "id"))
    keep = set(wanted)
    return {h: pk for h, pk in rows.values_list("key_hash", "id") if h in keep}


def group_ids(conn: str, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    return _child_ids(GroupMirror.objects.filter(stream__connection=conn), "stream_id", keys)


def consumer_ids(conn: str, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    return _child_ids(ConsumerMirror.objects.filter(group__stream__connection=conn), "group_id", keys)


#: Up to this many parents, children are looked up by ``IN`` batches; beyond, by one scan of the connection.
_CHILD_IN_MAX = 20 * IN_BATCH


def _child_ids(rows: models.QuerySet, parent: str, keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], int]:
    wanted = set(keys)
    parents = sorted({p for p, _ in wanted})
    found = (
        _rows_in(rows, parent, parents, parent, "name_hash", "id")
        if len(parents) <= _CHILD_IN_MAX
        else rows.values_list(parent, "name_hash", "id")
    )
    return {(p, h): pk for p, h, pk in found if (p, h) in wanted}


# ------------------------------------------------------------------------------------ sync, refresh


def mirror_sync(*, conn: str, full: bool = True) -> SyncResult:
    """Bring the mirror of ``conn`` in line with Redis (raises :class:`OpsError` if Redis fails us).

    ``full``: read and rewrite every stream and mark the vanished ones deleted; else only the streams
    whose :func:`stream_fingerprint` changed since the last sync (see the module docstring).
    """
    with gc_paused():
        return _mirror_sync(conn, full=full)


def _mirror_sync(conn: str, *, full: bool) -> SyncResult:
    started = time.perf_counter()
    facts = snapshot_reads.server_read(conn, consumers=full)
    missed = tuple(getattr(facts, "missed", ()))
    if full:
        changed = list(facts.streams)
    else:
        known = {
            h: fp
            for h, fp, deleted in StreamMirror.objects.filter(connection=conn).values_list(
                "key_hash", "sync_fingerprint", "deleted_at"
            )
            if deleted is None
        }
        keys = [s.key for s in facts.streams if known.get(name_hash(s.key)) != stream_fingerprint(s)]
        changed = snapshot_reads.streams_read(conn, keys, consumers=True)[0] if keys else []
    redis_ms = int((time.perf_counter() - started) * 1000)
    now = timezone.now()

    totals = dict.fromkeys(
        ("created", "changed", "returned", "groups", "groups_created", "groups_deleted", "consumers",
         "consumers_deleted"), 0)
    for part in chunks(changed, SYNC_CHUNK):
        with transaction.atomic():
            sync_chunk(conn, part, now=now, totals=totals)
    deleted = 0
    if full and not missed:
        deleted = mark_vanished(conn, now=now, present={name_hash(s.key) for s in facts.streams})

    if full:
        statistics_refresh()
    duration_ms = int((time.perf_counter() - started) * 1000)
    state_defaults: dict[str, Any] = {
        "synced_at": now, "full": full, "duration_ms": duration_ms, "redis_ms": redis_ms,
        "streams": len(facts.streams), "streams_written": len(changed), "partial": ", ".join(missed),
    }
    if full:
        state_defaults.update(full_synced_at=now, pass_cursor=None)  # a pass in parts under way is done by this one
    MirrorState.objects.update_or_create(connection=conn, defaults=state_defaults)
    return SyncResult(
        conn=conn,
        synced_at=now,
        streams=len(facts.streams),
        streams_created=totals["created"],
        streams_changed=totals["changed"],
        streams_deleted=deleted,
        streams_returned=totals["returned"],
        groups=totals["groups"],
        groups_created=totals["groups_created"],
        groups_deleted=totals["groups_deleted"],
        consumers=totals["consumers"],
        consumers_deleted=totals["consumers_deleted"],
        redis_ms=redis_ms,
        duration_ms=duration_ms,
        full=full,
        streams_written=len(changed),
        missed=missed,
    )


def sync_chunk(conn: str, streams: Sequence[StreamInfo], *, now: datetime, totals: dict[str, int]) -> None:
    """Write ``streams`` with their groups and consumers (inside a transaction); add what changed to ``totals``."""
    s_up = _streams_upsert(conn, streams, now=now)
    ids = s_up.ids
    for part in chunks(sorted(ids.values()), IN_BATCH):
        StreamMirror.objects.filter(pk__in=part).update(last_seen=now, synced_at=now)
    g_up, group_facts = _groups_upsert(conn, streams, ids, now=now)
    present_groups = sorted(g_up.ids.values())
    for part in chunks(present_groups, IN_BATCH):
        GroupMirror.objects.filter(pk__in=part).update(last_seen=now)

    current = {
        (row[0], row[1]): row[2:]
        for row in _rows_in(ConsumerMirror.objects.all(), "group_id", sorted({g[0] for g in _group_rows(ids)}),
                            "group_id", "name_hash", "id", "deleted_at", *CONSUMER_FIELDS)
    }
    wanted: dict[tuple[int, str], tuple[Any, tuple[Any, ...]]] = {}
    for natural, g in group_facts.items():
        group_id = g_up.ids[natural]
        for c in g.consumer_list or ():
            key = (group_id, name_hash(c.name))
            wanted[key] = ((group_id, c.name, key[1]), consumer_values(c))
    c_up = _upsert(
        model=ConsumerMirror, fields=CONSUMER_FIELDS, current=current, wanted=wanted,
        identity=("group_id", "name", "name_hash"), identity_of=lambda source: source,
        reread=lambda keys: consumer_ids(conn, keys), now=now, mark_vanished=True,
    )
    for part in chunks(sorted(c_up.ids.values()), IN_BATCH):
        ConsumerMirror.objects.filter(pk__in=part).update(last_seen=now)
    totals["created"] += s_up.created
    totals["changed"] += s_up.changed
    totals["returned"] += s_up.returned
    totals["groups"] += len(group_facts)
    totals["groups_created"] += g_up.created
    totals["groups_deleted"] += g_up.deleted
    totals["consumers"] += len(wanted)
    totals["consumers_deleted"] += c_up.deleted


def _group_rows(stream_ids_by_hash: dict[str, int]) -> list[tuple[int]]:
    """Ids of every group row (deleted or not) of these streams: the consumers to compare belong to them."""
    return _rows_in(GroupMirror.objects.all(), "stream_id", sorted(stream_ids_by_hash.values()), "id")


def statistics_refresh() -> None:
    """On SQLite, refresh the planner's statistics of the mirror's streams table (sampled: a few ms).

    Without them SQLite takes ``connection = ?`` for the most selective condition and reads every row of
    the connection, rather than the ``key_text`` range a glob's prefix gives (:func:`prefix_filter`).
    PostgreSQL's autovacuum keeps its statistics itself.
    """
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA analysis_limit = 1000")
        cursor.execute(f"ANALYZE {connection.ops.quote_name(StreamMirror._meta.db_table)}")


def mark_vanished(
    conn: str, *, now: datetime, present: set[str] | None = None, unseen_since: datetime | None = None
) -> int:
    """Mark deleted the streams of ``conn`` not in ``present`` (key hashes), or not seen since
    ``unseen_since`` (a pass done in parts: :mod:`.mirror_pass`), with their groups and consumers.
    Rows marked already are left as they are: a stream is marked once."""
    rows = StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True)
    if unseen_since is not None:
        rows = rows.filter(last_seen__lt=unseen_since)
    vanished = [pk for pk, h in rows.values_list("id", "key_hash") if present is None or h not in present]
    return mark_deleted(vanished, now=now)


def mark_deleted(vanished: Sequence[int], *, now: datetime) -> int:
    """Mark the stream rows ``vanished`` (ids) deleted, with their groups and consumers; returns how many."""
    for part in chunks(vanished, IN_BATCH):
        with transaction.atomic():
            StreamMirror.objects.filter(pk__in=part).update(deleted_at=now)
            GroupMirror.objects.filter(stream_id__in=part, deleted_at__isnull=True).update(deleted_at=now)
            ConsumerMirror.objects.filter(group__stream_id__in=part, deleted_at__isnull=True).update(deleted_at=now)
    return len(vanished)


# ------------------------------------------------------------------------------- the streams page


@dataclass(frozen=True, slots=True)
class MirrorPage:
    """One page of a connection's mirrored streams, and how fresh the mirror is."""

    rows: list[StreamMirror]
    total: int  # streams matching the filter
    offset: int
    count: int
    as_of: datetime | None
    #: While no full pass has completed yet: (streams written so far, keys in Redis about); the page says
    #: the mirror is partial, "synced N of about M". None once a full pass has seen every key.
    filling: tuple[int, int | None] | None = None


#: Sort orders of the streams page over the mirror (largest first; ties and "" by name).
MIRROR_SORTS: dict[str, tuple[Any, ...]] = {
    "": ("key_text", "id"),
    "name": ("key_text", "id"),
    "length": (models.F("length").desc(), "key_text", "id"),
    "pending": (models.F("pending").desc(), "key_text", "id"),
    # By the largest lag Redis reports, which is a lower bound when a group's lag is unknown (at a tie the
    # bound first: the true lag may be larger); then the streams whose every group's lag is unknown (they
    # cannot be ranked against numbers, and are never taken for 0), then the streams without a group.
    "lag": (models.Case(models.When(lag__isnull=False, then=0), models.When(groups_count__gt=0, then=1), default=2),
            models.F("lag").desc(), models.F("lag_unknown_groups").desc(), "key_text", "id"),
    "last": (models.F("last_entry_ms").desc(nulls_last=True), "key_text", "id"),
}
_GLOB_CHARS = frozenset("*?[")
#: Rows fetched per round trip while a glob is matched in Python.
GLOB_CHUNK = 2000
#: Characters of a glob's literal prefix used to narrow the rows in SQL (well within ``TEXT_MAX``).
_PREFIX_MAX = 200


def stream_mirror_page(*, conn: str, match: str, sort: str, offset: int, count: int) -> MirrorPage | None:
    """Streams of ``conn`` from the mirror, filtered, sorted and paged; None while the mirror is empty.

    ``match`` is a Redis glob when it holds ``*``, ``?`` or ``[`` (matched against the key's bytes, as
    ``SCAN MATCH`` would), else a case-insensitive substring of the key's display text; ``"*"`` or ``""``
    matches everything. Vanished streams (``deleted_at``) are left out.
    """
    if not StreamMirror.objects.filter(connection=conn).exists():
        return None
    rows = StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True).defer("dlq_sources")
    order = MIRROR_SORTS.get(sort, MIRROR_SORTS[""])
    if match and match != "*" and _GLOB_CHARS & set(match):
        page, total = _glob_page(rows, glob_compile(match), order=order, offset=offset, count=count)
    else:
        if match and match != "*":
            rows = rows.filter(key_text__icontains=match)
        total = rows.count()
        page = list(rows.order_by(*order)[offset : offset + count])
    return MirrorPage(rows=page, total=total, offset=offset, count=count, as_of=mirror_as_of(conn=conn),
                      filling=mirror_filling(conn=conn))


def _glob_page(
    rows: models.QuerySet[StreamMirror], glob: Glob, *, order: Sequence[Any], offset: int, count: int
) -> tuple[list[StreamMirror], int]:
    """One page of the rows whose key matches ``glob``, and how many match.

    The display text cannot stand in for the key's bytes (it is cut, and ``\\xNN`` stands for a byte
    and for those four characters alike), and no SQL dialect speaks Redis's glob, so the keys are
    matched here: the rows come in the page's order, narrowed by the glob's literal prefix, in chunks
    of ids and keys; only the page's ids are kept, so memory stays at one page whatever the mirror holds.
    """
    rows = prefix_filter(rows, glob.literal_prefix)
    wanted: list[int] = []
    total = 0
    for pk, key in rows.order_by(*order).values_list("id", "key").iterator(chunk_size=GLOB_CHUNK):
        if glob.matches(key):
            if offset <= total < offset + count:
                wanted.append(pk)
            total += 1
    found = rows.in_bulk(wanted)
    return [found[pk] for pk in wanted], total


def prefix_filter(rows: models.QuerySet, literal: bytes) -> models.QuerySet:
    """``rows`` narrowed to keys whose display text starts with the UTF-8 text at the start of ``literal``
    (a glob's literal prefix): necessary, not sufficient, since a key starting with these bytes shows them first.

    On SQLite ``LIKE`` ignores case and so cannot use the ``key_text`` index: a range on the index
    (``prefix <= key_text < prefix + U+10FFFF``, exact under SQLite's binary collation) is added, so a
    glob like ``orders:*`` reads the matching part of the index instead of every row. Elsewhere the
    collation decides the order of a range, so ``startswith`` alone is used.
    """
    prefix = _text_prefix(literal)
    if not prefix:
        return rows
    rows = rows.filter(key_text__startswith=prefix)
    if connection.vendor == "sqlite":
        rows = rows.filter(key_text__gte=prefix, key_text__lt=prefix + "\U0010ffff")
    return rows


def _text_prefix(raw: bytes) -> str:
    """The longest UTF-8 text at the start of ``raw``: what every matching key's display text starts with."""
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        text = raw[: exc.start].decode()
    return text[:_PREFIX_MAX]


def mirror_filling(*, conn: str) -> tuple[int, int | None] | None:
    """(streams synced, keys in Redis about) while the mirror of ``conn`` has not had a complete full pass
    (its first is being done in parts, or ended with a primary unread); None once one has completed, or
    when none was done in parts."""
    state = (MirrorState.objects.filter(connection=conn)
             .values_list("full_synced_at", "pass_started_at", "pass_streams", "pass_keys_about").first())
    if state is None or state[0] is not None or state[1] is None:
        return None
    return state[2], state[3]


def mirror_as_of(*, conn: str) -> datetime | None:
    """When the mirror of ``conn`` was last brought up to date, by a mirror sync or a snapshot."""
    state = MirrorState.objects.filter(connection=conn).values_list("synced_at", flat=True).first()
    synced = state or StreamMirror.objects.filter(connection=conn).aggregate(m=Max("synced_at"))["m"]
    run = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").first()
    snapped = run.started_at if run and not any(e.get("conn") == conn for e in run.errors) else None
    known = [t for t in (synced, snapped) if t is not None]
    return max(known) if known else None
