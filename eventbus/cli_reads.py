"""What the inspection commands of ``python -m eventbus`` read: streams, entries, groups, pending entries,
dead-letter queues and per-stream stats, as plain JSON-able rows (the command line prints them as tables
or as JSON, :mod:`eventbus.cli`).

Django-free, with redis-py alone: the DLQ conventions are the one copy (:mod:`eventbus.conventions`), and
so is the search language (:mod:`eventbus.search`), which any program reading the bus shares. Every
read is bounded: SCAN stops after ``max_keys`` streams, a search after ``scan_limit`` entries, a stats
window after ``METRICS_LIMIT`` metric entries per stream. On a cluster, SCAN walks every primary (a
cluster client's SCAN would ask one node) and single-key commands go to the key's node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import redis

from . import keys as bus_keys
from .connection import SyncClient, is_cluster_client
from .conventions import DlqEntry, DlqPattern, detect_dlq, dlq_candidates, dlq_source_streams, parse_dlq_entry
from .search import Query, QueryError, compile_query
from .text import display_text, id_ms

SCAN_COUNT = 1000
METRICS_LIMIT = 100_000
"""Metric entries read per stream for one ``stats`` window: enough for a busy bus (processed events are
aggregated per interval), and a bound on what one command may ask of Redis."""
_ID = re.compile(r"[0-9]{1,20}(-[0-9]{1,20})?")


class CommandError(Exception):
    """A command that cannot do what it was asked: the one line to print, and the exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def check_id(value: str, what: str, *, extremes: bool = True) -> str:
    """An entry ID as typed (``ms`` or ``ms-seq``; with ``extremes`` also ``-``, ``+`` and ``(ID``,
    exclusive), else exit 2."""
    if (extremes and (value in ("-", "+") or _ID.fullmatch(value.removeprefix("(")))) or _ID.fullmatch(value):
        return value
    raise CommandError(f"{what} {value!r} is not a stream ID (expected <milliseconds>-<sequence>)", 2)


def name(raw: Any) -> str:
    """A key, group or consumer name as text (bytes that are not UTF-8 as ``\\xNN``)."""
    return display_text(raw) if raw is not None else ""


def text_id(raw: Any) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


# ------------------------------------------------------------------------------------------------- streams


def scan_streams(client: SyncClient, *, match: str = "*", max_keys: int = 10_000) -> tuple[list[bytes], bool]:
    """Stream keys (SCAN TYPE stream), sorted, and whether ``max_keys`` cut the walk short."""
    nodes = (
        [client.get_redis_connection(node) for node in client.get_primaries()]
        if is_cluster_client(client)
        else [client]
    )
    found: set[bytes] = set()
    for node in nodes:
        cursor = 0
        while True:
            cursor, batch = node.scan(cursor, match=match, count=SCAN_COUNT, _type="stream")
            found.update(cast("list[bytes]", batch))
            if len(found) >= max_keys:
                return sorted(found)[:max_keys], True
            if not cursor:
                break
    return sorted(found), False


def require_stream(client: SyncClient, key: bytes) -> None:
    kind = cast(bytes, client.type(key))
    if kind == b"none":
        raise CommandError(f"no stream {name(key)!r}", 1)
    if kind != b"stream":
        raise CommandError(f"{name(key)!r} is a {kind.decode()}, not a stream", 2)


def lag_text(lag: int | None, unknown: int) -> str | None:
    """The lag column: the figure, ``≥n (k unknown)`` when it is a lower bound, None (shown ``-``) when unknown."""
    if lag is None:
        return None
    return f"≥{lag} ({unknown} unknown)" if unknown else str(lag)


def stream_rows(
    client: SyncClient, keys: Sequence[bytes], patterns: Sequence[DlqPattern]
) -> list[dict[str, Any]]:
    """One row per stream: length, groups, pending (sum over groups), lag, DLQ.

    ``lag`` is the largest lag a group reports: when Redis cannot tell some
    groups' lag (``lag_unknown_groups``), a lower bound (``lag_exact`` false, ``lag_text`` "≥n (k unknown)");
    None when no group reports one.
    """
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.xlen(key)
        pipe.xinfo_groups(key)
    replies = pipe.execute(raise_on_error=False)
    rows = []
    for i, key in enumerate(keys):
        length, groups = replies[2 * i], replies[2 * i + 1]
        if isinstance(length, Exception) or isinstance(groups, Exception):
            continue  # deleted (or replaced) since SCAN saw it
        known = [int(group["lag"]) for group in groups if group.get("lag") is not None]
        unknown = len(groups) - len(known)
        lag = max(known) if known else None
        kind = detect_dlq(key, patterns)
        rows.append(
            {
                "key": name(key),
                "key_hex": key.hex(),
                "length": int(length),
                "groups": len(groups),
                "pending": sum(int(group["pending"]) for group in groups),
                "lag": lag,
                "lag_exact": bool(groups) and not unknown,
                "lag_unknown_groups": unknown,
                "lag_text": lag_text(lag, unknown),
                "dlq": kind.convention if kind else None,
                "internal": bus_keys.is_metrics_key(key),
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------- entries


def decoded_value(raw: bytes) -> dict[str, Any]:
    """A field value for a human: JSON (object or array) parsed, else UTF-8 text, else hex."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": "hex", "text": raw.hex()}
    if text[:1] in ("{", "["):
        try:
            return {"kind": "json", "text": display_text(raw), "json": json.loads(text)}
        except (ValueError, RecursionError):
            pass
    return {"kind": "text", "text": display_text(raw)}


def entry_row(entry_id: bytes, fields: Sequence[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "id": entry_id.decode(),
        "ms": id_ms(entry_id.decode()),
        "fields": [{"name": name(field), **decoded_value(value)} for field, value in fields],
    }


def pairs(raw: Any) -> list[tuple[bytes, bytes]]:
    """An entry's fields in order, from redis-py's XRANGE reply (a dict; a flat list without its parser).

    redis-py's dict keeps the first value of a field name that repeats within an entry (Redis allows it).
    """
    if isinstance(raw, dict):
        return list(raw.items())
    return list(zip(raw[::2], raw[1::2], strict=True))


class _Entry(NamedTuple):
    """What a search reads of an entry (:class:`eventbus.search.SearchEntry`)."""

    id: str
    fields: tuple[tuple[bytes, bytes], ...]


def search_query(text: str, patterns: Sequence[DlqPattern]) -> Query:
    """``--search`` compiled by the bus's search language (plain text, or a CEL expression);
    exit 2 with the reason (for an expression, the parser's message) when it cannot be a query."""
    try:
        return compile_query(text, patterns=patterns)
    except QueryError as exc:
        raise CommandError(f"--search: {exc}", 2) from exc


Shown = Callable[[bytes, str, list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]]
"""What a caller lets the command line show of an entry: ``(key, entry ID, fields) -> fields``. The bus
shows the bytes as stored; a program embedding the command line passes its masking rules here, applied before
an entry is searched or printed (so a masked value is neither shown nor found)."""


def read_entries(
    client: SyncClient,
    key: bytes,
    *,
    start: str,
    reverse: bool,
    limit: int,
    search: Query | None,
    scan_limit: int,
    patterns: Sequence[DlqPattern] = (),
    shown: Shown | None = None,
) -> tuple[list[dict[str, Any]], int, str | None]:
    """Up to ``limit`` entries from ``start`` (oldest first, or newest first when ``reverse``), each as
    ``shown`` lets it show.

    With ``search``, only the entries it matches (on a DLQ by
    ``patterns``' conventions, with the dead-letter variables), reading at most ``scan_limit`` entries.
    Returns the rows, the entries read, and the ``--from`` that continues after them (``(ID``,
    exclusive), or None when the stream has nothing more. Entries the search left out because their
    own data made it too costly to evaluate are counted in ``search.too_costly`` (the caller says so).
    """
    require_stream(client, key)
    dlq = search is not None and detect_dlq(key, patterns) is not None
    rows: list[dict[str, Any]] = []
    scanned, cursor = 0, start
    while len(rows) < limit and scanned < scan_limit:
        count = limit if search is None else min(1000, scan_limit - scanned)
        command = ("XREVRANGE", key, cursor, "-") if reverse else ("XRANGE", key, cursor, "+")
        raw = client.execute_command(*command, "COUNT", count)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated; mypy applies untyped_calls_exclude to no union client
        for entry_id, flat in raw:
            scanned += 1
            cursor = "(" + entry_id.decode()
            fields = pairs(flat) if shown is None else shown(key, entry_id.decode(), pairs(flat))
            if search is None or search.matches(_Entry(entry_id.decode(), tuple(fields)), dlq=dlq, key=key):
                rows.append(entry_row(entry_id, fields))
                if len(rows) == limit:
                    break
        if len(raw) < count and len(rows) < limit:
            return rows, scanned, None
    return rows, scanned, cursor


# ------------------------------------------------------------------------------------------ groups, pending


def group_rows(client: SyncClient, key: bytes) -> list[dict[str, Any]]:
    """XINFO GROUPS, each with its consumers (XINFO CONSUMERS)."""
    require_stream(client, key)
    rows = []
    for group in client.xinfo_groups(key):
        consumers = client.xinfo_consumers(key, group["name"])
        rows.append(
            {
                "name": name(group["name"]),
                "consumers": [
                    {"name": name(c["name"]), "pending": int(c["pending"]), "idle_ms": int(c["idle"])}
                    for c in consumers
                ],
                "pending": int(group["pending"]),
                "last_delivered_id": text_id(group["last-delivered-id"]),
                "entries_read": group.get("entries-read"),
                "lag": group.get("lag"),
            }
        )
    return rows


def pending_rows(
    client: SyncClient, key: bytes, group: bytes, *, consumer: bytes | None, min_idle: int | None, limit: int
) -> tuple[int, list[dict[str, Any]]]:
    """The group's PEL size and up to ``limit`` pending entries, oldest first (XPENDING's extended form)."""
    require_stream(client, key)
    try:
        total = int(client.xpending(key, group)["pending"])
    except redis.ResponseError as exc:
        if "NOGROUP" in str(exc):
            raise CommandError(f"no group {name(group)!r} on {name(key)!r}", 1) from exc
        raise
    rows = cast("list[dict[str, Any]]", client.xpending_range(key, group, "-", "+", limit, consumername=consumer, idle=min_idle))
    return total, [
        {
            "id": row["message_id"].decode(),
            "consumer": name(row["consumer"]),
            "idle_ms": int(row["time_since_delivered"]),
            "deliveries": int(row["times_delivered"]),
        }
        for row in rows
    ]


# ---------------------------------------------------------------------------------------------------- DLQs


@dataclass(frozen=True, slots=True)
class DlqRow:
    key: bytes
    convention: str
    length: int
    sources: list[bytes]

    def json(self) -> dict[str, Any]:
        return {
            "key": name(self.key),
            "convention": self.convention,
            "length": self.length,
            "source_streams": [name(s) for s in self.sources],
        }


def _newest(
    client: SyncClient, key: bytes, count: int, shown: Shown | None = None
) -> list[tuple[bytes, list[tuple[bytes, bytes]]]]:
    replies = client.execute_command("XREVRANGE", key, "+", "-", "COUNT", count)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated; mypy applies untyped_calls_exclude to no union client
    if shown is None:
        return [(i, pairs(f)) for i, f in replies]
    return [(i, shown(key, i.decode(), pairs(f))) for i, f in replies]


def dlq_rows(
    client: SyncClient, keys: Sequence[bytes], patterns: Sequence[DlqPattern], *, shown: Shown | None = None
) -> list[DlqRow]:
    """The DLQs among ``keys`` by the conventions, with the streams they feed (the key's hint,
    then the newest entries' own streams)."""
    rows = []
    for key in keys:
        kind = detect_dlq(key, patterns)
        if kind is None:
            continue
        sample = [parse_dlq_entry(key, i.decode(), f, patterns) for i, f in _newest(client, key, 20, shown)]
        convention = kind.convention
        if sample and convention == "eventbus-or-streams":
            convention = sample[0].convention
        rows.append(DlqRow(key, convention, int(client.xlen(key)), dlq_source_streams(key, sample, patterns)))
    return rows


def dlqs_of(client: SyncClient, stream: bytes) -> list[bytes]:
    """The existing DLQ keys the built-in conventions give ``stream`` (both namings, OmniDaemon's groups)."""
    try:
        groups = [g["name"] for g in client.xinfo_groups(stream)]
    except redis.ResponseError:
        groups = []
    return [key for key in dlq_candidates(stream, groups) if client.type(key) == b"stream"]


def dlq_entry_row(entry: DlqEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "convention": entry.convention,
        "original_stream": name(entry.original_stream) if entry.original_stream else None,
        "original_id": entry.original_id,
        "group": entry.group,
        "error": entry.error,
        "retries": entry.retries,
        "failed_at_ms": entry.failed_at_ms,
    }


def dlq_entries(
    client: SyncClient, key: bytes, patterns: Sequence[DlqPattern], *, limit: int, shown: Shown | None = None
) -> list[dict[str, Any]]:
    """The newest ``limit`` entries of one DLQ as ``shown`` lets them show, parsed by its convention."""
    newest = _newest(client, key, limit, shown)
    return [dlq_entry_row(parse_dlq_entry(key, i.decode(), f, patterns)) for i, f in newest]


# --------------------------------------------------------------------------------------------------- stats


def _metric_entries(client: SyncClient, key: bytes, since_ms: int) -> Iterator[dict[bytes, bytes]]:
    for _id, flat in client.execute_command("XRANGE", key, since_ms, "+", "COUNT", METRICS_LIMIT):  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated; mypy applies untyped_calls_exclude to no union client
        yield dict(pairs(flat))


def stats_rows(
    client: SyncClient, keys: Sequence[bytes], patterns: Sequence[DlqPattern], *, window_s: int
) -> list[dict[str, Any]]:
    """Per application stream: length, pending, lag, DLQ depth, and over the last ``window_s`` seconds
    the bus's metric counts (``processed``/``failed``/``dead_lettered`` summed from ``{S}:metrics`` and the
    old shared ``eventbus:metrics``) and the processed rate per second."""
    seconds, micros = client.time()
    since = seconds * 1000 + micros // 1000 - window_s * 1000
    shared: list[dict[bytes, bytes]] = []
    if client.type(bus_keys.METRICS_STREAM) == b"stream":
        shared = list(_metric_entries(client, bus_keys.METRICS_STREAM.encode(), since))
    rows = []
    app = [k for k in keys if not bus_keys.is_metrics_key(k) and detect_dlq(k, patterns) is None]
    for row in stream_rows(client, app, patterns):
        key = bytes.fromhex(row["key_hex"])
        counts = {"processed": 0, "failed": 0, "retried": 0, "dead_lettered": 0}
        own = bus_keys.metrics_key(key)
        metrics = list(_metric_entries(client, own, since)) if client.type(own) == b"stream" else []
        for fields in metrics + [f for f in shared if f.get(b"stream") == key]:
            event = fields.get(b"event", b"").decode("ascii", "replace")
            if event in counts:
                counts[event] += int(fields.get(b"count", b"1") or 1)
        depth = sum(int(client.xlen(dlq)) for dlq in dlqs_of(client, key))
        rows.append(
            {
                **{k: row[k] for k in ("key", "length", "groups", "pending", "lag", "lag_exact",
                                       "lag_unknown_groups", "lag_text")},
                "dlq_depth": depth,
                "window_s": window_s,
                **counts,
                "processed_per_s": round(counts["processed"] / window_s, 3),
            }
        )
    return rows
