"""The operator actions on an event's journey: the audit rows that touch any of its IDs.

A row touches an ID when it names it (``target_ids``, an inline requeue's ``requeued`` pairs) or when a
bulk action's recorded range covers it: ``ids_range`` (a selection bigger than the row keeps),
``dlq_range`` (a requeue job's dead letters), ``acked_range``/``claimed_range`` (a search-driven ack, a
sweep), ``start_id``..``end_id`` (a replay), ``up_to`` (a requeue-all or a purge asked for every dead
letter up to that ID, of those already there when it was asked), a replay job's batches (``replayed``:
the source IDs each copied, and where its copies are, which :func:`replay_windows` hands the journey).
Only rows about the journey's own keys, written since its first publish, are read: at most :data:`ROWS`,
newest first, so the database read is bounded like the Redis ones.
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
    if made := _replayed(row):  # a replay job: the source IDs of each batch it recorded, or its whole range
        batches = [b for b in made.get("batches") or () if isinstance(b, list) and len(b) == 5]
        spans += [b[:2] for b in batches]
        if made.get("batches_left_out") or sum(int(b[4]) for b in batches) < int(made.get("count") or 0):
            spans.append(made.get("source_range"))
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


def copies_in(row: AuditEvent, stream: str) -> set[str]:
    """The copies a requeue's row names in ``stream`` (its ``requeued`` pairs: dead letter, stream, copy)."""
    params = row.parameters if isinstance(row.parameters, dict) else {}
    return {str(p[2]) for p in params.get("requeued") or () if isinstance(p, list | tuple) and len(p) == 3
            and p[1] == stream}  # fmt: skip


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


# ------------------------------------------------------------------------------------------- replays

#: The highest sequence number an entry ID can have: a window "up to this millisecond" ends with it.
_SEQ_MAX = 18446744073709551615


def _replayed(row: AuditEvent) -> dict[str, Any] | None:
    """What a replay job's finished row says about its copies
    (:func:`streams_app.jobs.replay_resume.replay_audit`), or None."""
    params = row.parameters if isinstance(row.parameters, dict) else {}
    made = params.get("replayed")
    return made if isinstance(made, dict) and isinstance(made.get("target_hex"), str) else None


def _target(made: dict[str, Any]) -> bytes | None:
    try:
        return bytes.fromhex(made["target_hex"])
    except ValueError:
        return None


def _within(entry_id: str, low: object, high: object) -> bool:
    at, lo, hi = _id(entry_id), _id(low), _id(high)
    return at is not None and lo is not None and hi is not None and lo <= at <= hi


def _window_ms(made: dict[str, Any]) -> tuple[str, str] | None:
    """The IDs the job's copies can have: from when it started to its last save (every copy's time)."""
    copies_ms = made.get("copies_ms")
    if not (isinstance(copies_ms, list) and len(copies_ms) == 2 and all(isinstance(m, int) for m in copies_ms)):
        return None
    return f"{copies_ms[0]}-0", f"{copies_ms[1]}-{_SEQ_MAX}"


def _replay_rows(conn: str, since_ms: int, **where: Any) -> list[AuditEvent]:
    since = datetime.fromtimestamp(max(0, since_ms - 1000) / 1000, UTC)
    return list(AuditEvent.objects.filter(connection=conn, action__endswith="replay.finished", at__gte=since, **where)
                .order_by("-at")[:ROWS])  # fmt: skip


def replay_windows(conn: str, stream: bytes, ids: Sequence[str], since_ms: int) -> list[tuple[bytes, str, str]]:
    """Where the copies of ``ids`` (entries of ``stream``) are, by the replay jobs' rows: the copies of the
    batch that copied each one (contiguous in the target), else, for an ID in a job's range that no recorded
    batch covers (a batch past the row's bound, or one a killed run did not save), the job's time window."""
    out: list[tuple[bytes, str, str]] = []
    for row in _replay_rows(conn, since_ms, target_stream=bytes(stream)):
        made = _replayed(row)
        target = _target(made) if made else None
        if made is None or target is None:
            continue
        batches = [b for b in made.get("batches") or () if isinstance(b, list) and len(b) == 5]
        for entry_id in ids:
            covering = [b for b in batches if _within(entry_id, b[0], b[1])]
            out += [(target, str(b[2]), str(b[3])) for b in covering]
            source = made.get("source_range") or [None, None]
            if not covering and _within(entry_id, *source[:2]) and (window := _window_ms(made)):
                out.append((target, *window))
    return list(dict.fromkeys(out))[:100]


def replay_sources(conn: str, stream: bytes, copy_id: str) -> list[bytes]:
    """The streams whose replay jobs made copies into ``stream`` in a window holding ``copy_id``."""
    at = _id(copy_id)
    if at is None:
        return []
    out: list[bytes] = []
    for row in _replay_rows(conn, at[0]):
        made = _replayed(row)
        source = bytes(row.target_stream) if row.target_stream is not None else None
        if made and source and source not in out and _target(made) == stream and made_copy(row, made["target"], copy_id):
            out.append(source)
    return out


def made_copy(row: AuditEvent, target: str, copy_id: str) -> bool:
    """Whether ``row`` is a replay job's that can have made ``copy_id`` in the stream shown as ``target``."""
    made = _replayed(row)
    if made is None or made.get("target") != target:
        return False
    batches = [b for b in made.get("batches") or () if isinstance(b, list) and len(b) == 5]
    if any(_within(copy_id, b[2], b[3]) for b in batches):
        return True
    window = _window_ms(made)
    return window is not None and _within(copy_id, *window)
