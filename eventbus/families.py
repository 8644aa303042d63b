"""Stream families: keys grouped by pattern, so a million short-lived streams read as a few rows.

A bus that gives every task its own progress stream (``progress:<task>``, with a TTL) or every order its
own event stream (``task:<id>:events``) soon holds more keys than a per-stream list can show. A
*family* is the set of keys one pattern stands for, and a program that watches the bus (its command
line, a monitoring application) reads and counts by family. This is the one Django-free copy of how a
key finds its family, and of the figures a family sums.

Which family a key belongs to depends on the key alone (and the configured families), never on which
other keys exist, so any reader of any subset of the keys (one SCAN page, a bounded pass, the members
of one family) puts every key in the same place. In order:

1. **Configured** families (:func:`parse_families`): Redis globs, matched as ``SCAN MATCH`` matches
   them (:mod:`eventbus.glob`, the one matcher); the first that matches wins.
2. **Detected** from the key's shape (:func:`shape_of`): the key is cut at the delimiter (``:`` by
   default) and each segment that looks like an identifier (digits, ``<ms>-<seq>``, a UUID, 16 or more
   hex digits, a ULID) becomes ``*``; so ``progress:123`` and ``progress:124`` are ``progress:*``,
   ``task:9:events`` is ``task:*:events``. A ``{`` opening a segment and a ``}`` closing one are kept
   around the ``*``, so the bus's companion keys (:mod:`eventbus.keys`: ``{progress:123}:dlq``) form
   families beside their streams' (``{progress:*}:dlq``).
3. **Its own key**, when no segment looks like an identifier (``orders``, ``{orders}:dlq``): the
   family's pattern is the key with the glob's special bytes escaped, so it matches that key only.

A dead-letter queue counts in its own family; its depth also counts as the *DLQ depth* of the family
of the stream it feeds back into (the caller says which stream that is, by the DLQ conventions it
reads: :func:`eventbus.conventions.detect_dlq`).

The shape rule is hand-written rather than taken from a library: it is a dozen lines of byte regexes
and must agree exactly with what ``SCAN MATCH`` then selects for the family's members.
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from .glob import Glob, glob_compile
from .text import display_text, id_order

DEFAULT_DELIMITER = b":"
#: The most configured families: each key is matched against every one of them.
MAX_FAMILIES = 200
MAX_PATTERN_BYTES = 512
#: Bytes a delimiter may not be: the glob's own, and the braces of a hash tag.
_NOT_DELIMITERS = b"*?[]\\{}"
_GLOB_SPECIAL = re.compile(rb"([*?\[\]\\])")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.:*{}/-]{0,99}")
#: A segment that names one thing of many (its braces aside): a number, an entry ID, a UUID, a long
#: hex digest or object ID (with a digit in it, so a long word is not one), a ULID (with a digit).
_IDENTIFIER = re.compile(
    rb"[0-9]+(?:-[0-9]+)?"
    rb"|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
    rb"|(?=[A-Za-z]*[0-9])[0-9A-Fa-f]{16,}"
    rb"|(?=[A-Za-z]*[0-9])[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}"
)

Kind = Literal["configured", "detected", "key"]


class FamilyError(ValueError):
    """A configured family that cannot be read; the message names the item and what is wrong."""


@dataclass(frozen=True, slots=True)
class Family:
    """One family: its pattern (a Redis glob over the key's bytes), the name shown, and where it comes from."""

    pattern: bytes
    name: str
    kind: Kind


def parse_families(text: str, source: str = "families") -> tuple[Family, ...]:
    """The configured families from their setting: a JSON list whose items are a glob (``"progress:*"``)
    or ``{"name": ..., "match": glob}``. Empty text is none. :class:`FamilyError` names the item
    (``source[2]``) and the reason: not JSON, not a list, an unknown key, an empty or too long glob, a
    name with other characters than letters, digits, space and ``_.:*{}/-``, a glob or name given twice,
    more than :data:`MAX_FAMILIES` items."""
    if not text.strip():
        return ()
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise FamilyError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(items, list):
        raise FamilyError(f"{source} must be a JSON list of globs or {{\"name\", \"match\"}} objects.")
    if len(items) > MAX_FAMILIES:
        raise FamilyError(f"{source} lists {len(items)} families; at most {MAX_FAMILIES}.")
    out: list[Family] = []
    for index, item in enumerate(items):
        family = _parse_family(item, f"{source}[{index}]")
        for earlier in out:
            if earlier.pattern == family.pattern:
                raise FamilyError(f"{source}[{index}]: the glob {display_text(family.pattern)!r} is given twice.")
            if earlier.name == family.name:
                raise FamilyError(f"{source}[{index}]: the name {family.name!r} is given twice.")
        out.append(family)
    return tuple(out)


def _parse_family(item: Any, where: str) -> Family:
    match: object
    name: object
    if isinstance(item, str):
        match, name = item, item
    elif isinstance(item, dict):
        unknown = sorted(set(item) - {"name", "match"})
        if unknown:
            raise FamilyError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; allowed: match, name.")
        match, name = item.get("match"), item.get("name", item.get("match"))
    else:
        raise FamilyError(f"{where} must be a glob or an object, not {type(item).__name__}.")
    if not isinstance(match, str) or not match:
        raise FamilyError(f"{where}: match must be a non-empty glob such as 'progress:*'.")
    pattern = match.encode()
    if len(pattern) > MAX_PATTERN_BYTES:
        raise FamilyError(f"{where}: the glob is {len(pattern)} bytes long; at most {MAX_PATTERN_BYTES}.")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise FamilyError(
            f"{where}: name {name!r} must be 1 to 100 letters, digits, spaces or _.:*{{}}/- and start with a"
            " letter or digit."
        )
    return Family(pattern=pattern, name=name, kind="configured")


def check_delimiter(text: str, source: str = "delimiter") -> bytes:
    """The delimiter from its setting: one printable ASCII character, not a glob's or a hash tag's."""
    raw = text.encode()
    if len(raw) != 1 or not 0x21 <= raw[0] <= 0x7E or raw[0] in _NOT_DELIMITERS:
        raise FamilyError(
            f"{source} must be one printable ASCII character other than * ? [ ] \\ {{ }}, not {text!r}."
        )
    return raw


def glob_escape(key: bytes) -> bytes:
    """The glob that matches ``key`` and nothing else."""
    return _GLOB_SPECIAL.sub(rb"\\\1", key)


def shape_of(key: bytes, delimiter: bytes = DEFAULT_DELIMITER) -> tuple[bytes, bool]:
    """The detected pattern of ``key``, and whether any segment became ``*`` (else it is the key, escaped)."""
    out: list[bytes] = []
    varied = False
    for segment in key.split(delimiter):
        opening = b"{" if segment.startswith(b"{") else b""
        core = segment[len(opening) :]
        closing = b"}" if core.endswith(b"}") else b""
        core = core[: len(core) - len(closing)]
        if core and _IDENTIFIER.fullmatch(core):
            out.append(opening + b"*" + closing)
            varied = True
        else:
            out.append(glob_escape(segment))
    return delimiter.join(out), varied


@dataclass(frozen=True)
class Grouping:
    """Puts keys in families: the configured ones (in order), then the detected shapes, then the key."""

    configured: tuple[Family, ...] = ()
    delimiter: bytes = DEFAULT_DELIMITER
    globs: tuple[Glob, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "globs", tuple(glob_compile(f.pattern) for f in self.configured))

    def family_of(self, key: bytes) -> Family:
        for family, glob in zip(self.configured, self.globs, strict=True):
            if glob.matches(key):
                return family
        return _detected(key, self.delimiter)


def _detected(key: bytes, delimiter: bytes) -> Family:
    """The family detected from the key's shape, or the key's own."""
    pattern, varied = shape_of(key, delimiter)
    if varied:
        return Family(pattern=pattern, name=display_text(pattern), kind="detected")
    return Family(pattern=pattern, name=display_text(key), kind="key")


@dataclass(frozen=True, slots=True)
class KeyFacts:
    """What a family sums of one stream: XLEN, its groups, their pending entries, its first and last IDs."""

    key: bytes
    length: int
    groups: int
    pending: int
    first_id: str | None
    last_id: str | None
    entries_added: int | None = None  # Redis 7's counter of entries ever added (None: older servers)


@dataclass(frozen=True, slots=True)
class FamilyRow:
    """A family's figures: its keys, their entries (the sum of XLEN), groups and pending entries, the
    depth of the dead-letter queues that feed back into its streams, the oldest first and newest last
    entry among them, and its busiest members (the longest, longest first)."""

    family: Family
    keys: int
    entries: int
    groups: int
    pending: int
    dlq_depth: int
    dlq_keys: int
    oldest_id: str | None
    newest_id: str | None
    busiest: tuple[tuple[bytes, int], ...]
    entries_added: int = 0  # the sum of the members' entries-added counters (where the server has them)


@dataclass
class _Sums:
    keys: int = 0
    entries: int = 0
    groups: int = 0
    pending: int = 0
    dlq_depth: int = 0
    dlq_keys: int = 0
    oldest: tuple[tuple[int, int], str] | None = None  # (ms, seq) and the ID as Redis gave it
    newest: tuple[tuple[int, int], str] | None = None
    top: list[tuple[int, _Inverse]] = field(default_factory=list)  # a min-heap: the busiest members so far
    entries_added: int = 0


class FamilyTally:
    """Sums :class:`KeyFacts` by family as they come (memory per family, not per key).

    ``dlq_origin`` names the stream a key is the dead-letter queue of (None: not a DLQ); ``top`` is how
    many busiest members a row keeps.
    """

    def __init__(self, grouping: Grouping, *, dlq_origin: Callable[[bytes], bytes | None], top: int = 5) -> None:
        self.grouping = grouping
        self.dlq_origin = dlq_origin
        self.top = top
        self._sums: dict[Family, _Sums] = {}

    def _of(self, family: Family) -> _Sums:
        sums = self._sums.get(family)
        if sums is None:
            sums = self._sums[family] = _Sums()
        return sums

    def add(self, facts: Iterable[KeyFacts]) -> None:
        for fact in facts:
            sums = self._of(self.grouping.family_of(fact.key))
            sums.keys += 1
            sums.entries += fact.length
            sums.groups += fact.groups
            sums.pending += fact.pending
            sums.entries_added += fact.entries_added or 0
            # Each ID is cut once, and a member that does not make the busiest is told by comparing plain
            # values: a snapshot tick sums up to 50,000 streams every ten seconds.
            if fact.first_id:
                first = id_order(fact.first_id)
                if sums.oldest is None or first < sums.oldest[0]:
                    sums.oldest = (first, fact.first_id)
            if fact.last_id:
                last = id_order(fact.last_id)
                if sums.newest is None or last > sums.newest[0]:
                    sums.newest = (last, fact.last_id)
            if self.top:
                # ties go to the key that sorts first: the heap keeps the largest (length, -key) items
                top = sums.top
                if len(top) < self.top:
                    heapq.heappush(top, (fact.length, _Inverse(fact.key)))
                else:
                    length, inverse = top[0]
                    if fact.length > length or (fact.length == length and fact.key < inverse.key):
                        heapq.heapreplace(top, (fact.length, _Inverse(fact.key)))
            origin = self.dlq_origin(fact.key)
            if origin is not None:
                fed = self._of(self.grouping.family_of(origin))
                fed.dlq_depth += fact.length
                fed.dlq_keys += 1

    def rows(self) -> list[FamilyRow]:
        """Every family seen (one fed only by DLQs included), the most entries first, then the most keys,
        then by pattern."""
        out = [
            FamilyRow(
                family=family, keys=s.keys, entries=s.entries, groups=s.groups, pending=s.pending,
                dlq_depth=s.dlq_depth, dlq_keys=s.dlq_keys,
                oldest_id=s.oldest[1] if s.oldest else None, newest_id=s.newest[1] if s.newest else None,
                busiest=tuple((inverse.key, length) for length, inverse in sorted(s.top, reverse=True)),
                entries_added=s.entries_added,
            )
            for family, s in self._sums.items()
        ]
        out.sort(key=lambda row: (-row.entries, -row.keys, row.family.pattern))
        return out


@functools.total_ordering
@dataclass(frozen=True, slots=True)
class _Inverse:
    """A key that orders backwards, so a min-heap of ``(length, _Inverse(key))`` drops the later key on a tie."""

    key: bytes

    def __lt__(self, other: object) -> bool:
        return isinstance(other, _Inverse) and self.key > other.key
