"""Where one event has been: the reads of a journey, bounded, from whatever the operator has.

**Start.** An entry ID with its stream, the bus's event ``id``, a correlation id, or a search query
(plain text or CEL, :mod:`eventbus.search`) with the streams to look in. An entry ID is read at once.
An event id carries no time (a uuid4): the stream's metric events (``{S}:metrics``, capped, so bounded
whatever the stream's length) name every entry of it that failed, which finds it at once when it ever
failed; otherwise, and for a correlation id or a query, the streams are scanned newest first within the
budget, and the answer says where to continue (``next``), as search does.

**The event.** What ties entries together: the event ``id`` field (kept by retries, dead letters and
requeues), the bus's ``_first_id``/``_failed_id`` (each retry names the first publish and the attempt that
failed), ``_requeued_from`` (a requeued copy names its dead letter) and ``_replayed_from``. An event
without an ``id`` (another bus: the seed ``streams`` module, OmniDaemon) is followed by its entry IDs,
the dead letters that name them, and its payload: the fields without the bookkeeping a retry, a
requeue or a dead letter adds (two events with the very same payload are then one), or OmniDaemon's
task id in it (:func:`_signature`).

**The reads, each bounded and independent of the stream's length.** The entries named by ID (one
pipelined XRANGE id id each); the metric events from the first publish on (the stream is capped at
~10,000 entries by the workers); ``ZSCAN MATCH`` of the retry set (Redis filters, only the event's
members travel); each dead-letter queue of the stream in every convention (``{S}:dlq`` in both namings,
``omni-dlq:{group}`` per group, configured patterns whose key follows from the stream) from the first
publish on, up to where the metric events say the last dead-lettering happened; XINFO GROUPS and one
XPENDING id id per group and entry. One read is bounded only by the budget: a copy the metric events
do not name (the retry that succeeded, the requeued copy, a foreign bus's retries) is looked for
forward from the moment it can have been made, stopping as soon as it is found; a caller that records
its requeues first probes the copies its records name (:data:`Probe`), so such a requeue is found by ID.

**Replays.** A replayed copy names its original (``_replayed_from``) but not the original's stream, and
nothing in the original names the copy: only whoever replayed it knows where it went. A caller that
records its replays (an audit log) knows, and hands the journey two more hooks: where the copies of the event's entries are
(:data:`ReplayProbe`: a window of IDs in each target stream, read within the budget, a batch's copies
being contiguous) and, for a journey started from a copy, which streams it may have been replayed from
(:data:`SourceProbe`): the journey is then the original's, with the copy on it. ``python -m eventbus``,
which has no audit log, finds a replay into the same stream (its copy names an ID of that stream) and,
from a copy found by an event id or a query over several streams, its original in the other streams named
with ``--stream``; a copy in another stream it finds only when it scans that stream for the event.

Written here rather than taken from a library: it is a bounded walk over the bus's own keys and field
names, which nothing off the shelf knows; it is Django-free so that ``python -m eventbus journey``
(Redis only) and any program following events run this one copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack

from .. import keys as bus_keys
from ..conventions import OMNI_DLQ_PREFIX, DlqPattern, detect_dlq, dlq_candidates, parse_dlq_entry
from ..text import id_ms, id_order
from .reader import Fields, Reader, Shown

ENTRY_ID = re.compile(r"[0-9]{1,20}-[0-9]{1,20}")
EVENT_ID = re.compile(r"[0-9a-f]{32}")
BY = ("entry", "event", "correlation", "search")

#: Entries one journey reads at most, and its time budget.
BUDGET = 50_000
BUDGET_MS = 3_000
#: Shares of it: the metric events (twice their ~10,000 cap), each DLQ, the follow-up for unnamed copies.
METRICS_READ = 20_000
DLQ_READ = 10_000
FOLLOW_READ = 10_000
#: ZSCAN calls of a retry set (1,000 members each), and how many other events a scan lists.
RETRY_ROUNDS = 200
OTHERS = 20
#: How far after the last dead-lettering its DLQ entry may sit (a slow script, clocks of two hosts).
AFTER_MS = 60_000

#: Fields a retry, a dead letter or a requeue adds: left out of a foreign event's payload signature.
BOOKKEEPING = frozenset({b"_retries", b"_group", b"_first_id", b"_failed_id", b"_failed_at", b"_requeued_from",
                         b"_replayed_from"})  # fmt: skip

Probe = Callable[[bytes, Sequence[bytes], int], Sequence[tuple[bytes, str]]]
"""``(stream, dlq keys, since ms) -> [(key, entry ID)]``: entries someone else knows were made from this
event's keys (the copies a caller's records name), looked up by ID before anything is scanned."""

ReplayProbe = Callable[[bytes, Sequence[str], int], Sequence[tuple[bytes, str, str]]]
"""``(stream, the event's entry IDs there, since ms) -> [(target stream, low ID, high ID)]``: where replayed
copies of those entries are (a caller's records of its replays), each window read within the budget."""

SourceProbe = Callable[[bytes, str], Sequence[bytes]]
"""``(stream, entry ID of a replayed copy) -> [stream]``: the streams it may have been replayed from."""


class JourneyError(ValueError):
    """A start that names no journey (a bad ID, no stream to look in): the caller's mistake."""


@dataclass(frozen=True, slots=True)
class Start:
    by: str
    value: str
    streams: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if self.by not in BY:
            raise JourneyError(f"Start from one of {', '.join(BY)}, not {self.by!r}.")
        if not self.value:
            raise JourneyError("Give what to start from: an entry ID, an event id, a correlation id or a query.")
        if not self.streams:
            raise JourneyError("Name the stream to look in.")
        if self.by == "entry" and (len(self.streams) != 1 or not ENTRY_ID.fullmatch(self.value)):
            raise JourneyError("An entry ID (<ms>-<seq>) is read from exactly one stream: name it.")


def start_of(value: str, streams: Sequence[bytes], by: str = "auto") -> Start:
    """``by="auto"``: an entry ID's shape is an entry, 32 hex digits an event id, anything else a query."""
    value = value.strip()
    if by == "auto":
        by = "entry" if ENTRY_ID.fullmatch(value) else "event" if EVENT_ID.fullmatch(value) else "search"
    return Start(by=by, value=value, streams=tuple(streams))


@dataclass(frozen=True, slots=True)
class Metric:
    """A per-event metric event of a handler (:mod:`eventbus.metrics`)."""

    kind: str
    group: str
    entry_id: str
    error: str | None
    duration_ms: float | None
    consumer: str
    ms: int


@dataclass(frozen=True, slots=True)
class Waiting:
    """A retry waiting in ``{S}:retry`` (:mod:`eventbus.retry`)."""

    due_ms: int
    attempt: int | None
    group: str | None
    failed_id: str | None
    failed_at_ms: int | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    key: bytes
    id: str
    convention: str
    group: str | None
    error: str | None
    retries: int | None
    failed_at_ms: int | None
    original_id: str | None
    present: bool = True  # False: known only from a requeued copy's ``_requeued_from`` (requeued or deleted)


@dataclass(frozen=True, slots=True)
class Replayed:
    """A replayed copy of one of the event's entries in another stream (one in its own stream is an entry)."""

    key: bytes
    id: str
    source_id: str
    fields: Fields


@dataclass(frozen=True, slots=True)
class Delivery:
    """One group and one entry of the event: ``state`` is pending, acked, skipped or not_delivered."""

    entry_id: str
    group: str
    state: str
    certain: bool = True  # acked: False when nothing shows it was delivered (Redis keeps no acked IDs)
    consumer: str | None = None
    idle_ms: int | None = None
    deliveries: int | None = None
    aimed_at: str | None = None


@dataclass
class Trace:
    start: Start
    stream: bytes | None = None
    event_id: str | None = None
    first_id: str | None = None
    entries: dict[str, Fields] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)
    waiting: list[Waiting] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    replays: list[Replayed] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    bus_metrics: bool = False  # the stream has the bus's metric events: its workers are ours
    others: list[tuple[bytes, str]] = field(default_factory=list)  # other events a scan matched: (stream, entry)
    next: str | None = None  # where a start's scan continues: "<stream index>:<entry ID>"
    complete: bool = True
    too_costly: int = 0
    notes: list[str] = field(default_factory=list)
    now_ms: int = 0
    reader: Reader | None = None

    @property
    def found_any(self) -> bool:
        return bool(self.entries)


def _get(fields: Fields, name: bytes) -> bytes | None:
    for field_name, value in fields:  # a loop, not next(genexpr): this runs for every entry read
        if field_name == name:
            return value
    return None


def _text(value: bytes | None) -> str | None:
    return value.decode("utf-8", "replace") if value else None


def _ms(entry_id: str) -> int:
    return id_ms(entry_id) or 0


def _signature(fields: Fields) -> tuple[tuple[bytes, bytes], ...]:
    """What identifies an event without an ``id`` field: its payload without the bookkeeping, or, for an
    OmniDaemon message, the task id in its ``data`` document (OmniDaemon counts ``delivery_attempts`` in
    the copy of the message its dead letter keeps, so a requeued copy is not the same bytes)."""
    data = _get(fields, b"data")
    if data is not None and b'"task_id"' in data and (task := _omni_task(data)) is not None:
        return ((b"task_id", task),)
    return tuple((n, v) for n, v in fields if n not in BOOKKEEPING and not n.startswith(b"dlq_"))


def _omni_task(data: bytes) -> bytes | None:
    """The topic and task id of an OmniDaemon message's ``data`` (its publish writes both), else None."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not (isinstance(doc, dict) and isinstance(doc.get("task_id"), str) and isinstance(doc.get("topic"), str)):
        return None
    return f"{doc['topic']}\n{doc['task_id']}".encode()


class _Entry:
    """What a search query reads of an entry (:class:`eventbus.search.SearchEntry`)."""

    __slots__ = ("fields", "id")

    def __init__(self, entry_id: str, fields: Fields) -> None:
        self.id, self.fields = entry_id, tuple(fields)


def trace(
    client: Any,
    start: Start,
    *,
    patterns: Sequence[DlqPattern] = (),
    shown: Shown | None = None,
    query: Any = None,
    cursor: str | None = None,
    budget: int = BUDGET,
    budget_ms: int = BUDGET_MS,
    probe: Probe | None = None,
    replays: ReplayProbe | None = None,
    sources: SourceProbe | None = None,
) -> Trace:
    """The reads of one journey (module docstring). ``query`` is the compiled query of a ``search``
    start (:func:`eventbus.search.compile_query`, or a caller's wrapper of it); ``cursor`` a previous ``next``."""
    reader = Reader(client, budget=budget, deadline_ms=budget_ms, shown=shown)
    out = Trace(start=start, reader=reader)
    kinds = reader.sizes(start.streams)
    for key in start.streams:
        if kinds[key] != "stream":
            raise JourneyError(f"{key.decode('utf-8', 'replace')!r} is " + ("not there." if kinds[key] == "none"
                               else f"a {kinds[key]}, not a stream."))  # fmt: skip
    if start.by == "entry":
        seeds = reader.lookup(start.streams[0], [start.value])
        if not seeds:
            out.notes.append(f"No entry {start.value} in this stream (never added, deleted or trimmed away).")
            return _finish(out)
        key = start.streams[0]
        if detect_dlq(key, patterns) is not None:  # a dead letter: the journey of its event, in its stream
            origin, seeds = _from_dead_letter(reader, out, key, start.value, seeds[start.value], patterns)
            if origin is None:
                return _finish(out)
            key = origin
        out.stream = key
        out.entries.update(seeds)
        out.event_id = next((_text(_get(f, b"id")) for f in seeds.values() if _get(f, b"id")), None)
    else:
        # the scan for the start leaves a part of the budget, and a third of the time, to follow what it finds
        reader.deadline_ms = budget_ms * 2 // 3
        found = _seek(reader, out, start, query, cursor, patterns, limit=max(1, budget - FOLLOW_READ))
        reader.deadline_ms = budget_ms
        if not found:
            return _finish(out)
    _to_original(reader, out, sources)
    _follow(reader, out, patterns, probe, replays)
    return _finish(out)


def _to_original(reader: Reader, out: Trace, sources: SourceProbe | None) -> None:
    """A start on a replayed copy whose original is in another stream: the journey becomes the original's,
    with the copy on it (module docstring). The other streams to look in: those the start names, then the
    ones ``sources`` says the copy may have come from."""
    assert out.stream is not None
    copies = {i: _get(f, b"_replayed_from") for i, f in out.entries.items()}
    wanted = {v.decode() for v in copies.values() if v and ENTRY_ID.fullmatch(v.decode("ascii", "replace"))}
    if not wanted or reader.lookup(out.stream, sorted(wanted)):
        return  # not a copy, or its original is in its own stream: followed as any entry it names
    candidates = [s for s in out.start.streams if s != out.stream]
    if sources is not None:
        for copy_id in copies:
            candidates += [s for s in sources(out.stream, copy_id) if s not in candidates and s != out.stream]
    kinds = reader.sizes(candidates) if candidates else {}
    for key in candidates:
        found = reader.lookup(key, sorted(wanted)) if kinds.get(key) == "stream" else {}
        if found:
            out.replays += [Replayed(out.stream, i, v.decode(), out.entries[i]) for i, v in copies.items()
                            if v and v.decode() in found]  # fmt: skip
            out.stream, out.entries = key, dict(found)
            out.event_id = next((_text(_get(f, b"id")) for f in found.values() if _get(f, b"id")), None)
            return
    out.notes.append("This entry is a replayed copy of " + ", ".join(sorted(wanted)) + ", which is in none of the "
                     "streams looked in: name the stream it was replayed from.")  # fmt: skip


def _from_dead_letter(
    reader: Reader, out: Trace, key: bytes, entry_id: str, fields: Fields, patterns: Sequence[DlqPattern]
) -> tuple[bytes | None, dict[str, Fields]]:
    """The stream a dead letter came from and its event's entries there: by the IDs the dead letter names
    (the first publish, the last attempt), else (a convention that names none) the newest entry with its
    id or its payload, read back within the budget."""
    parsed = parse_dlq_entry(key, entry_id, fields, patterns)
    origin = parsed.original_stream
    if not origin or reader.sizes([origin])[origin] != "stream":
        out.notes.append(f"Dead letter {entry_id} does not say which stream it came from, or that stream is gone.")
        return None, {}
    ids = [i for i in (parsed.first_id, parsed.original_id) if i and ENTRY_ID.fullmatch(i)]
    found = reader.lookup(origin, ids) if ids else {}
    if not found:
        event = _get(parsed.payload_fields, b"id")
        signature = _signature(parsed.payload_fields)
        hits: list[tuple[str, Fields]] = []

        def keep(found_id: str, f: Fields) -> bool:
            if (_get(f, b"id") == event) if event else _signature(f) == signature:
                hits.append((found_id, f))
            return False

        reader.scan(origin, forward=False, limit=max(0, reader.left() - FOLLOW_READ), keep=keep,
                    done=lambda: bool(hits))  # fmt: skip
        found = dict(hits[:1])
    if not found:
        out.notes.append(f"The entries of dead letter {entry_id}'s event are no longer in its stream.")
        return None, {}
    return origin, found


def _finish(out: Trace) -> Trace:
    assert out.reader is not None
    out.now_ms = out.reader.server_ms()
    return out


# ----------------------------------------------------------------------------------------- finding it


def _seek(
    reader: Reader, out: Trace, start: Start, query: Any, cursor: str | None, patterns: Sequence[DlqPattern],
    *, limit: int,
) -> bool:
    """Find the event's entries for an event id, a correlation id or a query; False when none was."""
    value = start.value.encode()
    if start.by == "event":
        for key in start.streams:
            ids = _event_in_metrics(reader, key, value)
            hits = reader.lookup(key, ids) if ids else {}
            if hits:
                out.stream, out.event_id = key, start.value
                out.entries.update(hits)
                return True

    def keep(key: bytes) -> Callable[[str, Fields], bool]:
        if start.by == "event":
            return lambda _i, f: _get(f, b"id") == value
        if start.by == "correlation":
            return lambda _i, f: _get(f, b"correlation_id") == value
        dlq = detect_dlq(key, patterns) is not None
        return lambda i, f: bool(query.matches(_Entry(i, f), dlq=dlq, key=key))

    first_stream, high = 0, "+"
    if cursor:
        place, _, after = cursor.partition(":")
        if not place.isdigit() or int(place) >= len(start.streams) or not ENTRY_ID.fullmatch(after):
            raise JourneyError("cursor must be the 'next' of an earlier answer.")
        first_stream, high = int(place), "(" + after
    identity: object = None
    for index in range(first_stream, len(start.streams)):
        key = start.streams[index]
        test = keep(key)
        def wanted(
            entry_id: str, fields: Fields, key: bytes = key, test: Callable[[str, Fields], bool] = test
        ) -> bool:
            nonlocal identity
            if not test(entry_id, fields):
                return False
            # an event without an id (another bus) is its payload: its retries and requeues repeat it
            mine = _get(fields, b"id") or _get(fields, b"_first_id") or _signature(fields)
            if identity is None:
                identity = mine
                out.stream = key
            if mine == identity and key == out.stream:
                return True
            if len(out.others) < OTHERS and all(o[0] != key or o[1] != entry_id for o in out.others):
                out.others.append((key, entry_id))
            return False

        found, last, complete = reader.scan(
            key, high=high if index == first_stream else "+", forward=False, limit=max(0, limit - reader.entries),
            keep=wanted,
            done=lambda: start.by == "event" and identity is not None,
        )
        out.entries.update(found)
        if query is not None:
            out.too_costly = getattr(query, "too_costly", 0)
        if not complete:
            out.complete = False
            out.next = f"{index}:{last}" if last else cursor
            break
        if start.by == "event" and identity is not None:
            break
    if not out.entries:
        what = {"event": "event id", "correlation": "correlation id", "search": "query"}[start.by]
        out.notes.append(f"No entry matched the {what} in what was read" + ("." if out.complete else
                         "; continue to read further back."))  # fmt: skip
        return False
    out.event_id = _text(_get(next(iter(out.entries.values())), b"id"))
    return True


def _event_in_metrics(reader: Reader, stream: bytes, event_id: bytes) -> list[str]:
    """Entry IDs of an event id that failed somewhere, from the newest metric events (bounded by their cap)."""
    key = bus_keys.metrics_key(stream)
    if reader.sizes([key])[key] != "stream":
        return []
    kept: list[Fields] = []

    def keep(_entry_id: str, fields: Fields) -> bool:
        if _get(fields, b"event_id") == event_id:
            kept.append(fields)
        return False

    # from the newest down to the event's newest metric event: the entry it names leads to the others
    reader.scan(key, forward=False, limit=min(METRICS_READ, reader.left()), keep=keep, done=lambda: bool(kept))
    return [i.decode() for i in dict.fromkeys(_get(f, b"entry_id") or b"" for f in kept) if ENTRY_ID.fullmatch(i.decode())]


# ----------------------------------------------------------------------------------------- following it


class _Ties:
    """What makes an entry this event's (module docstring), growing as entries are found."""

    def __init__(self, out: Trace) -> None:
        self.out = out
        self.event = out.event_id.encode() if out.event_id else None
        self.ids: set[bytes] = set()
        self.dead: set[bytes] = set()
        self.signatures: set[tuple[tuple[bytes, bytes], ...]] = set()
        for entry_id, fields in out.entries.items():
            self.add(entry_id, fields)

    def add(self, entry_id: str, fields: Fields) -> list[str]:
        """Record an entry of the event; returns the IDs it names that are not known yet."""
        self.ids.add(entry_id.encode())
        if self.event is None:
            self.signatures.add(_signature(fields))
        named = []
        for name in (b"_first_id", b"_failed_id", b"_replayed_from"):
            value = _get(fields, name)
            if value and ENTRY_ID.fullmatch(value.decode("ascii", "replace")):
                named.append(value.decode())
                self.ids.add(value)
        requeued = _get(fields, b"_requeued_from")
        if requeued:
            self.dead.add(requeued)
        return [i for i in named if i not in self.out.entries]

    def holds(self, entry_id: str, fields: Fields) -> bool:
        if entry_id.encode() in self.ids:
            return True
        if self.event is not None and _get(fields, b"id") == self.event:
            return True
        for name, known in ((b"_first_id", self.ids), (b"_failed_id", self.ids), (b"_replayed_from", self.ids),
                            (b"_requeued_from", self.dead)):  # fmt: skip
            value = _get(fields, name)
            if value and value in known:
                return True
        return self.event is None and _get(fields, b"id") is None and _signature(fields) in self.signatures


def _follow(
    reader: Reader, out: Trace, patterns: Sequence[DlqPattern], probe: Probe | None, replays: ReplayProbe | None
) -> None:
    stream = out.stream
    assert stream is not None
    ties = _Ties(out)
    _named(reader, out, ties)
    first_ms = min(_ms(i) for i in out.entries)
    out.first_id = min(out.entries, key=id_order)
    groups = reader.groups(stream)
    out.groups = [_name(g.get("name")) for g in groups]
    metrics_key = bus_keys.metrics_key(stream)
    retry_key = bus_keys.in_slot_of(stream, bus_keys.RETRY_SUFFIX.encode())
    dlqs = list(dlq_candidates(stream, [_raw(g.get("name")) for g in groups]))
    dlqs += [k for k in _configured(stream, patterns) if k not in dlqs]
    kinds = reader.sizes([metrics_key, retry_key, *dlqs])
    out.bus_metrics = kinds[metrics_key] == "stream"
    if out.bus_metrics:
        _metrics(reader, out, ties, metrics_key, first_ms)
    if kinds[retry_key] == "zset":
        _retries(reader, out, ties, retry_key)
    present = [k for k in dlqs if kinds[k] == "stream"]
    for key in present:
        _dead_letters(reader, out, ties, key, first_ms, patterns)
    if probe is not None:
        for key, entry_id in probe(stream, present, first_ms):
            if key == stream and entry_id not in out.entries and ENTRY_ID.fullmatch(entry_id):
                for found_id, fields in reader.lookup(stream, [entry_id]).items():
                    if ties.holds(found_id, fields):
                        out.entries[found_id] = fields
                        ties.add(found_id, fields)
    if replays is not None:
        _replayed(reader, out, ties, replays(stream, sorted(out.entries), first_ms))
    _copies(reader, out, ties, first_ms)
    _named(reader, out, ties)
    _gone_dead_letters(out, ties)
    _deliveries(reader, out, groups)


def _name(raw: Any) -> str:
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _raw(raw: Any) -> bytes:
    return raw if isinstance(raw, bytes) else str(raw).encode()


def _configured(stream: bytes, patterns: Sequence[DlqPattern]) -> list[bytes]:
    """DLQ keys of configured conventions that follow from the stream's name (a ``field:`` target or a
    ``fixed:`` one names no key: their DLQs are not looked in, and the notes say so)."""
    out = []
    for pattern in patterns:
        kind, arg = pattern.target_kind, pattern.target_arg
        candidate = stream + arg if kind == "strip_suffix" else arg + stream if kind == "strip_prefix" else None
        if candidate is not None and pattern.matches(candidate):
            out.append(candidate)
    return out


def _named(reader: Reader, out: Trace, ties: _Ties) -> None:
    """Look up, by ID, the entries the known ones name (first publish, failed attempts), until none is new."""
    assert out.stream is not None
    wanted = [i.decode() for i in ties.ids if i.decode() not in out.entries]
    for _ in range(4):
        if not wanted:
            return
        found = reader.lookup(out.stream, wanted)
        wanted = []
        for entry_id, fields in found.items():
            out.entries[entry_id] = fields
            wanted += ties.add(entry_id, fields)


def _metrics(reader: Reader, out: Trace, ties: _Ties, key: bytes, first_ms: int) -> None:
    """The event's per-event metric events, from its first publish on."""
    stream_name = out.stream

    wanted = ties.ids if ties.event is None else ties.ids | {ties.event}  # the scan adds no ID to ties

    def keep(_entry_id: str, fields: Fields) -> bool:
        # one pass over the values first: nearly every metric event is another event's
        for _name, value in fields:
            if value in wanted:
                break
        else:
            return False
        if ties.event is not None and _get(fields, b"event_id") == ties.event:
            return True
        return (_get(fields, b"entry_id") or b"-") in ties.ids and _get(fields, b"stream") in (None, stream_name)

    kept, _, complete = reader.scan(key, low=str(max(0, first_ms - 1000)), limit=min(METRICS_READ, reader.left()),
                                    keep=keep)  # fmt: skip
    if not complete:
        out.complete = False
        out.notes.append("The metric events were not read to their end (budget).")
    for entry_id, fields in kept:
        failed_entry = (_get(fields, b"entry_id") or b"").decode("ascii", "replace")
        duration = _get(fields, b"duration_ms")
        ts = _get(fields, b"ts")
        out.metrics.append(Metric(
            kind=_text(_get(fields, b"event")) or "", group=_text(_get(fields, b"group")) or "",
            entry_id=failed_entry, error=_text(_get(fields, b"error")),
            duration_ms=float(duration) if duration else None, consumer=_text(_get(fields, b"consumer")) or "",
            ms=int(ts) if ts and ts.isdigit() else _ms(entry_id),
        ))  # fmt: skip
        if ENTRY_ID.fullmatch(failed_entry):
            ties.ids.add(failed_entry.encode())
    _named(reader, out, ties)


def _retries(reader: Reader, out: Trace, ties: _Ties, key: bytes) -> None:
    """The event's retries waiting in the retry set: Redis filters the members (ZSCAN MATCH)."""
    needle = ties.event or (out.first_id or "").encode()
    members, complete = reader.zscan(key, b"*" + _glob_escape(needle) + b"*", rounds=RETRY_ROUNDS)
    if not complete:
        out.complete = False
        out.notes.append(f"The retry set was scanned {RETRY_ROUNDS} times without reaching its end.")
    for member, due in members:
        try:
            flat = msgpack.unpackb(member, raw=True)
        except (ValueError, msgpack.UnpackException):
            continue
        if not isinstance(flat, list):
            continue
        fields = [(bytes(flat[i]), bytes(flat[i + 1])) for i in range(0, len(flat) - 1, 2)]
        if reader.shown is not None:
            fields = reader.shown(out.stream or b"", f"{due}-0", fields)
        if not ties.holds("0-0", fields):
            continue
        attempt = _get(fields, b"_retries")
        failed_at = _get(fields, b"_failed_at")
        out.waiting.append(Waiting(
            due_ms=due, attempt=int(attempt) if attempt and attempt.isdigit() else None,
            group=_text(_get(fields, b"_group")), failed_id=_text(_get(fields, b"_failed_id")),
            failed_at_ms=int(failed_at) if failed_at and failed_at.isdigit() else None,
        ))  # fmt: skip


def _glob_escape(value: bytes) -> bytes:
    return re.sub(rb"([*?\[\]\\])", rb"\\\1", value)


def _dead_letters(
    reader: Reader, out: Trace, ties: _Ties, key: bytes, first_ms: int, patterns: Sequence[DlqPattern]
) -> None:
    """The event's dead letters in one DLQ, read from its first publish up to where the metric events say
    the last dead-lettering happened (to its end when they do not say)."""
    lettered = [m.ms for m in out.metrics if m.kind == "dead_lettered"]
    high = str(max(lettered) + AFTER_MS) if lettered else "+"
    wanted = sum(1 for m in out.metrics if m.kind == "dead_lettered")

    wanted_values = ties.ids | ({ties.event} if ties.event else set())
    parse_all = ties.event is None and key.startswith(OMNI_DLQ_PREFIX)  # its JSON document names the entry

    def keep(entry_id: str, fields: Fields) -> bool:
        # a quick look first: a dead letter of this event holds its id or one of its entry IDs as a value
        # (or, for an event without an id, its payload); only those are parsed by their convention
        if not parse_all and not any(value in wanted_values for _name, value in fields) and (
            ties.event is not None or _signature(fields) not in ties.signatures
        ):
            return False
        parsed = parse_dlq_entry(key, entry_id, fields, patterns)
        named = {i for i in (parsed.original_id, parsed.first_id) if i is not None}
        if any(i.encode() in ties.ids for i in named) or ties.holds("0-0", parsed.payload_fields or fields):
            out.dead.append(DeadLetter(
                key=key, id=entry_id, convention=parsed.convention, group=parsed.group, error=parsed.error,
                retries=parsed.retries, failed_at_ms=parsed.failed_at_ms, original_id=parsed.original_id,
            ))  # fmt: skip
            ties.dead.add(entry_id.encode())
            return True
        return False

    found_before = len(out.dead)
    _, _, complete = reader.scan(
        key, low=str(first_ms), high=high, limit=min(DLQ_READ, reader.left()), keep=keep,
        done=lambda: bool(wanted) and len(out.dead) - found_before >= wanted, first_page=50,
    )  # fmt: skip
    if not complete:
        out.complete = False
        out.notes.append(f"{key.decode('utf-8', 'replace')} was not read to the end of the event's window (budget).")


def _copies(reader: Reader, out: Trace, ties: _Ties, first_ms: int) -> None:
    """Copies nothing names by ID: the retry that ran last (no failure names it), the requeued copy of a
    dead letter no longer in its DLQ, a foreign bus's retries. Read forward from the earliest moment one
    can have been made, stopping once every one expected is found."""
    assert out.stream is not None

    def open_leads() -> list[int]:
        leads = []
        for m in out.metrics:
            if m.kind == "retried":
                made = any(_get(f, b"_failed_id") == m.entry_id.encode() for f in out.entries.values())
                if not made and not any(w.failed_id == m.entry_id for w in out.waiting):
                    leads.append(m.ms)
            elif m.kind == "dead_lettered":
                still = any(d.original_id == m.entry_id and d.present for d in out.dead)
                copied = any(_ms(source.decode()) >= m.ms - 1000
                             for f in out.entries.values() if (source := _get(f, b"_requeued_from")))  # fmt: skip
                if not still and not copied:
                    leads.append(m.ms)
        if not out.bus_metrics:  # another bus: its retries and requeues are named by nothing
            leads.append(first_ms)
        return leads

    leads = open_leads()
    if not leads:
        return
    low = str(min(leads))
    done = (lambda: not open_leads()) if out.bus_metrics else (lambda: False)

    def keep(entry_id: str, fields: Fields) -> bool:
        if entry_id in out.entries or not ties.holds(entry_id, fields):
            return False
        out.entries[entry_id] = fields
        ties.add(entry_id, fields)
        return True

    _, _, complete = reader.scan(out.stream, low=low, limit=min(FOLLOW_READ, reader.left()), keep=keep, done=done)
    if not complete:
        out.complete = False
        out.notes.append(
            "Stopped looking for copies not named by ID (a last retry, a requeued copy) after "
            f"{min(FOLLOW_READ, reader.budget)} entries of the stream from {low}."
        )


def _replayed(reader: Reader, out: Trace, ties: _Ties, windows: Sequence[tuple[bytes, str, str]]) -> None:
    """The replayed copies of the event's entries in the windows a caller's records name: a copy names
    its original (``_replayed_from``); one in the event's own stream is one of its entries."""
    assert out.stream is not None
    windows = list(dict.fromkeys(windows))
    kinds = reader.sizes([w[0] for w in windows]) if windows else {}
    known = {(r.key, r.id) for r in out.replays}
    for key, low, high in windows:
        if kinds.get(key) != "stream" or not (ENTRY_ID.fullmatch(low) and ENTRY_ID.fullmatch(high)):
            continue
        originals = {i.encode() for i in out.entries}

        def keep(entry_id: str, fields: Fields, key: bytes = key, originals: set[bytes] = originals) -> bool:
            source = _get(fields, b"_replayed_from")
            return source in originals and (ties.event is None or _get(fields, b"id") in (None, ties.event))

        found, _, complete = reader.scan(key, low=low, high=high, limit=min(FOLLOW_READ, reader.left()), keep=keep)
        for entry_id, fields in found:
            if key == out.stream:
                if entry_id not in out.entries:
                    out.entries[entry_id] = fields
                    ties.add(entry_id, fields)
            elif (key, entry_id) not in known:
                known.add((key, entry_id))
                out.replays.append(Replayed(key, entry_id, (_get(fields, b"_replayed_from") or b"").decode(), fields))
        if not complete:
            out.complete = False
            out.notes.append(f"Stopped looking for replayed copies in {key.decode('utf-8', 'replace')} (budget).")


def _gone_dead_letters(out: Trace, ties: _Ties) -> None:
    """Dead letters known only from a requeued copy: no longer in their DLQ (requeued, or deleted after)."""
    present = {d.id for d in out.dead}
    for fields in out.entries.values():
        source = _get(fields, b"_requeued_from")
        if source and source.decode() not in present and ENTRY_ID.fullmatch(source.decode("ascii", "replace")):
            present.add(source.decode())
            out.dead.append(DeadLetter(
                key=b"", id=source.decode(), convention="", group=None, error=None, retries=None,
                failed_at_ms=_ms(source.decode()), original_id=None, present=False,
            ))  # fmt: skip


def _deliveries(reader: Reader, out: Trace, groups: list[dict[str, Any]]) -> None:
    """Each group and each entry of the event: pending (XPENDING id id), not delivered yet (after the
    group's last-delivered-id), or not pending any more (acknowledged, or skipped by the group)."""
    assert out.stream is not None
    ids = sorted(out.entries, key=id_order)
    pairs_ = [(_raw(g.get("name")), i) for g in groups for i in ids]
    pending = reader.pending(out.stream, pairs_)
    failed = {(m.group, m.entry_id) for m in out.metrics}
    for (group, entry_id), held in zip(pairs_, pending, strict=True):
        info = next(g for g in groups if _raw(g.get("name")) == group)
        name = _name(group)
        last = _name(info.get("last-delivered-id") or "0-0")
        aimed = _text(_get(out.entries[entry_id], b"_group"))
        key = id_order(entry_id)
        if held is not None:
            out.deliveries.append(Delivery(entry_id, name, "pending", consumer=_name(held[0]), idle_ms=held[1],
                                           deliveries=held[2], aimed_at=aimed))  # fmt: skip
        elif key > id_order(last):
            out.deliveries.append(Delivery(entry_id, name, "not_delivered", aimed_at=aimed))
        elif aimed is not None and aimed != name:
            out.deliveries.append(Delivery(entry_id, name, "skipped", certain=False, aimed_at=aimed))
        else:
            out.deliveries.append(Delivery(entry_id, name, "acked", certain=(name, entry_id) in failed,
                                           aimed_at=aimed))  # fmt: skip
