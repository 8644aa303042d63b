"""Dead-letter queues: the list of a connection's DLQs and one DLQ's entries, each parsed by its convention.

A DLQ is a stream whose key follows a convention (:mod:`eventbus.conventions`); requeueing, deleting and
purging its entries are mutations and live in :mod:`..actions.dlq`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from eventbus.conventions import DLQ_SUFFIX, EVENTBUS_OR_STREAMS, OMNI_DLQ_PREFIX, DlqEntry

from ..actions._common import MAX_IDS, _key, _positive
from ..client import get_client
from ..commands import stream_read
from ..conventions import detect_dlq, dlq_patterns, dlq_source_streams, parse_dlq_entry
from ..errors import translated
from ..ids import parse_id
from ..parsers import parse_entry, reply_text
from ..types import EntryMask, StreamSummary
from .limits import MAX_PAGE
from .streams import streams_scan


@dataclass(frozen=True, slots=True)
class DlqSummary:
    """One dead-letter queue as the DLQ list shows it."""

    key: bytes
    convention: str
    depth: int
    last_id: str | None
    source_streams: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class DlqListing:
    dlqs: tuple[DlqSummary, ...]
    complete: bool  # False: the scan budget ran out, or some primaries of a cluster did not answer
    missed: tuple[str, ...] = ()  # primaries (host:port) whose DLQs could not be listed or read


#: Streams a DLQ's sample is read from to name its source streams and refine its convention.
DLQ_SAMPLE = 10


#: DLQs whose entries are sampled for the list; beyond these the key's own hint is all we show.
DLQ_SAMPLED_MAX = 100


def dlq_list(
    conn: str, *, mask_for: Callable[[bytes], EntryMask | None], budget: int | None = None
) -> DlqListing:
    """The dead-letter queues of ``conn``: streams whose key follows a DLQ convention (docs/architecture.md#conventions-of-other-buses).

    Scanned with one ``SCAN ... TYPE stream`` per convention's glob (``*:dlq``, ``omni-dlq:*`` and
    each configured pattern), so a server with millions of other keys costs at most ``budget``
    keys looked at per glob, never ``KEYS``. The newest few entries of each DLQ name the streams it
    feeds back into and tell ``eventbus`` from ``streams`` entries under a ``{stream}:dlq`` key.
    """
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    globs = [b"*" + DLQ_SUFFIX, OMNI_DLQ_PREFIX + b"*"]
    globs += [pattern.match for pattern in dlq_patterns() if pattern.match not in globs]
    found: dict[bytes, StreamSummary] = {}
    complete = True
    missed: dict[str, None] = {}
    for glob in globs:
        cursor, scanned = 0, 0
        while True:
            page = streams_scan(conn, match=glob, cursor=cursor, count=MAX_PAGE, budget=budget)
            for summary in page.streams:
                if detect_dlq(summary.key) is not None:
                    found.setdefault(summary.key, summary)
            cursor, scanned = page.next_cursor, scanned + page.scanned
            missed.update(dict.fromkeys(page.missed))
            if cursor == 0:
                break
            if scanned >= budget:
                complete = False
                break
    out = []
    for index, key in enumerate(sorted(found)):
        summary = found[key]
        kind = detect_dlq(key)
        assert kind is not None
        sample: list[DlqEntry] = []
        if index < DLQ_SAMPLED_MAX and summary.length:
            sample, _ = dlq_entries(conn, key, count=DLQ_SAMPLE, mask=mask_for(key))
        out.append(
            DlqSummary(
                key=key,
                convention=dlq_convention_of(kind.convention, sample),
                depth=summary.length,
                last_id=summary.last_id,
                source_streams=tuple(dlq_source_streams(key, sample)),
            )
        )
    return DlqListing(dlqs=tuple(out), complete=complete and not missed, missed=tuple(missed))


def dlq_convention_of(key_convention: str, sample: Sequence[DlqEntry]) -> str:
    """``eventbus-or-streams`` becomes ``eventbus`` or ``streams`` when the sampled entries agree."""
    if key_convention != EVENTBUS_OR_STREAMS:
        return key_convention
    seen = {entry.convention for entry in sample}
    return seen.pop() if len(seen) == 1 else key_convention


def dlq_entries(
    conn: str,
    dlq_key: bytes,
    *,
    after: str | None = None,
    before: str | None = None,
    count: int = 50,
    error_contains: str | None = None,
    where: Callable[[DlqEntry], bool] | None = None,
    scan_limit: int = 5000,
    mask: EntryMask | None,
) -> tuple[list[DlqEntry], str | None]:
    """DLQ entries newest first, between the exclusive bounds ``after`` and ``before``, parsed by convention.

    Returns the page and the cursor to pass as ``before`` for the next (older) page, or None when the
    range is exhausted. With ``error_contains`` only entries whose error text contains it (case
    insensitive) are kept, and at most ``scan_limit`` entries are read per call: the page may then be
    short (even empty) with a cursor to continue the search from. With ``where`` only the parsed entries
    it accepts are kept, scanned the same way: the triage's filters by error signature, group and origin
    (:class:`streams_app.triage.counts.TriageFilter`, so the signature rule stays above this layer).
    ``mask`` is what the reader may see of a raw entry (:meth:`streams_app.masking.apply.Masker.entry`): it is applied before
    the parse and the filters, so a masked error is neither shown nor found by its text.
    """
    _key(dlq_key, "DLQ key")
    count = _positive(count, "count", cap=MAX_IDS)
    scan_limit = _positive(scan_limit, "scan_limit")
    upper = "(" + str(parse_id(before, allow_bare=False, what="before")) if before else "+"
    lower = "(" + str(parse_id(after, allow_bare=False, what="after")) if after else "-"
    needle = error_contains.casefold() if error_contains else None
    filtered = needle is not None or where is not None
    client = get_client(conn)
    page: list[DlqEntry] = []
    scanned = 0
    with translated(conn):
        while True:
            step = count + 1 if not filtered else min(max(count, 200), scan_limit - scanned)
            raw = stream_read(conn, client, dlq_key, "XREVRANGE", dlq_key, upper, lower, "COUNT", step)
            if not filtered:
                entries = [_parsed(dlq_key, item, mask) for item in raw[:count]]
                return entries, entries[-1].id if len(raw) > count else None
            for item in raw:
                scanned += 1
                entry = _parsed(dlq_key, item, mask)
                if _error_matches(entry, needle, where):
                    page.append(entry)
                    if len(page) == count:
                        return page, entry.id
            if len(raw) < step:
                return page, None
            upper = "(" + reply_text(raw[-1][0])
            if scanned >= scan_limit:
                return page, reply_text(raw[-1][0])


def _error_matches(entry: DlqEntry, needle: str | None, where: Callable[[DlqEntry], bool] | None) -> bool:
    if needle is not None and not (entry.error and needle in entry.error.casefold()):
        return False
    return where is None or where(entry)


def _parsed(dlq_key: bytes, raw: Sequence[Any], mask: EntryMask | None) -> DlqEntry:
    entry = parse_entry(raw) if mask is None else mask(parse_entry(raw))
    return parse_dlq_entry(dlq_key, entry.id, entry.fields)
