"""The operator actions on an event's journey: the audit rows that touch any of its IDs.

A row touches an ID when it names it (``target_ids``, an inline requeue's ``requeued`` pairs) or when a
bulk action's recorded range covers it: ``ids_range`` (a selection bigger than the row keeps),
``dlq_range`` (a requeue job's dead letters), ``acked_range``/``claimed_range`` (a search-driven ack, a
sweep), ``start_id``..``end_id`` (a replay), ``up_to`` (a requeue-all or a purge asked for every dead
letter up to that ID, of those already there when it was asked). Only rows about the journey's own
keys, written since its first publish, are read: at most :data:`ROWS`, newest first, so the database
read is bounded like the Redis ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from streams_app.audit.models import AuditEvent
from streams_app.redis_ops.ids import parse_id

#: Audit rows one journey reads at most.
ROWS = 500
_RANGES = ("ids_range", "dlq_range", "acked_range", "claimed_range")


def _id(value: object) -> tuple[int, int] | None:
    try:
        parsed = parse_id(str(value), allow_bare=False)
    except Exception:  # noqa: BLE001 - a row's parameter that is no entry ID covers nothing
        return None
    return parsed.ms, parsed.seq


def rows_about(conn: str, keys: Iterable[bytes], since_ms: int) -> list[AuditEvent]:
    """The newest :data:`ROWS` rows about ``keys`` written since ``since_ms`` (a second of clock skew allowed)."""
    since = datetime.fromtimestamp(max(0, since_ms - 1000) / 1000, UTC)
    keys = [bytes(k) for k in keys if k]
    return list(AuditEvent.objects.filter(connection=conn, target_stream__in=keys, at__gte=since)
                .order_by("-at")[:ROWS])  # fmt: skip


def touches(row: AuditEvent, ids: set[str]) -> list[str]:
    """The IDs of ``ids`` the row names or whose range it covers (module docstring)."""
    params: Mapping[str, Any] = row.parameters if isinstance(row.parameters, dict) else {}
    named = {str(i) for i in row.target_ids or ()}
    for pair in params.get("requeued") or ():
        if isinstance(pair, list | tuple):
            named.update(str(p) for p in pair)
    hit = ids & named
    spans = [params.get(name) for name in _RANGES]
    if params.get("start_id") and params.get("end_id"):
        spans.append([params["start_id"], params["end_id"]])
    written_ms = int(row.at.timestamp() * 1000)
    for entry_id in ids - hit:
        at = _id(entry_id)
        if at is None:
            continue
        for span in spans:
            if isinstance(span, list | tuple) and len(span) == 2:
                low, high = _id(span[0]), _id(span[1])
                if low is not None and high is not None and low <= at <= high:
                    hit.add(entry_id)
        up_to = _id(params.get("up_to")) if params.get("up_to") else None
        if up_to is not None and at <= up_to and at[0] <= written_ms and row.action in ("dlq.requeue_all", "dlq.purge"):
            hit.add(entry_id)
    return sorted(hit)


def row_json(row: AuditEvent, hit: Sequence[str]) -> dict[str, Any]:
    return {
        "id": row.pk,
        "user": row.username or None,
        "action": row.action,
        "at": row.at.isoformat().replace("+00:00", "Z"),
        "at_ms": int(row.at.timestamp() * 1000),
        "outcome": row.outcome,
        "affected": row.affected,
        "target": row.target_display,
        "group": row.target_group or None,
        "ids": list(hit),
        "job": (row.parameters or {}).get("job") if isinstance(row.parameters, dict) else None,
    }


def copies_named(conn: str, dlq_keys: Sequence[bytes], since_ms: int, stream: bytes) -> list[tuple[bytes, str]]:
    """Entries the audit rows say a requeue made in ``stream`` from these DLQs (the core probes them by ID)."""
    out: list[tuple[bytes, str]] = []
    target = stream.decode("utf-8", "replace")
    for row in rows_about(conn, dlq_keys, since_ms):
        params = row.parameters if isinstance(row.parameters, dict) else {}
        for pair in params.get("requeued") or ():
            if isinstance(pair, list | tuple) and len(pair) == 3 and pair[1] == target:
                out.append((stream, str(pair[2])))
    return out[:1000]
