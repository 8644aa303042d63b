"""What charts read: one metric of one object over a window (:func:`series`), at the finest resolution
whose retention still covers the window's start (:func:`series_resolution`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from streams_app.metrics.models import DlqSample, GroupSample, Resolution, StreamSample
from streams_app.metrics.rollups import SampleModel
from streams_app.metrics.ticks import in_ticks

_SERIES: dict[tuple[str, str], tuple[SampleModel, str, str]] = {
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

    ``kind`` is "stream" (metrics "length", "rate"), "group" ("lag", "pending", "oldest_pending_idle_ms": the
    longest idle time among the group's pending entries, named before it was the maximum over the PEL)
    or "dlq" ("depth"; ``obj_id`` is the DLQ's StreamMirror id). None values are gaps (a lag Redis could
    not tell, a rate without a previous tick).
    """
    try:
        model, fk, column = _SERIES[(kind, metric)]
    except KeyError:
        raise ValueError(f"unknown series {kind}/{metric}; known: {SERIES_METRICS}") from None
    resolution = series_resolution(since=since)
    # One seek per tick of the window (streams_app.metrics.ticks: the tables are keyed time first).
    rows = model.objects.filter(
        **{fk: obj_id}, resolution=resolution, at__in=in_ticks(model, resolution, since=since, until=until)
    )
    return [
        (at, None if value is None else float(value))
        for at, value in rows.order_by("at").values_list("at", column)
    ]
