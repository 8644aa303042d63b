"""The one function that masks payloads: :func:`masker_for`, and the :class:`Masker` it returns.

Design:

- A rule names streams (a Redis glob, matched by the one glob matcher), a field path and an action.
  The path's first segment is a top-level field name; further segments walk into the field's JSON
  (object keys, list indexes, ``*`` for every key or item). ``mask`` shows ``••••``, ``hash`` shows
  ``hash:<12 hex>`` of a keyed HMAC-SHA256 (key derived from ``SECRET_KEY``: equal values stay
  comparable, nobody without the key can test a guess), ``remove`` leaves the field or key out. When
  several rules hit one value the strongest wins (remove, then mask, then hash).
- Fail closed: a rule with a deeper path masks the whole field whenever the console cannot tell with
  certainty whether the value hides there: a field that is not JSON (msgpack, text, a bad document), a
  JSON object that repeats a key (``{"c":{"email":…},"c":{"id":3}}``: a parser keeping the last copy
  finds nothing to mask while the raw bytes keep the first), nesting too deep to walk, or a path that
  runs into a string which itself holds JSON (a payload encoded twice). Only JSON is walked: a value
  hidden in another encoding inside a string (base64, say) needs a rule on the whole field.
- Everyone sees masked values, whatever their role. A user whose role is in
  ``BUSCONSOLE_UNMASKED_ROLES`` may ask for one response unmasked (``?unmasked=1`` on a page or API
  read); every such response that shows a value some rule would have masked writes one ``payload.reveal``
  audit row naming the stream and the entry IDs. Anyone else asking is refused (403) and the refusal is
  audited too. So a payload that leaves the server unmasked always has a row, and a default response
  never differs by role, which keeps the live tail cheap: the hub encodes one masked frame per entry and
  shares it between every subscriber (the tail never reveals).
- A dead letter is masked by the rules of its DLQ key and those of the stream it came from, so a rule
  written for ``orders`` also hides the field in ``orders:dlq``. The raw entry is masked before it is
  parsed (:meth:`Masker.dlq_parse`), so a rule naming the DLQ's own fields (``dlq_error``,
  ``dlq_traceback``, OmniDaemon's ``data.error``) hides the error wherever it is shown or searched.
  An OmniDaemon dead letter keeps the original message as JSON under ``data.failed_message`` (the
  origin's ``data`` field): the rules of the origin and of the DLQ key reach it there as if it were
  that ``data`` field (``orders`` ``data.customer.email`` hides ``data.failed_message.customer.email``),
  and the DLQ key's rules also apply to the entry as stored.
- Search and export take :meth:`Masker.entry` of each entry before they evaluate or write it, so a
  masked value cannot be found by searching for it.

Rules are read per request (a handful of rows); the tail, which runs in the event loop and may not
touch the database, uses the copy the last read left in this process (:func:`rules_cached`), refreshed
by every tail connection (:func:`rules_load`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils.crypto import salted_hmac

from busconsole.env import mask_path_split
from eventbus import keys as bus_keys
from eventbus.conventions import OMNIDAEMON, DlqEntry, dlq_candidates
from eventbus.glob import Glob, glob_compile
from streams_app.accounts.roles import role_of
from streams_app.masking.models import MaskRule
from streams_app.redis_ops import conventions
from streams_app.redis_ops.types import Entry

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

#: What a masked value shows, as text inside JSON and as the bytes of a whole field.
MASKED = "••••"
MASKED_BYTES = MASKED.encode()
#: The audit action of a response that showed masked values unmasked.
REVEAL_ACTION = "payload.reveal"
REVEAL_REFUSED = "Your role may not see masked values unmasked."
#: What a revealing masker hands the IDs a response showed unmasked to: the gate's ``payload.reveal`` row
#: (``streams_app/services/reveal.py``). A masker reveals only with one, so a revealed value has its row.
RevealAudit = Callable[[list[str]], None]
_HASH_SALT = "streams_app.masking.hash"
_HASH_CHARS = 12
_HASHED = re.compile(rf"hash:[0-9a-f]{{{_HASH_CHARS}}}")
#: Strongest last: applied in this order, a stronger action overwrites a weaker one on the same value.
_ORDER = {"hash": 0, "mask": 1, "remove": 2}
#: Where an OmniDaemon dead letter keeps the original message: JSON ``failed_message`` in field ``data``.
_OMNI_FIELD = b"data"
_OMNI_MESSAGE = "failed_message"

Pairs = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One compiled rule: ``field`` None is ``*`` (every field); ``path`` walks into the field's JSON."""

    glob: Glob
    field: bytes | None
    path: tuple[str, ...]
    action: str
    text: str  # the path as written, for the audit row


def rule_compile(stream_glob: str, field_path: str, action: str) -> Rule:
    segments = mask_path_split(field_path)
    first = segments[0]
    return Rule(
        glob=glob_compile(stream_glob.encode("utf-8", "surrogateescape")),
        field=None if first == "*" else first.encode("utf-8", "surrogateescape"),
        path=segments[1:],
        action=action,
        text=field_path.strip(),
    )


_cached: tuple[Rule, ...] = ()
_loaded = False  # whether this process has read the rules at all (masker_cached refuses until it has)


def rules_load() -> tuple[Rule, ...]:
    """Every rule in force: the settings' and the enabled rows of the admin page (one small query)."""
    global _cached, _loaded
    found = [rule_compile(r["stream"], r["field"], r["action"]) for r in settings.BUSCONSOLE_MASK_RULES]
    found += [
        rule_compile(glob, path, action)
        for glob, path, action in MaskRule.objects.filter(enabled=True).values_list(
            "stream_glob", "field_path", "action"
        )
    ]
    rules = tuple(sorted(found, key=lambda r: _ORDER[r.action]))
    if rules != _cached:  # kept when unchanged: the tail's maskers (masker_cached) stay valid
        _cached = rules
    _loaded = True
    return _cached


def rules_cached() -> tuple[Rule, ...]:
    """The rules as the last :func:`rules_load` of this process found them (for async code: no query)."""
    return _cached


def may_reveal(user: UserLike | None) -> bool:
    return role_of(user).label in settings.BUSCONSOLE_UNMASKED_ROLES


class Masker:
    """Masks the entries of one stream for one response; records what a reveal showed."""

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        key: bytes,
        conn: str = "",
        reveal: RevealAudit | None = None,
    ) -> None:
        self._all = tuple(rules)
        self.key = key
        self.conn = conn
        self._reveal_audit = reveal
        self.revealing = reveal is not None
        self.revealed: list[str] = []
        self._by_stream: dict[bytes, tuple[Rule, ...]] = {}
        self._omni: dict[bytes | None, tuple[Rule, ...]] = {}
        self._rules = self._for_stream(key)
        self._dlq = bool(self._all) and conventions.detect_dlq(key) is not None
        #: The bus's metric events carry handlers' errors (``error``), the text a dead letter keeps as its
        #: error: masked here as that DLQ's error is. b"": the shared ``eventbus:metrics`` (the entry's
        #: ``stream`` field names the stream), None: not a metrics stream.
        self._metrics_of = _metrics_stream(key) if self._all else None
        self._error_maskers: dict[bytes, tuple[Masker, ...]] = {}
        #: Whether any rule could apply here (a DLQ's entries may also follow their origin's rules).
        self.active = bool(self._rules) or self._dlq or self._metrics_of is not None

    def _for_stream(self, stream: bytes) -> tuple[Rule, ...]:
        found = self._by_stream.get(stream)
        if found is None:
            found = self._by_stream[stream] = tuple(r for r in self._all if r.glob.matches(stream))
        return found

    def _with_origin(self, origin: bytes | None) -> tuple[Rule, ...]:
        if not origin or origin == self.key:
            return self._rules
        extra = self._for_stream(origin)
        if not extra:
            return self._rules
        return tuple(sorted({*self._rules, *extra}, key=lambda r: _ORDER[r.action]))

    def _omni_rules(self, origin: bytes | None) -> tuple[Rule, ...]:
        """An OmniDaemon dead letter's rules: the DLQ key's on the entry as stored, and the DLQ key's and
        the origin's moved under ``data.failed_message`` (the original message's ``data`` field)."""
        found = self._omni.get(origin)
        if found is None:
            nested = [
                replace(r, field=_OMNI_FIELD, path=(_OMNI_MESSAGE, *r.path))
                for r in self._with_origin(origin)
                if r.field is None or r.field == _OMNI_FIELD
            ]
            merged = dict.fromkeys([*self._rules, *nested])
            found = self._omni[origin] = tuple(sorted(merged, key=lambda r: _ORDER[r.action]))
        return found

    def _dlq_rules(self, parsed: DlqEntry) -> tuple[Rule, ...]:
        """The rules of a dead letter of this DLQ key, ``parsed`` as stored."""
        if parsed.convention == OMNIDAEMON:
            return self._omni_rules(parsed.original_stream)
        return self._with_origin(parsed.original_stream)

    def _metric_errors(self, fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """A metric event's ``error`` as its stream's dead letters show their errors."""
        origin = self._metrics_of or next((v for n, v in fields if n == b"stream"), b"")
        maskers = self._error_maskers.get(origin)
        if maskers is None:
            candidates = dlq_candidates(origin) if origin else []
            found = (Masker(self._all, key=k, conn=self.conn) for k in candidates)
            maskers = self._error_maskers[origin] = tuple(m for m in found if m.active)
        if not maskers:
            return fields
        out: list[tuple[bytes, bytes]] = []
        for name, value in fields:
            if name == b"error":
                shown: str | None = value.decode("utf-8", "surrogateescape")
                for masker in maskers:
                    shown = shown if shown is None else masker.shown_error(shown, origin=origin)
                if shown is None:
                    continue  # removed
                value = shown.encode("utf-8", "surrogateescape")
            out.append((name, value))
        return out

    def _masked(self, entry_id: str, fields: Pairs, rules: Sequence[Rule]) -> list[tuple[bytes, bytes]]:
        masked = mask_fields(fields, rules) if rules else list(fields)
        if self._metrics_of is not None:
            masked = self._metric_errors(masked)
        if not self.revealing:
            return masked
        if masked != list(fields):
            self.revealed.append(entry_id)
        return list(fields)

    def entry(self, entry: Entry) -> Entry:
        """The entry as this response may show it (for a DLQ key, its origin's rules apply too)."""
        if not self.active:
            return entry
        if self._dlq:
            return self.dead_letter(entry)[0]
        fields = self._masked(entry.id, entry.fields, self._rules)
        return entry if self.revealing else Entry(id=entry.id, fields=tuple(fields))

    def dead_letter(self, entry: Entry) -> tuple[Entry, bool]:
        """:meth:`entry` of a raw dead letter of this DLQ key, and whether the rules may hide an error it
        records: it records one (not empty) and the shown entry differs from it. So a shown dead letter
        without an error is told apart: a rule removed its error (``remove`` leaves no trace in the shown
        entry), or it records none. Taken from the parse the masking needs anyway (the rules depend on the
        origin); it tells nothing of the error but that there is one, as ``mask`` would show ``••••``."""
        if not self._dlq:
            return self.entry(entry), False
        parsed = conventions.parse_dlq_entry(self.key, entry.id, entry.fields)
        fields = self._masked(entry.id, entry.fields, self._dlq_rules(parsed))
        if self.revealing or fields == list(entry.fields):
            return entry, False
        return Entry(id=entry.id, fields=tuple(fields)), bool(parsed.error)

    def dlq_parse(self, entry: Entry) -> DlqEntry:
        """A raw dead letter of this DLQ key as this response may show it: masked by :meth:`entry` first,
        then parsed, so its error and traceback follow the rules as well as its payload does."""
        shown = self.entry(entry)
        return conventions.parse_dlq_entry(self.key, shown.id, shown.fields)

    def shown_error(self, error: str, *, origin: bytes | None = None) -> str | None:
        """A dead letter's error text met apart from its entry (a report's example and signature), as
        this DLQ's pages show the error: put where each convention keeps it (``dlq_error``, OmniDaemon's
        ``data.error``, a configured ``error_field``), masked, and parsed back. Masked text (``••••``, a
        ``hash:``) is kept as it is, so text the lake already holds masked is not masked twice."""
        if not self.active or error == MASKED or _HASHED.fullmatch(error):
            return error
        text = error.encode("utf-8", "surrogateescape")
        fields = [(b"dlq_error", text), (b"data", json.dumps({"error": error}).encode())]
        fields += [(p.error_field, text) for p in conventions.dlq_patterns() if p.error_field]
        if origin:
            fields.append((b"dlq_original_stream", origin))
        return self.dlq_parse(Entry(id="0-1", fields=tuple(fields))).error

    def reveal_record(self) -> None:
        """One ``payload.reveal`` audit row when this response showed values a rule would have hidden
        (the entries' IDs, each once), written by the audit this masker was given."""
        if not self.revealed or self._reveal_audit is None:
            return
        self._reveal_audit(list(dict.fromkeys(self.revealed)))
        self.revealed.clear()


def _metrics_stream(key: bytes) -> bytes | None:
    """The stream whose metric events ``key`` holds; b"" for the bus's old shared stream; None for any
    other key."""
    if not bus_keys.is_metrics_key(key):
        return None
    if key == bus_keys.METRICS_STREAM.encode():
        return b""
    return bus_keys.stream_of(key, bus_keys.METRICS_SUFFIX.encode()) or b""


def masker_for(user: UserLike | None, conn: str, key: bytes, *, reveal: RevealAudit | None = None) -> Masker:
    """The masker of one response about stream ``key``. ``reveal``: show values unmasked, handing what
    was shown to this audit; refused (PermissionDenied) unless the user's role is in
    ``BUSCONSOLE_UNMASKED_ROLES``. A reveal is asked for through ``services.payload_masker``, which has
    the gate check the role and write the refusal's row before this is reached."""
    rules = rules_load()
    if reveal is not None and not may_reveal(user):
        raise PermissionDenied(REVEAL_REFUSED)
    return Masker(rules, key=key, conn=conn, reveal=reveal)


def search_mask(user: UserLike | None, conn: str, key: bytes) -> Callable[[Entry], Entry] | None:
    """What a search or an export by ``user`` sees of each entry (None when no rule applies, so a
    search of an unmasked stream pays nothing). Never reveals: a search that could find values the page
    shows masked would tell them, whatever it prints (kafka-ui #4115); revealing is the entry page's."""
    masker = masker_for(user, conn, key)
    return masker.entry if masker.active else None


def errors_masker(conn: str, stream: bytes, dlq: bytes) -> Callable[[str | None], str | None]:
    """How a handler's error for ``stream`` shows where it is met before it reaches the DLQ (a waiting
    retry's last error, read from the bus's metric events): as a dead letter's error would, by the rules
    of ``dlq``, of the stream's other DLQ names (``{S}:dlq`` and ``S:dlq``) and of ``stream``. It never
    reveals: revealing belongs to the dead letter's own page."""
    rules = rules_load()
    keys = dict.fromkeys([dlq, *dlq_candidates(stream)])
    maskers = [m for m in (Masker(rules, key=k, conn=conn) for k in keys) if m.active]

    def shown(error: str | None) -> str | None:
        for masker in maskers:  # each keeps what another masked (shown_error leaves masked text alone)
            if error is None:
                break
            error = masker.shown_error(error, origin=stream)
        return error

    return shown


def masker_cached(conn: str, key: bytes) -> Masker:
    """A masking-only masker from this process's last-read rules, kept per stream while the rules stay the
    same: the live tail asks for one per entry it encodes, and may not query the database (nor does the
    lake's exporter, once per stream). Fails closed: a process that never read the rules gets an error,
    not a masker that masks nothing."""
    if not _loaded:
        raise RuntimeError("the masking rules were never read in this process: call rules_load() first")
    rules = _cached
    found = _maskers.get((conn, key))
    if found is None or found[0] is not rules:
        if len(_maskers) >= _MASKERS_MAX:
            _maskers.clear()
        found = _maskers[(conn, key)] = (rules, Masker(rules, key=key, conn=conn))
    return found[1]


_maskers: dict[tuple[str, bytes], tuple[tuple[Rule, ...], Masker]] = {}
_MASKERS_MAX = 10000


# ------------------------------------------------------------------------------------------ applying


def mask_fields(fields: Pairs, rules: Sequence[Rule]) -> list[tuple[bytes, bytes]]:
    """``fields`` with ``rules`` applied (rules sorted weakest first, as :func:`rules_load` returns them)."""
    out: list[tuple[bytes, bytes]] = []
    for name, value in fields:
        hits = [r for r in rules if r.field is None or r.field == name]
        if not hits:
            out.append((name, value))
            continue
        whole = [r for r in hits if not r.path]
        if whole:
            action = whole[-1].action
            if action != "remove":
                out.append((name, MASKED_BYTES if action == "mask" else hash_text(value).encode()))
            continue
        out.append((name, _mask_json(value, hits)))
    return out


def _mask_json(value: bytes, rules: Sequence[Rule]) -> bytes:
    """``value`` with the path rules applied, or :data:`MASKED_BYTES` whenever the masker cannot be sure
    where the rules' values are (fail closed): a value that is not JSON, that repeats a key in one object
    (parsers disagree on which copy wins: the page shows the last, the raw bytes keep both), that nests
    too deep to walk, or whose path runs into a string that itself holds JSON (a payload encoded twice)."""
    try:
        doc = json.loads(value, object_pairs_hook=_unique_keys)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return MASKED_BYTES  # fail closed: the value may hide there in a form we cannot walk
    changed = False
    try:
        for rule in rules:
            doc, hit = _walk(doc, rule.path, rule.action)
            changed = changed or hit
    except _Unsure:
        return MASKED_BYTES
    if not changed:
        return value
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()


class _Unsure(Exception):
    """A rule's path reached something the masker cannot walk with certainty."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        raise ValueError("a key repeats in one object")
    return doc


def _holds_json(text: str) -> bool:
    """Whether a string met on a rule's path is itself a JSON document that could hold the value."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in '{["':
        return False
    try:
        inner = json.loads(stripped)
    except (ValueError, RecursionError):
        return False
    return isinstance(inner, dict | list | str)


def _walk(node: Any, path: tuple[str, ...], action: str) -> tuple[Any, bool]:
    """Apply ``action`` at ``path`` under ``node`` (in place); returns the node and whether anything was hit.
    Raises :class:`_Unsure` when the path runs into a string holding JSON."""
    segment, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys = list(node) if segment == "*" else [segment] if segment in node else []
        slots: list[Any] = keys
    elif isinstance(node, list):
        if segment == "*":
            slots = list(range(len(node)))
        elif segment.isdigit() and int(segment) < len(node):
            slots = [int(segment)]
        else:
            slots = []
    elif isinstance(node, str) and _holds_json(node):
        raise _Unsure
    else:
        return node, False
    hit = False
    for slot in reversed(slots):  # reversed: removing list items keeps the earlier indexes right
        if rest:
            node[slot], deeper = _walk(node[slot], rest, action)
            hit = hit or deeper
        elif action == "remove":
            del node[slot]
            hit = True
        else:
            node[slot] = MASKED if action == "mask" else hash_text(node[slot])
            hit = True
    return node, hit


def hash_text(value: Any) -> str:
    """``hash:<12 hex>`` of a keyed HMAC-SHA256: a string by its UTF-8, bytes as they are, else its JSON."""
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return "hash:" + salted_hmac(_HASH_SALT, data, algorithm="sha256").hexdigest()[:_HASH_CHARS]
