"""One parser per Redis reply, from the raw replies redis-py passes through to the :mod:`.types`.

The console sends XINFO, XRANGE and XPENDING with ``execute_command``, so replies arrive as Redis
wrote them: flat ``[name, value, ...]`` lists of bytes and integers. Fields a server version lacks
(``entries-read`` and ``lag`` before 7.0, ``inactive`` before 7.2) become None, never a guess. INFO's
fields come from redis-py's own INFO parser (a dict of text); :func:`server_release` reads its name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, overload

from .ids import reply_id
from .types import ConsumerInfo, Entry, GroupInfo, PendingEntry, PendingSummary, StreamInfo


@overload
def reply_text(value: bytes | str) -> str: ...
@overload
def reply_text(value: None) -> None: ...
def reply_text(value: bytes | str | None) -> str | None:
    """A reply's bytes as text (IDs and counters are ASCII); None stays None."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def pairs(flat: Sequence[Any]) -> dict[bytes, Any]:
    """Redis's flat ``[name, value, name, value, ...]`` replies as a dict keyed by the names' bytes.

    Two slices zipped into a dict run at C speed. A snapshot of 100k streams parses 300k of these
    replies: decoding each name to text in a comprehension cost a third of its parsing (about a second).
    """
    return dict(zip(flat[0::2], flat[1::2], strict=False))  # a name without a value (never sent) is left out


def optional_int(value: Any) -> int | None:
    if value is None:
        return None
    return int(value)


def server_release(info: Mapping[str, object]) -> str | None:
    """What the server is, for people, from INFO server: ``"Redis 7.0.15"``, ``"Valkey 8.1.8"``.

    Valkey keeps ``redis_version`` at 7.2.4, the Redis release whose commands and replies it speaks (the
    feature checks use that), and names itself in ``server_name`` with its own ``<name>_version``.
    Redis 7.0 has no ``server_name``: a server without it is Redis ``redis_version`` (a Redis that names
    itself ``redis`` reads the same, from its ``redis_version``).
    """
    name = str(info.get("server_name") or "")
    own = info.get(f"{name}_version") if name else None
    if own:
        return f"{name[:1].upper()}{name[1:]} {own}"
    version = info.get("redis_version")
    return f"Redis {version}" if version else None


def parse_entry(raw: Sequence[Any]) -> Entry:
    """One ``[id, [field, value, ...]]`` of XRANGE / XREVRANGE / XREAD."""
    entry_id, flat = raw[0], raw[1] or []
    fields = tuple((flat[i], flat[i + 1]) for i in range(0, len(flat) - 1, 2))
    return Entry(id=reply_text(entry_id), fields=fields)


def parse_group(raw: Sequence[Any]) -> GroupInfo:
    """One row of XINFO GROUPS."""
    info = pairs(raw)
    return GroupInfo(
        name=info[b"name"],
        consumers=int(info[b"consumers"]),
        pending=int(info[b"pending"]),
        last_delivered_id=reply_text(info[b"last-delivered-id"]),
        entries_read=optional_int(info.get(b"entries-read")),
        lag=optional_int(info.get(b"lag")),
    )


def parse_consumer(raw: Sequence[Any]) -> ConsumerInfo:
    """One row of XINFO CONSUMERS.

    Redis 7.2 added ``inactive``: milliseconds since the consumer's last successful read, or -1 when
    it never read. Both "absent" and -1 are None: no figure to show.
    """
    info = pairs(raw)
    inactive = info.get(b"inactive")
    return ConsumerInfo(
        name=info[b"name"],
        pending=int(info[b"pending"]),
        idle_ms=int(info[b"idle"]),
        inactive_ms=None if inactive is None or int(inactive) < 0 else int(inactive),
    )


def parse_stream(key: bytes, info: Sequence[Any], groups: Sequence[Any] = ()) -> StreamInfo:
    """XINFO STREAM (never FULL) of ``key`` and, when read beside it, its XINFO GROUPS."""
    facts = pairs(info)
    return StreamInfo(
        key=key,
        length=int(facts[b"length"]),
        first_id=reply_id(facts.get(b"first-entry")),
        last_id=reply_id(facts.get(b"last-entry")),
        last_generated_id=reply_text(facts.get(b"last-generated-id")),
        entries_added=optional_int(facts.get(b"entries-added")),
        max_deleted_entry_id=reply_text(facts.get(b"max-deleted-entry-id")),
        radix_tree_keys=optional_int(facts.get(b"radix-tree-keys")),
        groups=tuple(parse_group(g) for g in groups),
    )


def parse_pending_summary(raw: Sequence[Any]) -> PendingSummary:
    """XPENDING's summary form: ``[count, min ID, max ID, [[consumer, count], ...]]``."""
    total, min_id, max_id, per_consumer = raw
    return PendingSummary(
        count=int(total),
        min_id=reply_text(min_id),
        max_id=reply_text(max_id),
        consumers=tuple((name, int(n)) for name, n in (per_consumer or [])),
    )


def parse_pending_entry(raw: Sequence[Any], *, exists: bool = True) -> PendingEntry:
    """One row of XPENDING's extended form: ``[id, consumer, idle ms, deliveries]``.

    ``exists`` is for callers that looked the message up (XRANGE id id); the others take it as there.
    """
    return PendingEntry(
        id=reply_text(raw[0]), consumer=raw[1], idle_ms=int(raw[2]), deliveries=int(raw[3]), exists=exists
    )
