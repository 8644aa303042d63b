"""Retention: deleting samples past their resolution's age (:func:`samples_prune`).

Raw rows are deleted only once both rollups cover them (:mod:`.rollups`). Deletions run in short
transactions of at most :data:`PRUNE_BATCH` rows with a pause between them, so a snapshot's commit
never waits long behind them; what the time budget leaves is done by the next run (every minute).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections, models, router, transaction

from streams_app.metrics.bulk import chunks
from streams_app.metrics.models import (
    FamilySample,
    GroupMirror,
    GroupSample,
    Resolution,
    SnapshotRun,
    SnapshotSkip,
    StreamMirror,
)
from streams_app.metrics.rollups import ROLLUPS, TABLE_NAMES, rolled_until

#: Rows deleted per transaction by :func:`samples_prune`, and the pause between two transactions, which
#: lets a waiting writer (a snapshot's commit) take the database in between.
PRUNE_BATCH = 10_000
PRUNE_PAUSE_S = 0.02


def samples_prune(*, now: datetime, budget_s: float | None = None) -> dict[str, int]:
    """Apply retention at ``now``; returns the rows deleted per table and resolution.

    Raw rows go after BUSCONSOLE_RETENTION_RAW_H hours, but never before both rollups cover them, and
    1-minute rows after _1M_D days, but never before the hours made of them exist (a downsampler that
    fell behind loses nothing); 1-hour rows after _1H_D days. Snapshot runs and family rows follow the raw retention,
    skip records the 1-hour one, and mirror rows of things deleted longer ago than the 1-hour retention
    are forgotten with the last of their history.

    Rows go in transactions of at most :data:`PRUNE_BATCH` (see :func:`_prune`), with a short pause
    between two, so the database is never held for long. With ``budget_s`` no batch starts after that
    many seconds; the rest goes on the next run.
    """
    deadline = None if budget_s is None else time.monotonic() + budget_s
    raw_cut = now - timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H)
    cuts = {
        Resolution.MINUTE: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1M_D),
        Resolution.HOUR: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1H_D),
    }
    deleted: dict[str, int] = {}
    for model in ROLLUPS:
        name = TABLE_NAMES[model]
        covered = {res: rolled_until(model, res) for res in (Resolution.MINUTE, Resolution.HOUR)}
        if all(covered.values()):
            cut = min(raw_cut, *(c for c in covered.values() if c is not None))  # all of them, by the test above
            deleted[f"{name}.raw"] = _prune(
                model.objects.filter(resolution=Resolution.RAW, at__lt=cut), deadline
            )
        for res, res_cut in cuts.items():
            before: datetime | None = res_cut
            if res == Resolution.MINUTE:
                hours = covered[Resolution.HOUR]
                before = min(res_cut, hours) if hours else None
            deleted[f"{name}.{res}"] = (
                _prune(model.objects.filter(resolution=res, at__lt=before), deadline) if before else 0
            )
    deleted["runs"] = _prune(SnapshotRun.objects.filter(tick__lt=raw_cut), deadline, by="tick")
    # Family rows have no rollups: they follow the raw retention (a tick's worth per family and connection).
    deleted["families"] = _prune(FamilySample.objects.filter(at__lt=raw_cut), deadline)
    deleted["skips"] = _prune(
        SnapshotSkip.objects.filter(tick__lt=cuts[Resolution.HOUR]), deadline, by="tick"
    )
    deleted["mirror"] = 0
    gone = StreamMirror.objects.filter(deleted_at__lt=cuts[Resolution.HOUR])
    for _ in range(1000):  # bounded; each pass forgets at most 100 streams with what little history they kept
        if deadline is not None and time.monotonic() >= deadline:
            break
        rows = list(gone.order_by("pk").values_list("pk", "deleted_at")[:100])
        if not rows:
            break
        upto = max(at for _, at in rows if at is not None)  # all are set: the filter says so
        with transaction.atomic():
            deleted["mirror"] += _forget([pk for pk, _ in rows], upto=upto)
    return deleted


def _forget(ids: list[int], *, upto: datetime) -> int:
    """Delete the mirror rows ``ids`` of streams deleted at ``upto`` or before, their groups and consumers,
    and first what samples of theirs retention has kept (held back for a rollup that fell behind).

    Samples do not go by the ORM's cascade (streams_app.metrics.models.SAMPLE_FK): their tables are keyed
    time first, and a lookup by object alone would read all of them. A stream has no sample after it was
    deleted (a sample is written only while the mirror row is live), so each table is read up to ``upto``,
    the part retention has already emptied but for those rows."""
    groups = list(GroupMirror.objects.filter(stream_id__in=ids).values_list("pk", flat=True))
    for model, (fk, _) in ROLLUPS.items():
        owners = groups if model is GroupSample else ids
        for part in chunks(owners, 500):
            for resolution in Resolution.values:
                model.objects.filter(resolution=resolution, at__lte=upto, **{f"{fk}_id__in": part}).delete()
    return StreamMirror.objects.filter(pk__in=ids).delete()[1].get(StreamMirror._meta.label, 0)


def _prune(rows: models.QuerySet, deadline: float | None, *, by: str = "at") -> int:
    """Delete ``rows`` (nothing may point at them, no signal listens for them) in short transactions of
    about PRUNE_BATCH rows each, oldest ``by`` (an indexed date-time field) first.

    A batch is one ``DELETE`` whose rows never travel to Python and back:

    * on SQLite, ``DELETE ... WHERE pk IN (SELECT pk ... LIMIT n)``: SQLite has one writer at a time, so
      a batch is at most PRUNE_BATCH rows however many a tick wrote;
    * on PostgreSQL that statement is planned as a hash join over a scan of the whole table, every
      batch, and a deleted row's index entries stay until a vacuum; so a batch is a range of ``by``,
      the oldest PRUNE_BATCH rows and the rest of the tick of the newest of them (``by <=`` its value:
      ``QuerySet.delete`` without anything to collect, one ``DELETE`` of the queryset's filter). Measured
      over a table of 1.2M group samples: a tick's 200k rows in a tenth of a second, where a batch of
      10k ids took as long (and longer as the table grows). A batch this large holds up no other
      writer there: it locks only the rows it deletes, which nothing else writes.
    """
    db = connections[router.db_for_write(rows.model)]
    meta = rows.model._meta
    qn = db.ops.quote_name
    total = 0
    while deadline is None or time.monotonic() < deadline:
        with transaction.atomic(using=db.alias):
            if db.vendor == "postgresql":
                newest = list(rows.order_by(by).values_list(by, flat=True)[PRUNE_BATCH - 1 : PRUNE_BATCH])
                deleted = (rows.filter(**{f"{by}__lte": newest[0]}) if newest else rows).delete()[0]
                last = not newest
            else:
                select, params = rows.values("pk")[:PRUNE_BATCH].query.get_compiler(db.alias).as_sql()
                with db.cursor() as cursor:
                    cursor.execute(
                        f"DELETE FROM {qn(meta.db_table)} WHERE {qn(meta.pk.column)} IN ({select})", params
                    )
                    deleted = cursor.rowcount
                last = deleted < PRUNE_BATCH
        total += deleted
        if last:
            break
        time.sleep(PRUNE_PAUSE_S)  # let a waiting writer in
    return total
