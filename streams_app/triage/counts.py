"""Counts over a DLQ by error signature, group and origin stream, and the filter behind each count.

Bounded like every user-driven read: the newest ``limit`` dead letters are read (pages of
:data:`PAGE` by :func:`streams_app.redis_ops.reads.dlq.dlq_entries`, newest first, parsed by their
convention and masked as the reader sees them), and the answer says how many were looked at of the
DLQ's length and where to continue (``next``, an exclusive upper bound: the next window is the
``limit`` dead letters older than it). Newest first because the newest failures are an incident's.

What is counted is what the viewer may see: the mask is applied before the parse (a rule on
``dlq_error`` makes the error ``••••``, counted as the signature ``••••``; a rule on ``dlq_group``
hides the group the same way), so no label carries a masked value, and the filtered list and the
requeue job, which apply the same mask before the same filter, select exactly the entries counted.
A rule that removes the error (``remove``) leaves no trace in the shown dead letter, which would then
read as one recording no error: :class:`ShownDeadLetters` keeps, from the masking, which dead letters
recorded an error the rules hid, and counts those under ``••••`` too (:data:`MASKED`, what ``/reports/``
shows for an error a rule hides), while one recording none stays under
:data:`~pipeline.signatures.NO_ERROR`.
The counting is plain ``collections.Counter`` work: no library counts parsed dead letters for us.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from eventbus.conventions import DlqEntry
from eventbus.text import display_text
from pipeline.signatures import normalize_error
from streams_app.masking.apply import MASKED, Masker
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import dlq as dlq_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.redis_ops.types import Entry, EntryMask

#: Dead letters read per XREVRANGE (the access layer's largest page).
PAGE = 1000
#: The most a caller may ask one count to read (the setting is the default, at most this).
MAX_LIMIT = 200_000
#: How the page shows a group or an origin the dead letter does not record.
NO_GROUP = "(no group recorded)"
NO_ORIGIN = "(no origin recorded)"


@functools.lru_cache(maxsize=4096)
def signature_of(error: str | None) -> str:
    """:func:`pipeline.signatures.normalize_error`, cached: one DLQ holds few distinct errors."""
    return normalize_error(error)


def origin_text(entry: DlqEntry) -> str | None:
    return display_text(entry.original_stream) if entry.original_stream else None


class ShownDeadLetters:
    """A DLQ's dead letters as one reader sees them, and the signature each is counted and filtered under.

    ``mask`` is what :func:`~streams_app.redis_ops.reads.dlq.dlq_entries` applies to each raw dead letter
    (None when no rule applies): :meth:`Masker.dead_letter`, which also says whether the rules may hide
    an error the dead letter records, from the parse the masking makes anyway (no second read, nothing
    of the error's text). :meth:`signature` then counts a dead letter that shows no error under
    :data:`MASKED` when it recorded one (a ``remove`` rule left it out: ``/reports/`` shows such an
    error as :data:`MASKED` too), under :data:`~pipeline.signatures.NO_ERROR` when it recorded none.
    Rules can differ per origin stream: the masker finds each dead letter's (cached per origin). The
    IDs kept are those of the dead letters masked since :meth:`forget`: a caller reading page after
    page forgets each page once it is counted.
    """

    def __init__(self, masker: Masker | None) -> None:
        self._hid: set[str] = set()
        self.mask: EntryMask | None = self._masking(masker) if masker is not None and masker.active else None

    def _masking(self, masker: Masker) -> EntryMask:
        def mask(entry: Entry) -> Entry:
            shown, hiding = masker.dead_letter(entry)
            if hiding:
                self._hid.add(entry.id)
            return shown

        return mask

    def signature(self, entry: DlqEntry) -> str:
        """The error signature of a dead letter masked by :attr:`mask`."""
        if not entry.error and entry.id in self._hid:
            return MASKED  # it records an error, and a rule left it out
        return signature_of(entry.error)

    def where(self, where: TriageFilter | None) -> Callable[[DlqEntry], bool] | None:
        """``where`` as the predicate of a ``dlq_entries`` read masked by :attr:`mask` (None: no filter)."""
        return functools.partial(where.matches, shown=self) if where else None

    def forget(self) -> None:
        self._hid.clear()


@dataclass(frozen=True, slots=True)
class TriageFilter:
    """The dead letters one count stands for: all the given parts must hold. ``group``/``origin`` are
    the text the page shows; ``no_group``/``no_origin`` select the dead letters that record none."""

    signature: str | None = None
    group: str | None = None
    origin: str | None = None
    no_group: bool = False
    no_origin: bool = False

    def __post_init__(self) -> None:
        if self.group is not None and self.no_group:
            raise InvalidArgument("Give either group or no_group, not both.")
        if self.origin is not None and self.no_origin:
            raise InvalidArgument("Give either origin or no_origin, not both.")

    def __bool__(self) -> bool:
        return any(v not in (None, False) for v in self.params().values())

    def matches(self, entry: DlqEntry, *, shown: ShownDeadLetters) -> bool:
        """Whether a dead letter masked by ``shown.mask`` is one of this filter's."""
        if self.signature is not None and shown.signature(entry) != self.signature:
            return False
        if (self.no_group and entry.group is not None) or (self.group is not None and entry.group != self.group):
            return False
        if self.no_origin or self.origin is not None:
            return origin_text(entry) == self.origin  # None == None for no_origin
        return True

    def params(self) -> dict[str, Any]:
        """The parts given, as the list's query string, the API's body and the audit row name them."""
        out: dict[str, Any] = {}
        for name in ("signature", "group", "origin"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        for name in ("no_group", "no_origin"):
            if getattr(self, name):
                out[name] = True
        return out

    def query(self) -> dict[str, str]:
        """:meth:`params` as query-string values (``no_group=1``)."""
        return {k: "1" if v is True else v for k, v in self.params().items()}

    @classmethod
    def from_params(cls, data: Mapping[str, Any]) -> TriageFilter:
        """From validated input (a form's or a body's cleaned data, a job's parameters): empty text is
        no filter on that part."""
        return cls(
            signature=data.get("signature") or None,
            group=data.get("group") or None,
            origin=data.get("origin") or None,
            no_group=bool(data.get("no_group")),
            no_origin=bool(data.get("no_origin")),
        )


@dataclass(frozen=True, slots=True)
class Bucket:
    """One count: ``value`` as the page shows it (None: not recorded), and the filter it stands for."""

    value: str | None
    count: int
    filter: TriageFilter


@dataclass(frozen=True, slots=True)
class TriageCounts:
    """Counts over the ``looked`` newest dead letters older than ``before`` (None: the newest) of a DLQ
    ``depth`` long. ``next``: pass it as ``before`` to count the next older window (None: none left).
    ``newest``: the newest dead letter looked at, the ``up_to`` of "requeue these"."""

    signatures: tuple[Bucket, ...]
    groups: tuple[Bucket, ...]
    origins: tuple[Bucket, ...]
    looked: int
    depth: int
    limit: int
    before: str | None
    next: str | None
    newest: str | None
    oldest: str | None

    @property
    def complete(self) -> bool:
        """Every dead letter of the DLQ was looked at."""
        return self.before is None and self.next is None


def triage_limit(limit: int | None = None) -> int:
    value = limit if limit is not None else settings.BUSCONSOLE_DLQ_TRIAGE_LIMIT
    if not 1 <= value <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}.")
    return value


def triage_count(
    conn: str,
    key: bytes,
    *,
    masker: Masker | None,
    before: str | None = None,
    limit: int | None = None,
    where: TriageFilter | None = None,
) -> TriageCounts:
    """Count the newest ``limit`` dead letters older than ``before`` (see the module docstring); with
    ``where``, only those it matches are counted (what "requeue these" would move). ``masker``: how the
    reader sees the dead letters (None: no rule applies)."""
    limit = triage_limit(limit)
    depth = stream_reads.stream_info(conn, key).length  # a missing DLQ is a 404 here
    by_signature: Counter[str] = Counter()
    by_group: Counter[str | None] = Counter()
    by_origin: Counter[str | None] = Counter()
    looked, cursor, newest, oldest = 0, before, None, None
    shown = ShownDeadLetters(masker)
    while looked < limit:
        count = min(PAGE, limit - looked)
        entries, cursor = dlq_reads.dlq_entries(conn, key, before=cursor, count=count, mask=shown.mask)
        for entry in entries:
            if where is None or where.matches(entry, shown=shown):
                by_signature[shown.signature(entry)] += 1
                by_group[entry.group] += 1
                by_origin[origin_text(entry)] += 1
        shown.forget()
        looked += len(entries)
        if entries:
            newest = newest or entries[0].id
            oldest = entries[-1].id
        if cursor is None:
            break
    return TriageCounts(
        signatures=_buckets(by_signature, lambda v: TriageFilter(signature=v)),
        groups=_buckets(by_group, lambda v: TriageFilter(no_group=True) if v is None else TriageFilter(group=v)),
        origins=_buckets(by_origin, lambda v: TriageFilter(no_origin=True) if v is None else TriageFilter(origin=v)),
        looked=looked,
        depth=depth,
        limit=limit,
        before=before,
        next=cursor,
        newest=newest,
        oldest=oldest,
    )


def _buckets(counts: Counter, make: Callable[[Any], TriageFilter]) -> tuple[Bucket, ...]:
    """Largest first, ties by value (the not-recorded bucket last among equals)."""
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0] is None, item[0] or ""))
    return tuple(Bucket(value=value, count=count, filter=make(value)) for value, count in ordered)
