"""Write-side Redis access: the operations behind the operator buttons (SPEC sections 4 and 7).

Claim, ack, rewind, DLQ requeue / delete / purge, and replay. Each function validates its input,
talks to one monitored server through :func:`translated` (so only :class:`OpsError` escapes), and
returns frozen dataclasses. The callers (views, Celery jobs) add roles, audit rows and progress.

What makes these safe to press twice, from two browsers, or from a worker that gets killed:

* **claim** is XCLAIM with the operator's ``min_idle_ms``: an entry its consumer touched since the
  page loaded is not stolen. The outcome of every ID is read inside the same MULTI as the XCLAIM.
* **requeue** moves each dead letter inside a Lua script: still there? XADD to its stream + XDEL
  (``lua/requeue.lua`` for entries planned in Python; ``lua/requeue_rule.lua`` for the bulk path, which
  reads and rewrites a whole batch inside Redis). Two operators requeueing the same entry make one
  new entry; a re-run job finds moved entries gone.
* **replay** copies a batch and advances a Redis-side cursor in one script (``lua/replay.lua``), so a
  job resumed after a crash copies nothing twice, whatever progress its caller managed to save.
* **rewind** computes ENTRIESREAD so Redis keeps reporting the group's lag (SPEC section 9).

Scripts see all their keys on one server: on Redis Cluster a DLQ and its target stream (and a replay's
source, target and cursor key) must share a hash slot, and the bulk requeue script reads its targets
from the entries, so it cannot declare them. The console targets standalone servers (SPEC section 9).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import redis
from redis.commands.core import Script

from .client import get_client
from .conventions import (
    EVENTBUS_OR_STREAMS,
    EVENTBUS_PREFIX,
    REQUEUED_FROM_FIELD,
    RETRIES_FIELD,
    DlqEntry,
    detect_dlq,
    dlq_patterns,
    parse_dlq_entry,
    requeue_plan,
)
from .errors import InvalidArgument, NotFound, OpsError, translated
from .ids import StreamId, parse_id, parse_position
from .reads import _entry, _int, _pairs, _s

MAX_IDS = 1000
"""IDs one claim / ack / requeue / delete call accepts: one page of a selection, one bounded MULTI."""
MAX_AUTOCLAIM_COUNT = 1000
MAX_BATCH = 2000
"""Upper bound for every batch size (larger requests are served in batches of this size): a bulk
requeue script moving 2,000 dead letters keeps Redis busy for about 14 ms, and other clients wait."""
COUNT_BATCH = 2000
"""Entries counted per Lua call by previews (only two integers travel back). A call costs Redis
about 6 ms for 2,000 entries of a dozen fields (measured: 29 ms for 10,000), so other clients wait
at most that long."""
REPLAY_CURSOR_TTL_MS = 7 * 24 * 3600 * 1000
"""How long a replay job's Redis-side cursor outlives its last batch."""
ZERO_ID = "0-0"


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Outcome of a claim or an autoclaim sweep, each ID in exactly one tuple.

    ``deleted`` are IDs that were pending but whose message no longer exists in the stream: Redis 7
    drops them from the PEL during the claim (Redis 6.2 leaves them pending: ack them away).
    ``skipped`` are IDs not claimed because they are not pending or were active more recently than
    ``min_idle_ms`` (always empty for autoclaim: XAUTOCLAIM does not report what it passed over).
    """

    claimed: tuple[str, ...]
    skipped: tuple[str, ...]
    deleted: tuple[str, ...]
    next: str | None = None  # XAUTOCLAIM cursor to continue from; None when the sweep is complete


@dataclass(frozen=True, slots=True)
class RewindPlan:
    """Where a rewind puts a group and what it costs, as computed before (or when) doing it.

    ``will_redeliver`` is the number of entries now in the stream after ``last_delivered_id`` (up to
    the last ID at the time of the preview): exactly what XREADGROUP ``>`` then delivers, plus
    whatever is published meanwhile. ``entries_read`` is the ENTRIESREAD given to Redis (None before
    Redis 7). ``lag_known`` is False when entries after the target were deleted (XDEL): Redis then
    reports the group's lag as null until the group has read past them, whatever ENTRIESREAD says.
    """

    last_delivered_id: str
    entries_read: int | None
    will_redeliver: int
    current_last_delivered_id: str
    lag_known: bool = True


@dataclass(frozen=True, slots=True)
class Requeued:
    dlq_id: str
    stream: bytes
    new_id: str


@dataclass(frozen=True, slots=True)
class RequeueFailure:
    """A DLQ entry left where it was: no target could be planned for it, or the target refused."""

    dlq_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RequeueResult:
    requeued: tuple[Requeued, ...]
    missing: tuple[str, ...]  # no longer in the DLQ (requeued or deleted by someone else)
    failed: tuple[RequeueFailure, ...] = ()  # still in the DLQ: see each reason


@dataclass(frozen=True, slots=True)
class RequeueBatch:
    result: RequeueResult
    cursor: str | None  # last DLQ ID handled; None when nothing is left up to ``up_to``
    scanned: int


@dataclass(frozen=True, slots=True)
class ReplayBatch:
    copied: int
    scanned: int
    cursor: str | None  # last source ID handled; None when the range is done


@dataclass(frozen=True, slots=True)
class ReplayCount:
    """A dry run's figures: ``complete`` is False when ``limit`` stopped the scan (``matched`` is then
    a lower bound)."""

    matched: int
    scanned: int
    complete: bool


# ---------------------------------------------------------------- scripts


_SCRIPT_NAMES = ("requeue", "requeue_rule", "count_range", "purge", "replay")
_scripts: weakref.WeakKeyDictionary[redis.Redis, dict[str, Script]] = weakref.WeakKeyDictionary()
_scripts_lock = threading.Lock()


def _source(name: str) -> str:
    return resources.files(__package__).joinpath("lua", f"{name}.lua").read_text()


def _script(client: redis.Redis, name: str) -> Script:
    """The script ``name`` registered on ``client``, once per client (EVALSHA, reloaded on NOSCRIPT)."""
    scripts = _scripts.get(client)
    if scripts is None:
        with _scripts_lock:
            scripts = _scripts.get(client)
            if scripts is None:
                scripts = {n: client.register_script(_source(n)) for n in _SCRIPT_NAMES}
                _scripts[client] = scripts
    return scripts[name]


# ---------------------------------------------------------------- validation


def _key(key: bytes, what: str = "stream key") -> bytes:
    if not isinstance(key, bytes) or not key:
        raise InvalidArgument(f"A {what} is required.")
    return key


def _name(value: bytes, what: str) -> bytes:
    if not isinstance(value, bytes) or not value:
        raise InvalidArgument(f"A {what} name is required.")
    return value


def _ids(ids: Sequence[str], *, limit: int = MAX_IDS) -> list[str]:
    """Validated, normalised (``ms-seq``), de-duplicated IDs in their given order."""
    if isinstance(ids, str | bytes):
        raise InvalidArgument("ids must be a list of entry IDs.")
    out: list[str] = []
    seen: set[str] = set()
    for value in ids:
        if not isinstance(value, str):
            raise InvalidArgument("Entry IDs must be text like 1700000000000-0.")
        sid = str(parse_id(value, allow_bare=False, what="entry ID"))
        if sid not in seen:
            seen.add(sid)
            out.append(sid)
    if not out:
        raise InvalidArgument("No entry IDs given.")
    if len(out) > limit:
        raise InvalidArgument(f"At most {limit} entry IDs per call ({len(out)} given).")
    return out


def _non_negative(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f"{what} must be a whole number, 0 or more.")
    return value


def _positive(value: int, what: str, *, cap: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{what} must be a whole number, 1 or more.")
    return min(value, cap) if cap else value


def _require_stream(conn: str, key_type: object) -> None:
    if isinstance(key_type, Exception):
        with translated(conn):
            raise key_type
    if key_type in (b"none", "none"):
        raise NotFound("No such stream.", conn=conn)
    if key_type not in (b"stream", "stream"):
        raise NotFound("That key holds another type, not a stream.", conn=conn)


def _match_args(match: Mapping[bytes, bytes] | None) -> list[bytes]:
    args: list[bytes] = []
    for name, value in (match or {}).items():
        if not isinstance(name, bytes) or not isinstance(value, bytes) or not name:
            raise InvalidArgument("A field filter maps field names to values, both bytes.")
        args += (name, value)
    return args


def _sid(value: str) -> StreamId:
    return parse_id(value, allow_bare=False)


# ---------------------------------------------------------------- claim, autoclaim, ack


def claim(
    conn: str, key: bytes, group: bytes, *, ids: Sequence[str], consumer: bytes, min_idle_ms: int
) -> ClaimResult:
    """XCLAIM ``ids`` for ``consumer`` if they are still idle for ``min_idle_ms`` (deliveries + 1).

    Each ID's outcome is decided from replies read in one MULTI around the XCLAIM, so no other
    client can act in between: its existence (XRANGE id id) and its PEL row (XPENDING id id) before,
    the XCLAIM reply, and its PEL row after. An ID is

    * ``claimed`` when XCLAIM returned its entry;
    * ``deleted`` when the message did not exist but the ID was pending, and the claim dropped it
      from the PEL (Redis 7, which does so even if it was not idle enough) or took it over (Redis 6.2,
      where its delivery count grew and it stays pending under ``consumer``);
    * ``skipped`` otherwise: not pending, or pending but used more recently than ``min_idle_ms``.
    """
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    _non_negative(min_idle_ms, "min_idle_ms")
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=True)
        for entry_id in wanted:
            pipe.execute_command("XRANGE", key, entry_id, entry_id, "COUNT", 1)
        for entry_id in wanted:
            pipe.execute_command("XPENDING", key, group, entry_id, entry_id, 1)
        pipe.execute_command("XCLAIM", key, group, consumer, min_idle_ms, *wanted)
        for entry_id in wanted:
            pipe.execute_command("XPENDING", key, group, entry_id, entry_id, 1)
        replies = pipe.execute()
    n = len(wanted)
    existed, before, claimed_raw, after = (
        replies[:n],
        replies[n : 2 * n],
        replies[2 * n],
        replies[2 * n + 1 :],
    )
    claimed_ids = {_s(item[0]) for item in claimed_raw if item}
    claimed, skipped, deleted = [], [], []
    for i, entry_id in enumerate(wanted):
        if entry_id in claimed_ids:
            claimed.append(entry_id)
        elif not existed[i] and before[i] and (not after[i] or int(after[i][0][3]) > int(before[i][0][3])):
            deleted.append(entry_id)
        else:
            skipped.append(entry_id)
    return ClaimResult(claimed=tuple(claimed), skipped=tuple(skipped), deleted=tuple(deleted))


def autoclaim(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes,
    min_idle_ms: int,
    count: int = 1000,
    start: str = "0-0",
    max_batches: int = 100,
) -> ClaimResult:
    """Sweep the PEL from ``start`` with XAUTOCLAIM, ``count`` (at most 1000) entries per call.

    Stops when Redis returns the cursor 0-0 (``next`` is then None) or after ``max_batches`` calls
    (``next`` is where to continue). Redis 7's third reply element, pending IDs whose message was
    deleted (dropped from the PEL by the sweep), is collected into ``deleted``.
    """
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    _non_negative(min_idle_ms, "min_idle_ms")
    count = _positive(count, "count", cap=MAX_AUTOCLAIM_COUNT)
    max_batches = _positive(max_batches, "max_batches")
    cursor = str(parse_id(start, what="start"))
    client = get_client(conn)
    claimed: list[str] = []
    deleted: list[str] = []
    with translated(conn):
        for _ in range(max_batches):
            reply = client.execute_command(
                "XAUTOCLAIM", key, group, consumer, min_idle_ms, cursor, "COUNT", count
            )
            cursor = _s(reply[0])
            # Redis 6.2 may answer nil for an entry deleted meanwhile: it was claimed, but has no ID here.
            claimed += [_s(item[0]) for item in reply[1] if item]
            if len(reply) > 2:
                deleted += [_s(entry_id) for entry_id in reply[2]]
            if cursor == ZERO_ID:
                break
    return ClaimResult(
        claimed=tuple(claimed), skipped=(), deleted=tuple(deleted), next=None if cursor == ZERO_ID else cursor
    )


def ack(conn: str, key: bytes, group: bytes, *, ids: Sequence[str]) -> int:
    """XACK ``ids``; returns how many Redis found pending (already-acked IDs are not counted).

    XACK answers 0 for an unknown stream or group too, so when nothing was acked the group is looked
    up (XINFO GROUPS) to tell the operator "no such group" rather than "nothing acked".
    """
    _key(key)
    _name(group, "group")
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=True)
        pipe.type(key)
        pipe.execute_command("XACK", key, group, *wanted)
        key_type, acked = pipe.execute(raise_on_error=False)
        _require_stream(conn, key_type)
        if isinstance(acked, Exception):
            raise acked
        if not acked and not any(g[1] == group for g in _group_rows(client, key)):
            raise NotFound("No such consumer group on this stream.", conn=conn)
    return int(acked)


def _group_rows(client: redis.Redis, key: bytes) -> list[list[Any]]:
    """XINFO GROUPS as flat rows (``row[1]`` is the name)."""
    return client.execute_command("XINFO", "GROUPS", key)


# ---------------------------------------------------------------- rewind


def rewind_preview(conn: str, key: bytes, group: bytes, *, to: str) -> RewindPlan:
    """What :func:`rewind` would do, changing nothing.

    ``to`` is where the group's last-delivered ID goes:

    * an entry ID ``ms-seq``: that ID, as ``XGROUP SETID`` takes it (entries after it are delivered);
    * a bare millisecond or an ISO-8601 time: redelivery starts *at* that time, so the last-delivered
      ID becomes the newest entry before it (or 0-0);
    * ``0`` or ``-``: the beginning; ``$``: the end (nothing is redelivered).

    Cost: the number of entries after the target is counted inside Redis (``lua/count_range.lua``) in
    batches of 2,000, so a preview is O(entries to redeliver) but never blocks Redis for more than one
    batch and moves two integers per batch. A target before the first entry costs nothing (the answer
    is the stream length), and so does a target at or after the end.
    """
    return _rewind(conn, key, group, to=to, apply=False)


def rewind(conn: str, key: bytes, group: bytes, *, to: str) -> RewindPlan:
    """Move the group's last-delivered ID (``XGROUP SETID ... ENTRIESREAD n``) and report the plan.

    ENTRIESREAD is the number of entries ever added minus those now after the target, i.e. Redis 7's
    own logical read counter of the target when no entry after it was deleted; XINFO GROUPS ``lag`` is
    then exactly ``will_redeliver``. When entries after the target were deleted (``lag_known`` False),
    Redis ignores the counter and reports null lag until the group reads past them, then recomputes it.
    On Redis 6.2 (no counters) ENTRIESREAD is left out. Pending entries are not touched.

    Entries published after the preview's snapshot are delivered too but not in ``will_redeliver``;
    a trim or delete racing with the count can make Redis's lag differ from it by what was removed.
    """
    return _rewind(conn, key, group, to=to, apply=True)


def _rewind(conn: str, key: bytes, group: bytes, *, to: str, apply: bool) -> RewindPlan:
    _key(key)
    _name(group, "group")
    text = (to or "").strip() if isinstance(to, str) else ""
    if not text:
        raise InvalidArgument("Say where to rewind to: an entry ID, a date-time, 0 (start) or $ (end).")
    client = get_client(conn)
    with translated(conn):
        # One snapshot of the stream's counters and the group, consistent with each other.
        pipe = client.pipeline(transaction=True)
        pipe.type(key)
        pipe.execute_command("XINFO", "STREAM", key)
        pipe.execute_command("XINFO", "GROUPS", key)
        key_type, info_raw, groups_raw = pipe.execute(raise_on_error=False)
        _require_stream(conn, key_type)
        for reply in (info_raw, groups_raw):
            if isinstance(reply, Exception):
                raise reply
        info = _pairs(info_raw)
        group_row = next((row for row in map(_pairs, groups_raw) if row["name"] == group), None)
        if group_row is None:
            raise NotFound("No such consumer group on this stream.", conn=conn)
        length = int(info["length"])
        last = _s(info["last-generated-id"]) or ZERO_ID
        first_entry = info.get("first-entry")
        first = _s(first_entry[0]) if first_entry else None
        added = _int(info.get("entries-added"))
        max_deleted = _s(info.get("max-deleted-entry-id")) or ZERO_ID

        target = _rewind_target(client, key, text, last=last)
        if _sid(target) > _sid(last):
            raise InvalidArgument(f"{target} is after the stream's last ID ({last}): use $ for the end.")
        if first is None or _sid(target) >= _sid(last):
            will = 0
        elif _sid(target) < _sid(first):
            will = length
        else:
            will = _count(client, key, "(" + target, last)
        entries_read = added - will if added is not None else None
        # Redis's own test (streamRangeHasTombstones): a deletion at or after the target, and not
        # before the first entry, makes it ignore the group's counter.
        tombstones_ahead = (
            first is not None
            and max_deleted != ZERO_ID
            and _sid(first) <= _sid(max_deleted)
            and _sid(target) <= _sid(max_deleted)
        )
        lag_known = added is not None and not tombstones_ahead
        if apply:
            args: list[Any] = ["XGROUP", "SETID", key, group, target]
            if entries_read is not None:
                args += ["ENTRIESREAD", entries_read]
            client.execute_command(*args)
    return RewindPlan(
        last_delivered_id=target,
        entries_read=entries_read,
        will_redeliver=will,
        current_last_delivered_id=_s(group_row["last-delivered-id"]),
        lag_known=lag_known,
    )


def _rewind_target(client: redis.Redis, key: bytes, text: str, *, last: str) -> str:
    if text == "$":
        return last
    if text in ("0", "-"):
        return ZERO_ID
    pos = parse_position(text, what="rewind target")
    if pos.seq is not None:
        return str(pos.lowest)
    before = (
        client.execute_command("XREVRANGE", key, "(" + str(pos.lowest), "-", "COUNT", 1) if pos.ms else []
    )
    return _s(before[0][0]) if before else ZERO_ID


def _count(client: redis.Redis, key: bytes, start: str, end: str, match: Sequence[bytes] = ()) -> int:
    """Entries in [start, end] (``start`` may be exclusive), counted inside Redis in bounded batches."""
    script = _script(client, "count_range")
    total = 0
    while True:
        read, matched, last = script(keys=[key], args=[start, end, COUNT_BATCH, *match])
        total += int(matched)
        if int(read) < COUNT_BATCH or not last:
            return total
        start = "(" + _s(last)


# ---------------------------------------------------------------- DLQ: requeue, delete, purge, list


def requeue(conn: str, dlq_key: bytes, *, ids: Sequence[str]) -> RequeueResult:
    """Requeue the given DLQ entries (at most 1000): each one, atomically, exactly once.

    The entries are read (one pipeline), each one's target and payload is planned in Python by its
    convention (:func:`conventions.requeue_plan`), then one Lua call moves them all, each entry as its
    own "still there? XADD + XDEL" step. Entries gone by then are ``missing``; entries no convention
    can send anywhere, or whose target refuses the XADD, stay in the DLQ and are ``failed``.
    """
    _key(dlq_key, "DLQ key")
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.type(dlq_key)
        for entry_id in wanted:
            pipe.execute_command("XRANGE", dlq_key, entry_id, entry_id, "COUNT", 1)
        key_type, *found = pipe.execute(raise_on_error=False)
        _require_stream(conn, key_type)
        entries = []
        missing = []
        for entry_id, raw in zip(wanted, found, strict=True):
            if isinstance(raw, Exception):
                raise raw
            if raw:
                entries.append(raw[0])
            else:
                missing.append(entry_id)
        result = _requeue_entries(conn, client, dlq_key, entries)
    return RequeueResult(
        requeued=result.requeued, missing=tuple(missing) + result.missing, failed=result.failed
    )


def requeue_range(
    conn: str, dlq_key: bytes, *, up_to: str, after: str | None = None, batch: int = 500
) -> RequeueBatch:
    """Requeue one batch of the oldest DLQ entries after ``after`` and not newer than ``up_to``.

    The bulk job calls this in a loop, passing back ``cursor`` as ``after`` until it is None. It is
    safe to re-run from any older cursor (or from the start) after a crash: requeued entries were
    deleted from the DLQ in the same script that copied them, so they are simply not read again.
    Entries newer than ``up_to`` (arrived after the operator looked) are never read. Failed entries
    stay in the DLQ and the cursor moves past them.

    How a batch is planned depends on the convention:

    * when requeueing is a field rewrite (``{stream}:dlq`` of eventbus or the seed module, configured
      patterns), the rewrite is handed to ``lua/requeue_rule.lua`` as a rule and the batch is read,
      rewritten and moved inside Redis in ONE call: nothing travels per entry, which is what makes a
      bulk requeue 10x faster than a per-entry loop. An entry the rule cannot place is left alone and
      planned in Python like the next case;
    * otherwise (OmniDaemon re-encodes its JSON) the batch is read, each entry planned by
      :func:`conventions.requeue_plan`, and moved by ONE call of ``lua/requeue.lua``.
    """
    _key(dlq_key, "DLQ key")
    upper = str(parse_position(up_to, what="up_to").highest)
    start = "(" + str(parse_id(after, allow_bare=False, what="after")) if after else "-"
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    rule = _requeue_rule(dlq_key)
    client = get_client(conn)
    with translated(conn):
        if rule is None:
            pipe = client.pipeline(transaction=False)
            pipe.type(dlq_key)
            pipe.execute_command("XRANGE", dlq_key, start, upper, "COUNT", batch)
            key_type, raw = pipe.execute(raise_on_error=False)
            _require_stream(conn, key_type)
            if isinstance(raw, Exception):
                raise raw
            result = _requeue_entries(conn, client, dlq_key, raw)
            scanned, last = len(raw), _s(raw[-1][0]) if raw else None
        else:
            reply = _script(client, "requeue_rule")(keys=[dlq_key], args=[start, upper, batch, *rule])
            scanned, last = int(reply[0]), _s(reply[1])
            if not scanned:
                _require_stream(conn, client.type(dlq_key))
            result = _rule_outcomes(conn, dlq_key, reply)
    return RequeueBatch(result=result, cursor=last if scanned == batch else None, scanned=scanned)


EVENTBUS_SWITCH_FIELD = b"dlq_original_stream"
"""The field whose presence makes a ``{stream}:dlq`` entry eventbus's rather than the seed module's."""


def _requeue_rule(dlq_key: bytes) -> list[bytes] | None:
    """``requeue_rule.lua``'s ARGV[4..] for this DLQ, or None when requeue is not a field rewrite.

    Mirrors :func:`conventions.requeue_plan` for the conventions whose plan keeps a subsequence of the
    entry's fields and takes its target from the key or one field (the tests check the two agree
    entry by entry). Where the rule cannot decide, the script declines and requeue_plan decides.
    """
    kind = detect_dlq(dlq_key)
    if kind is None:
        return None
    if kind.convention == EVENTBUS_OR_STREAMS:
        if not kind.source_hint:
            return None
        return [b"switch", kind.source_hint, EVENTBUS_SWITCH_FIELD, EVENTBUS_PREFIX, REQUEUED_FROM_FIELD,
                RETRIES_FIELD, REQUEUED_FROM_FIELD]  # fmt: skip
    pattern = next((p for p in dlq_patterns() if p.name == kind.convention), None)
    if pattern is None:  # OmniDaemon
        return None
    hidden = sorted(pattern.hidden_fields)
    if pattern.target_kind == "field":
        return [b"field", b"", pattern.target_arg, b"", REQUEUED_FROM_FIELD, *hidden]
    hint = pattern.source_hint(dlq_key)
    if not hint:
        return None
    return [b"fixed", hint, b"", b"", REQUEUED_FROM_FIELD, *hidden]


def _rule_outcomes(conn: str, dlq_key: bytes, reply: Sequence) -> RequeueResult:
    """Turn ``requeue_rule.lua``'s reply into a result; plan and move declined entries in Python."""
    requeued: list[Requeued] = []
    failed: list[RequeueFailure] = []
    declined: list[str] = []
    targets = [b"", *reply[2]]
    for i in range(3, len(reply), 3):
        entry_id, outcome = reply[i].decode(), reply[i + 2]
        if outcome is None:
            declined.append(entry_id)
        elif outcome[:1] == b"!":
            failed.append(RequeueFailure(entry_id, f"Redis refused the XADD: {_s(outcome[1:])}"))
        else:
            requeued.append(Requeued(dlq_id=entry_id, stream=targets[reply[i + 1]], new_id=outcome.decode()))
    missing: list[str] = []
    for start in range(0, len(declined), MAX_IDS):
        rest = requeue(conn, dlq_key, ids=declined[start : start + MAX_IDS])
        requeued += rest.requeued
        missing += rest.missing
        failed += rest.failed
    return RequeueResult(requeued=tuple(requeued), missing=tuple(missing), failed=tuple(failed))


def _requeue_entries(conn: str, client: redis.Redis, dlq_key: bytes, raw_entries: Sequence) -> RequeueResult:
    """Plan each raw XRANGE entry and move them all in one script call."""
    keys: list[bytes] = [dlq_key]
    key_index: dict[bytes, int] = {}
    args: list[Any] = []
    planned: list[tuple[str, bytes]] = []
    failed: list[RequeueFailure] = []
    for raw in raw_entries:
        entry_id = _s(raw[0])
        flat = raw[1] or []
        try:
            target, fields = requeue_plan(dlq_key, entry_id, list(zip(flat[::2], flat[1::2], strict=True)))
        except OpsError as exc:
            failed.append(RequeueFailure(entry_id, exc.message))
            continue
        index = key_index.get(target)
        if index is None:
            keys.append(target)
            index = key_index[target] = len(keys)  # Lua's KEYS is 1-based
        args += (entry_id, index, 2 * len(fields))
        for name, value in fields:
            args += (name, value)
        planned.append((entry_id, target))
    if not planned:
        return RequeueResult(requeued=(), missing=(), failed=tuple(failed))
    replies = _script(client, "requeue")(keys=keys, args=args)
    requeued, missing = [], []
    for (entry_id, target), reply in zip(planned, replies, strict=True):
        if reply is None:
            missing.append(entry_id)
        elif reply.startswith(b"!"):
            failed.append(RequeueFailure(entry_id, f"Redis refused the XADD: {_s(reply[1:])}"))
        else:
            requeued.append(Requeued(dlq_id=entry_id, stream=target, new_id=_s(reply)))
    return RequeueResult(requeued=tuple(requeued), missing=tuple(missing), failed=tuple(failed))


def dlq_delete(conn: str, dlq_key: bytes, *, ids: Sequence[str]) -> int:
    """XDEL the given DLQ entries; returns how many existed."""
    _key(dlq_key, "DLQ key")
    wanted = _ids(ids)
    with translated(conn):
        return int(get_client(conn).execute_command("XDEL", dlq_key, *wanted))


def dlq_purge(conn: str, dlq_key: bytes, *, up_to: str, batch: int = 1000) -> int:
    """Delete every DLQ entry not newer than ``up_to``, ``batch`` per Lua call; returns the count.

    Entries that arrive while purging are newer than ``up_to`` and survive. Each call deletes what it
    reads, so the loop ends after (entries to delete / batch) calls.
    """
    _key(dlq_key, "DLQ key")
    upper = str(parse_position(up_to, what="up_to").highest)
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    client = get_client(conn)
    total = 0
    with translated(conn):
        _require_stream(conn, client.type(dlq_key))
        script = _script(client, "purge")
        while True:
            deleted, _last = script(keys=[dlq_key], args=[upper, batch])
            total += int(deleted)
            if int(deleted) == 0:
                return total


def dlq_entries(
    conn: str,
    dlq_key: bytes,
    *,
    after: str | None = None,
    before: str | None = None,
    count: int = 50,
    error_contains: str | None = None,
    scan_limit: int = 5000,
) -> tuple[list[DlqEntry], str | None]:
    """DLQ entries newest first, between the exclusive bounds ``after`` and ``before``, parsed by convention.

    Returns the page and the cursor to pass as ``before`` for the next (older) page, or None when the
    range is exhausted. With ``error_contains`` only entries whose error text contains it (case
    insensitive) are kept, and at most ``scan_limit`` entries are read per call: the page may then be
    short (even empty) with a cursor to continue the search from.
    """
    _key(dlq_key, "DLQ key")
    count = _positive(count, "count", cap=MAX_IDS)
    scan_limit = _positive(scan_limit, "scan_limit")
    upper = "(" + str(parse_id(before, allow_bare=False, what="before")) if before else "+"
    lower = "(" + str(parse_id(after, allow_bare=False, what="after")) if after else "-"
    needle = error_contains.casefold() if error_contains else None
    client = get_client(conn)
    page: list[DlqEntry] = []
    scanned = 0
    with translated(conn):
        while True:
            step = count + 1 if needle is None else min(max(count, 200), scan_limit - scanned)
            pipe = client.pipeline(transaction=False)
            pipe.type(dlq_key)
            pipe.execute_command("XREVRANGE", dlq_key, upper, lower, "COUNT", step)
            key_type, raw = pipe.execute(raise_on_error=False)
            _require_stream(conn, key_type)
            if isinstance(raw, Exception):
                raise raw
            if needle is None:
                entries = [_parsed(dlq_key, item) for item in raw[:count]]
                return entries, entries[-1].id if len(raw) > count else None
            for item in raw:
                scanned += 1
                entry = _parsed(dlq_key, item)
                if entry.error and needle in entry.error.casefold():
                    page.append(entry)
                    if len(page) == count:
                        return page, entry.id
            if len(raw) < step:
                return page, None
            upper = "(" + _s(raw[-1][0])
            if scanned >= scan_limit:
                return page, _s(raw[-1][0])


def _parsed(dlq_key: bytes, raw: Sequence) -> DlqEntry:
    entry = _entry(raw)
    return parse_dlq_entry(dlq_key, entry.id, entry.fields)


# ---------------------------------------------------------------- replay


def resolve_range(conn: str, key: bytes, start: str, end: str) -> tuple[str, str]:
    """Concrete, inclusive ``(first ID, last ID)`` for a replay of ``key``, fixed at job start.

    ``start``: an ID, a bare millisecond or ISO time (from its first possible ID), or ``-``/``0``.
    ``end``: an ID, a millisecond or time (up to its last possible ID), or ``+``/``$``. The end is
    capped at the stream's last generated ID *now*, so entries published later, including a replay's
    own copies into the same stream, are never inside the range.
    """
    _key(key)
    first = (
        ZERO_ID if (start or "").strip() in ("-", "0") else str(parse_position(start, what="start").lowest)
    )
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.type(key)
        pipe.execute_command("XINFO", "STREAM", key)
        key_type, info = pipe.execute(raise_on_error=False)
        _require_stream(conn, key_type)
        if isinstance(info, Exception):
            raise info
    last_generated = _sid(_s(_pairs(info)["last-generated-id"]) or ZERO_ID)
    if (end or "").strip() in ("+", "$"):
        upper = last_generated
    else:
        upper = parse_position(end, what="end").highest
        if _sid(first) > upper:
            raise InvalidArgument("The range starts after it ends.")
    return first, str(min(upper, last_generated))


def replay_count(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    match: dict[bytes, bytes] | None = None,
    limit: int = 1_000_000,
) -> int:
    """Dry run: how many entries of [start, end] hold every ``field=value`` of ``match``.

    See :func:`replay_count_detail` for the scan bound ``limit`` (the count is a lower bound when hit).
    """
    return replay_count_detail(conn, key, start=start, end=end, match=match, limit=limit).matched


def replay_count_detail(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    match: dict[bytes, bytes] | None = None,
    limit: int = 1_000_000,
) -> ReplayCount:
    """The dry run with its scan figures. Counts inside Redis, 2,000 entries per call, reading at
    most ``limit`` entries; never XLEN (a sub-range) nor an unbounded XRANGE."""
    limit = _positive(limit, "limit")
    pairs = _match_args(match)
    first, last = resolve_range(conn, key, start, end)
    client = get_client(conn)
    matched = scanned = 0
    cursor = first
    with translated(conn):
        script = _script(client, "count_range")
        while scanned < limit:
            step = min(COUNT_BATCH, limit - scanned)
            read, hits, last_read = script(keys=[key], args=[cursor, last, step, *pairs])
            scanned += int(read)
            matched += int(hits)
            if int(read) < step or not last_read:
                return ReplayCount(matched=matched, scanned=scanned, complete=True)
            cursor = "(" + _s(last_read)
    return ReplayCount(matched=matched, scanned=scanned, complete=False)


def replay_range(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    target: bytes,
    match: dict[bytes, bytes] | None = None,
    after: str | None = None,
    batch: int = 500,
    job_key: bytes | None = None,
    cursor_ttl_ms: int = REPLAY_CURSOR_TTL_MS,
) -> ReplayBatch:
    """Copy one batch of matching entries of [start, end] to ``target``, after ``after``.

    ``start`` and ``end`` must be concrete IDs from :func:`resolve_range`, fixed when the job started:
    re-resolving "+" per batch would chase the copies when ``target`` is ``key``.

    With ``job_key`` the copies and the cursor (stored under ``job_key`` in the monitored Redis, with
    a TTL) move in one script, and each batch starts after the further of that cursor and ``after``:
    a job killed between the script and saving its own progress resumes without copying anything
    twice. Without ``job_key`` only ``after`` is known and a crash can repeat one batch.
    """
    _key(key)
    _key(target, "target stream")
    first = str(parse_id(start, allow_bare=False, what="start"))
    last = str(parse_id(end, allow_bare=False, what="end"))
    cursor = str(parse_id(after, allow_bare=False, what="after")) if after else ""
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    _positive(cursor_ttl_ms, "cursor_ttl_ms")
    pairs = _match_args(match)
    keys = [key, target]
    if job_key is not None:
        keys.append(_key(job_key, "job key"))
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.type(key)
        pipe.type(target)
        key_type, target_type = pipe.execute()
        _require_stream(conn, key_type)
        if target_type not in (b"none", b"stream"):
            raise InvalidArgument("The replay target holds another type, not a stream.", conn=conn)
        copied, scanned, reached, done = _script(client, "replay")(
            keys=keys, args=[first, cursor, last, batch, cursor_ttl_ms, *pairs]
        )
    return ReplayBatch(copied=int(copied), scanned=int(scanned), cursor=None if done else _s(reached))


def replay_cursor(conn: str, job_key: bytes) -> str | None:
    """The Redis-side cursor of a replay job: the last source ID it handled, or None if it never ran
    (or its cursor expired)."""
    _key(job_key, "job key")
    with translated(conn):
        return _s(get_client(conn).get(job_key))


__all__ = [
    "ClaimResult",
    "ReplayBatch",
    "ReplayCount",
    "RequeueBatch",
    "RequeueFailure",
    "RequeueResult",
    "Requeued",
    "RewindPlan",
    "ack",
    "autoclaim",
    "claim",
    "dlq_delete",
    "dlq_entries",
    "dlq_purge",
    "replay_count",
    "replay_count_detail",
    "replay_cursor",
    "replay_range",
    "requeue",
    "requeue_range",
    "resolve_range",
    "rewind",
    "rewind_preview",
]
