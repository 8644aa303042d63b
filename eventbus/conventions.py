"""Dead-letter queue conventions: which keys are DLQs, what their entries mean, where a requeue goes.

A program that reads DLQs (the bus's command line, ``python -m eventbus dlq``/``requeue``, or one that
monitors the bus) must be useful on buses the bus did not write: this is the one Django-free copy of what
their DLQs look like. It knows three layouts natively and lets the operator describe more as configured
conventions (:func:`parse_dlq_patterns`: the command line reads them from ``$EVENTBUS_DLQ_PATTERNS`` or
``--dlq-patterns``, a program embedding the bus from its own setting), passed to each function as ``patterns``:

``eventbus`` (ours)
    Key ``{stream}:dlq`` (the bus names it in the stream's hash slot: ``{orders}:dlq`` for ``orders``;
    buses before that naming wrote ``orders:dlq``, and both are the DLQ of ``orders``). An entry is the original fields plus ``dlq_original_stream``, ``dlq_original_id``,
    ``dlq_group``, ``dlq_error``, ``dlq_traceback``, ``dlq_retries`` and ``dlq_failed_at`` (ms).
``streams`` (the seed "streams" module)
    Key ``{stream}:dlq`` as well. An entry is the original fields, with the ``_retries`` counter.
``omnidaemon``
    Key ``omni-dlq:{group}``. One field, ``data``: JSON ``{topic, original_stream, original_id,
    failed_message, error, retry_count, failed_at}`` with ``failed_at`` in (float) seconds.

Both namings of a stream's DLQ are recognised (:func:`dlq_stream_of`, the rule of
:func:`eventbus.keys.stream_of`): ``orders:dlq`` and ``{orders}:dlq`` feed back into ``orders``, and
``{orders}.v2:dlq`` into ``{orders}.v2``. A ``{stream}:dlq`` key alone cannot say whether it is ``eventbus`` or ``streams``:
:func:`detect_dlq` reports it as ``eventbus-or-streams`` and :func:`parse_dlq_entry` decides per entry by
the presence of ``dlq_original_stream``. (One key may even hold both, after an upgrade from the seed
module to ours.)

Requeue writes the original message back:

* it drops the bookkeeping the DLQ added (``dlq_*`` fields, an earlier ``_requeued_from``);
* it resets the retry counter by *removing* ``_retries`` rather than writing ``"0"``: a freshly published
  entry has no ``_retries`` and both the seed module and our worker read a missing counter as zero, so a
  requeued message looks exactly like a new one and gets the full retry budget again;
* it adds ``_requeued_from=<dlq entry id>`` (:func:`requeue_plan`), which the Lua requeue script writes.

Configured conventions
----------------------
The configured conventions are a JSON list of objects, checked in order and before the built-ins, so an
operator can also override how a built-in key shape is read::

    [{"name": "jobs-dead",              # required: [A-Za-z0-9][A-Za-z0-9_.-]*, not a built-in name
      "match": "jobs:*:dead",           # required: Redis glob (* ? [abc] [^a-z] \\x) on the key's bytes
      "target": "strip_suffix::dead",   # required: where requeue writes, one of
                                        #   field:<name>          the stream named by that entry field
                                        #   strip_suffix:<suffix> the key without that suffix
                                        #   strip_prefix:<prefix> the key without that prefix
                                        #   fixed:<stream>        always that stream
      "error_field": "reason",          # optional entry fields, each shown on the page and
      "retries_field": "attempts",      #   left out of the requeued entry
      "original_id_field": "orig",
      "failed_at_field": "ts",
      "failed_at_unit": "ms",           # "ms" (default) or "s" (seconds, may be fractional)
      "group_field": "group",
      "traceback_field": "tb",
      "drop_fields": ["worker"]}]       # more fields to leave out of the requeued entry

Unknown keys, wrong types and bad targets raise :class:`PatternError` naming the item and the key (a
caller reading them at start-up stops there). Strings are matched as their UTF-8 bytes. The parse is
cached per raw value, so a changed setting (a test override) takes effect at once.

Nothing here talks to Redis: the readers and actions modules fetch entries and call these functions.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import keys as bus_keys
from .glob import glob_match
from .text import as_bytes, display_text, id_ms

PATTERNS_VARIABLE = "EVENTBUS_DLQ_PATTERNS"
"""The environment variable the command line reads the configured conventions from."""


class PatternError(ValueError):
    """The configured conventions are not valid: the message names the item and the key."""


class NotRequeueable(ValueError):
    """A DLQ entry that no convention can send anywhere: the message says why."""


class NotADlq(NotRequeueable):
    """The key is no dead-letter queue by any known convention, so nothing in it can be requeued."""


EVENTBUS = "eventbus"
STREAMS = "streams"
OMNIDAEMON = "omnidaemon"
EVENTBUS_OR_STREAMS = "eventbus-or-streams"
"""What a ``{stream}:dlq`` key is before an entry is looked at."""
NOT_A_DLQ = "none"
"""The convention of an entry parsed under a key no convention claims."""
BUILTIN_CONVENTIONS = frozenset({EVENTBUS, STREAMS, OMNIDAEMON, EVENTBUS_OR_STREAMS, NOT_A_DLQ})

DLQ_SUFFIX = b":dlq"
OMNI_DLQ_PREFIX = b"omni-dlq:"
OMNI_STREAM_PREFIX = b"omni-stream:"
OMNI_GROUP_PREFIX = b"group:"

RETRIES_FIELD = b"_retries"
REQUEUED_FROM_FIELD = b"_requeued_from"
FIRST_ID_FIELD = b"_first_id"
REPLAYED_FROM_FIELD = b"_replayed_from"
EVENTBUS_PREFIX = b"dlq_"

Fields = Sequence[tuple[bytes, bytes]] | Mapping[bytes, bytes]


@dataclass(frozen=True, slots=True)
class DlqKind:
    """What the key alone says: the convention, and the source stream when the key names it."""

    convention: str
    source_hint: bytes | None


@dataclass(frozen=True, slots=True)
class DlqEntry:
    """A DLQ entry in one shape whatever its convention.

    ``payload_fields`` are the fields a requeue writes, before ``_requeued_from``. ``failed_at_ms`` falls
    back to the DLQ entry ID's time (when the entry was added to the DLQ) when the entry does not say.
    Anything the entry does not hold, or holds malformed, is None.
    """

    id: str
    convention: str
    original_stream: bytes | None
    original_id: str | None
    group: str | None
    error: str | None
    retries: int | None
    failed_at_ms: int | None
    payload_fields: list[tuple[bytes, bytes]]
    traceback: str | None = None
    #: the entry ID the event was first published as (``original_id`` is the last attempt: each retry is
    #: a new entry); None when the entry does not say (our bus records it from its retries' ``_first_id``)
    first_id: str | None = None


# --- configured conventions -------------------------------------------------------------------------------

_TARGET_KINDS = ("field", "strip_suffix", "strip_prefix", "fixed")
_MAPPED_KEYS = (
    "error_field",
    "retries_field",
    "original_id_field",
    "failed_at_field",
    "group_field",
    "traceback_field",
)
_PATTERN_KEYS = frozenset({"name", "match", "target", "failed_at_unit", "drop_fields", *_MAPPED_KEYS})
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class DlqPattern:
    """One validated configured convention; field names are bytes, as in entries."""

    name: str
    match: bytes
    target_kind: str
    target_arg: bytes
    error_field: bytes | None = None
    retries_field: bytes | None = None
    original_id_field: bytes | None = None
    failed_at_field: bytes | None = None
    failed_at_unit: str = "ms"
    group_field: bytes | None = None
    traceback_field: bytes | None = None
    drop_fields: frozenset[bytes] = frozenset()

    def matches(self, key: bytes) -> bool:
        return glob_match(self.match, key)

    def source_hint(self, key: bytes) -> bytes | None:
        """The source stream the key names (None for ``field:`` targets: each entry names its own)."""
        arg = self.target_arg
        if self.target_kind == "fixed":
            return arg
        if self.target_kind == "strip_suffix" and key.endswith(arg) and len(key) > len(arg):
            return key[: -len(arg)]
        if self.target_kind == "strip_prefix" and key.startswith(arg) and len(key) > len(arg):
            return key[len(arg) :]
        return None

    @property
    def hidden_fields(self) -> frozenset[bytes]:
        """Fields left out of a requeued entry: the mapped ones, the target field, ``drop_fields``."""
        mapped = {getattr(self, name) for name in _MAPPED_KEYS} - {None}
        if self.target_kind == "field":
            mapped.add(self.target_arg)
        return frozenset(mapped) | self.drop_fields | {REQUEUED_FROM_FIELD}


@functools.lru_cache(maxsize=8)
def parse_dlq_patterns(text: str, source: str = PATTERNS_VARIABLE) -> tuple[DlqPattern, ...]:
    """Validate and compile the setting's value (see the module docstring); cached per value.

    ``source`` names where the text came from in the messages of :class:`PatternError`.
    """
    if not text.strip():
        return ()
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise PatternError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(items, list):
        raise PatternError(f"{source} must be a JSON list of objects.")
    patterns: list[DlqPattern] = []
    for index, item in enumerate(items):
        pattern = _parse_pattern(item, f"{source}[{index}]")
        if any(seen.name == pattern.name for seen in patterns):
            raise PatternError(f"{source}[{index}].name: {pattern.name!r} is used twice.")
        patterns.append(pattern)
    return tuple(patterns)


def _parse_pattern(item: Any, where: str) -> DlqPattern:
    if not isinstance(item, dict):
        raise PatternError(f"{where} must be an object, not {type(item).__name__}.")
    unknown = sorted(set(item) - _PATTERN_KEYS)
    if unknown:
        raise PatternError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
            f"allowed: {', '.join(sorted(_PATTERN_KEYS))}."
        )
    for required in ("name", "match", "target"):
        if required not in item:
            raise PatternError(f"{where}: {required!r} is required.")
    name = _string(item, "name", where)
    if not _NAME.fullmatch(name):
        raise PatternError(
            f"{where}.name: {name!r} must be 1-64 letters, digits, '_', '.' or '-', starting with a letter "
            "or digit."
        )
    if name in BUILTIN_CONVENTIONS:
        raise PatternError(f"{where}.name: {name!r} is a built-in convention's name.")
    match = _string(item, "match", where).encode()
    target = _string(item, "target", where)
    kind, sep, arg = target.partition(":")
    if not sep or kind not in _TARGET_KINDS or not arg:
        raise PatternError(
            f"{where}.target: {target!r} must be 'field:<name>', 'strip_suffix:<suffix>', "
            "'strip_prefix:<prefix>' or 'fixed:<stream>'."
        )
    mapped = {key: _string(item, key, where).encode() for key in _MAPPED_KEYS if item.get(key) is not None}
    unit = item.get("failed_at_unit", "ms")
    if unit not in ("ms", "s"):
        raise PatternError(f"{where}.failed_at_unit: {unit!r} must be 'ms' or 's'.")
    drop = item.get("drop_fields", [])
    if not isinstance(drop, list) or not all(isinstance(dropped, str) and dropped for dropped in drop):
        raise PatternError(f"{where}.drop_fields must be a list of non-empty strings.")
    return DlqPattern(
        name=name,
        match=match,
        target_kind=kind,
        target_arg=arg.encode(),
        failed_at_unit=unit,
        drop_fields=frozenset(dropped.encode() for dropped in drop),
        **mapped,
    )


def _string(item: dict[str, Any], key: str, where: str) -> str:
    value = item[key]
    if not isinstance(value, str) or not value:
        raise PatternError(f"{where}.{key} must be a non-empty string.")
    return value


# --- detection -----------------------------------------------------------------------------------------------


def detect_dlq(key: bytes, patterns: Sequence[DlqPattern] = ()) -> DlqKind | None:
    """The convention a key follows, or None when it is not a DLQ.

    Configured ``patterns`` come first, in order; then ``omni-dlq:*``; then ``*:dlq``.
    """
    key = as_bytes(key)
    for pattern in patterns:
        if pattern.matches(key):
            return DlqKind(pattern.name, pattern.source_hint(key))
    if key.startswith(OMNI_DLQ_PREFIX):
        return DlqKind(OMNIDAEMON, _omni_source_hint(key[len(OMNI_DLQ_PREFIX) :]))
    stream = dlq_stream_of(key)
    if stream is not None:
        return DlqKind(EVENTBUS_OR_STREAMS, stream)
    return None


def dlq_stream_of(key: bytes) -> bytes | None:
    """The stream a ``*:dlq`` key is the dead-letter queue of, in either naming, or None.

    ``orders:dlq`` (buses before the cluster naming) and ``{orders}:dlq`` (:func:`eventbus.keys.dlq_key`
    now) are both ``orders``'s; ``{orders}.v2:dlq`` is ``{orders}.v2``'s. The rule is the bus's own
    (:func:`eventbus.keys.stream_of`), applied to the key's bytes read as Latin-1, which maps each byte
    to one character and back, so a key that is not UTF-8 is handled too.
    """
    stream = bus_keys.stream_of(as_bytes(key).decode("latin-1"), DLQ_SUFFIX.decode())
    return stream.encode("latin-1") if stream else None


def _omni_source_hint(group: bytes) -> bytes | None:
    """OmniDaemon names groups ``group:{topic}:{agent}`` and streams ``omni-stream:{topic}``.

    Only a hint for the DLQ list: a topic or an agent name containing ``:`` makes the split ambiguous
    (we assume agent names do not), so requeue trusts the entry's ``original_stream`` instead.
    """
    if not group.startswith(OMNI_GROUP_PREFIX):
        return None
    topic, sep, agent = group[len(OMNI_GROUP_PREFIX) :].rpartition(b":")
    if not sep or not topic or not agent:
        return None
    return OMNI_STREAM_PREFIX + topic


def dlq_source_streams(
    key: bytes, entries: Iterable[DlqEntry] = (), patterns: Sequence[DlqPattern] = ()
) -> list[bytes]:
    """The streams a DLQ feeds back into: the key's hint, then each entry's stream, without repeats.

    Pass a sample of parsed entries (the newest page, say) for conventions whose entries name the stream.
    """
    kind = detect_dlq(key, patterns)
    found: list[bytes] = []
    candidates = [kind.source_hint if kind else None, *(entry.original_stream for entry in entries)]
    for stream in candidates:
        if stream and stream not in found:
            found.append(stream)
    return found


# --- entries -------------------------------------------------------------------------------------------------


def parse_dlq_entry(
    key: bytes, entry_id: str, fields: Fields, patterns: Sequence[DlqPattern] = ()
) -> DlqEntry:
    """Read one DLQ entry by the convention of its key (and, for ``{stream}:dlq``, of the entry itself).

    Tolerant: a missing or malformed field leaves its attribute None; this never raises on entry content.
    """
    key = as_bytes(key)
    entry_id = display_text(entry_id) if isinstance(entry_id, bytes) else str(entry_id)
    pairs = _pairs(fields)
    kind = detect_dlq(key, patterns)
    if kind is None:
        return _entry(entry_id, NOT_A_DLQ, payload=_without(pairs, {REQUEUED_FROM_FIELD}))
    if kind.convention == OMNIDAEMON:
        return _parse_omnidaemon(key, entry_id, pairs)
    if kind.convention == EVENTBUS_OR_STREAMS:
        if _get(pairs, b"dlq_original_stream") is not None:
            return _parse_eventbus(kind, entry_id, pairs)
        return _entry(
            entry_id,
            STREAMS,
            original_stream=kind.source_hint,
            retries=_int(_get(pairs, RETRIES_FIELD)),
            payload=_without(pairs, {RETRIES_FIELD, REQUEUED_FROM_FIELD}),
        )
    pattern = next(p for p in patterns if p.name == kind.convention)
    return _parse_configured(pattern, key, entry_id, pairs)


def _parse_eventbus(kind: DlqKind, entry_id: str, pairs: list[tuple[bytes, bytes]]) -> DlqEntry:
    payload = [
        (name, value)
        for name, value in pairs
        if not name.startswith(EVENTBUS_PREFIX) and name not in (RETRIES_FIELD, REQUEUED_FROM_FIELD)
    ]
    retries = _int(_get(pairs, b"dlq_retries"))
    original_id = _text(_get(pairs, b"dlq_original_id"))
    first_id = _text(_get(pairs, FIRST_ID_FIELD))
    copied = _get(pairs, REQUEUED_FROM_FIELD) or _get(pairs, REPLAYED_FROM_FIELD)
    if first_id is None and retries == 0 and not copied:
        first_id = original_id  # never retried nor copied: the attempt that failed was the first publish
    entry = _entry(
        entry_id,
        EVENTBUS,
        # the key is {stream}:dlq, so it names the stream when the field is empty
        original_stream=_get(pairs, b"dlq_original_stream") or kind.source_hint,
        original_id=original_id,
        group=_text(_get(pairs, b"dlq_group")),
        error=_text(_get(pairs, b"dlq_error")),
        traceback=_text(_get(pairs, b"dlq_traceback")),
        retries=retries if retries is not None else _int(_get(pairs, RETRIES_FIELD)),
        failed_at_ms=_number_ms(_get(pairs, b"dlq_failed_at"), unit="ms"),
        payload=payload,
    )
    return replace(entry, first_id=first_id)


def _parse_omnidaemon(key: bytes, entry_id: str, pairs: list[tuple[bytes, bytes]]) -> DlqEntry:
    group = _text(key[len(OMNI_DLQ_PREFIX) :])
    raw = _get(pairs, b"data")
    try:
        doc = json.loads(raw.decode("utf-8")) if raw is not None else None
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        return _entry(entry_id, OMNIDAEMON, group=group)
    stream = doc.get("original_stream")
    topic = doc.get("topic")
    if isinstance(stream, str) and stream:
        original_stream: bytes | None = stream.encode()
    elif isinstance(topic, str) and topic:
        original_stream = OMNI_STREAM_PREFIX + topic.encode()
    else:
        original_stream = None
    original_id = doc.get("original_id")
    error = doc.get("error")
    payload: list[tuple[bytes, bytes]] = []
    if "failed_message" in doc:
        try:
            # json.dumps with its defaults, as OmniDaemon (Python) publishes
            payload = [(b"data", json.dumps(doc["failed_message"]).encode())]
        except (ValueError, RecursionError):
            payload = []
    return _entry(
        entry_id,
        OMNIDAEMON,
        original_stream=original_stream,
        original_id=original_id if isinstance(original_id, str) and original_id else None,
        group=group,
        error=error if isinstance(error, str) or error is None else json.dumps(error),
        retries=_json_int(doc.get("retry_count")),
        failed_at_ms=_number_ms(doc.get("failed_at"), unit="s"),
        payload=payload,
    )


def _parse_configured(
    pattern: DlqPattern, key: bytes, entry_id: str, pairs: list[tuple[bytes, bytes]]
) -> DlqEntry:
    def get(name: bytes | None) -> bytes | None:
        return _get(pairs, name) if name is not None else None

    if pattern.target_kind == "field":
        original_stream = get(pattern.target_arg) or None
    else:
        original_stream = pattern.source_hint(key)
    return _entry(
        entry_id,
        pattern.name,
        original_stream=original_stream,
        original_id=_text(get(pattern.original_id_field)),
        group=_text(get(pattern.group_field)),
        error=_text(get(pattern.error_field)),
        traceback=_text(get(pattern.traceback_field)),
        retries=_int(get(pattern.retries_field)),
        failed_at_ms=_number_ms(get(pattern.failed_at_field), unit=pattern.failed_at_unit),
        payload=_without(pairs, pattern.hidden_fields),
    )


def requeue_plan(
    key: bytes, entry_id: str, fields: Fields, patterns: Sequence[DlqPattern] = ()
) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    """The stream a requeue of this DLQ entry writes to and the fields it XADDs.

    Raises :class:`NotRequeueable` when the key is no known DLQ, the entry does not say where it came
    from, the target is the DLQ itself, or (OmniDaemon) there is no ``failed_message`` to write back.
    """
    key = as_bytes(key)
    entry = parse_dlq_entry(key, entry_id, fields, patterns)
    where = f"DLQ entry {entry.id} of {display_text(key)!r}"
    if entry.convention == NOT_A_DLQ:
        raise NotADlq(f"{display_text(key)!r} is not a dead-letter queue by any known convention.")
    if not entry.original_stream:
        raise NotRequeueable(f"Cannot tell which stream {where} came from.")
    if entry.original_stream == key:
        raise NotRequeueable(f"{where} names its own DLQ as its stream; requeueing would loop.")
    if entry.convention == OMNIDAEMON and not entry.payload_fields:
        raise NotRequeueable(f"{where} has no failed_message to requeue.")
    return entry.original_stream, [*entry.payload_fields, (REQUEUED_FROM_FIELD, entry.id.encode())]


# --- helpers -------------------------------------------------------------------------------------------------


def _entry(
    entry_id: str,
    convention: str,
    *,
    original_stream: bytes | None = None,
    original_id: str | None = None,
    group: str | None = None,
    error: str | None = None,
    traceback: str | None = None,
    retries: int | None = None,
    failed_at_ms: int | None = None,
    payload: list[tuple[bytes, bytes]] | None = None,
) -> DlqEntry:
    if failed_at_ms is None:
        failed_at_ms = id_ms(entry_id)
    return DlqEntry(
        id=entry_id,
        convention=convention,
        original_stream=original_stream or None,
        original_id=original_id,
        group=group,
        error=error,
        retries=retries,
        failed_at_ms=failed_at_ms,
        payload_fields=payload or [],
        traceback=traceback,
    )


def _pairs(fields: Fields) -> list[tuple[bytes, bytes]]:
    items = fields.items() if isinstance(fields, Mapping) else fields
    return [(as_bytes(name), as_bytes(value)) for name, value in items]


def _get(pairs: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The first value of a field (Redis lets a name repeat within an entry)."""
    for field_name, value in pairs:
        if field_name == name:
            return value
    return None


def _without(
    pairs: list[tuple[bytes, bytes]], names: set[bytes] | frozenset[bytes]
) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in pairs if name not in names]


def _text(value: bytes | None) -> str | None:
    return display_text(value) if value else None


def _int(value: bytes | None) -> int | None:
    if value is None or len(value) > 32:
        return None
    try:
        return int(value.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None


def _json_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _number_ms(value: object, *, unit: str) -> int | None:
    """Milliseconds since the epoch from an int/float, or its bytes, given in ``unit`` (``ms`` or ``s``)."""
    if isinstance(value, bytes):
        if len(value) > 32:
            return None
        try:
            value = float(value.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value) * (1000 if unit == "s" else 1)
    if not math.isfinite(number) or not 0 <= number < 2**63:
        return None
    return round(number)


def dlq_candidates(key: bytes, group_names: Iterable[bytes] = ()) -> list[bytes]:
    """Keys where the dead letters of stream ``key`` would be, by the built-in conventions.

    ``{stream}:dlq`` in both namings (the event bus's in the stream's slot, ``{orders}:dlq``, first;
    then ``orders:dlq``, the seed ``streams`` module's and older buses'; one key when the stream has a
    hash tag, as both namings agree then) and, for OmniDaemon's ``omni-stream:{topic}``,
    ``omni-dlq:{group}`` for each of the stream's consumer groups. Which of them exist is for the
    caller to ask Redis.
    """
    in_slot = bus_keys.in_slot_of(as_bytes(key).decode("latin-1"), DLQ_SUFFIX.decode()).encode("latin-1")
    candidates = [in_slot] + ([key + DLQ_SUFFIX] if in_slot != key + DLQ_SUFFIX else [])
    if key.startswith(b"omni-stream:"):
        candidates += [b"omni-dlq:" + name for name in group_names]
    return candidates


# ----------------------------------------------------------------------------- the bus's own streams


def is_internal_stream(key: bytes) -> bool:
    """Whether ``key`` is one of the event bus's own bookkeeping streams rather than an application's.

    Internal: the bus's metric events, the old shared ``eventbus:metrics`` and a stream's own
    ``{S}:metrics`` named exactly as the bus names it (:func:`eventbus.keys.metrics_key`), so a user's
    ``orders:metrics`` (which the bus would have named ``{orders}:metrics``) stays an application stream.
    Not internal: dead-letter queues (an operator's work list, shown with their own "DLQ" pill), progress
    streams (a task's output, read by applications), and whatever else an application writes. The bus's
    other companion keys (``{S}:retry``, ``{S}:unique``) are sorted sets, never listed as streams.
    Pages mark internal streams and the overview's "busiest" leaves them out unless asked: the bus's
    metrics stream moves with every handled event, so it would top the list on any busy bus.
    """
    return bus_keys.is_metrics_key(as_bytes(key))
