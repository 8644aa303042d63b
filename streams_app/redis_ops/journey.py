"""The Redis side of an event's journey: :mod:`eventbus.journey`'s bounded reads, on a console connection.

The reads themselves (what ties an event's entries together, and the bound of each read) are the bus's
one Django-free copy, which ``python -m eventbus journey`` runs too; this module hands them the console's
client (one server, Sentinel or a cluster: every command names one key, so a cluster client routes it),
its DLQ conventions, and the reader's masks: every entry the journey reads, of every key (the stream, its
DLQs, its metric events, its retries' members), is masked by that key's mask before anything looks at it,
so a masked value is neither shown nor matched (``mask`` is required, as for every read of entry bytes).
"""

from __future__ import annotations

from collections.abc import Callable

from eventbus import journey as core

from .client import get_client
from .conventions import dlq_patterns
from .errors import InvalidArgument, translated
from .types import Entry, EntryMask

KeyMask = Callable[[bytes], EntryMask | None]
"""The mask of each key a journey reads (None: no rule applies there)."""


def journey_read(
    conn: str,
    start: core.Start,
    *,
    mask: KeyMask | None,
    query: object = None,
    cursor: str | None = None,
    budget: int = core.BUDGET,
    probe: core.Probe | None = None,
    replays: core.ReplayProbe | None = None,
    sources: core.SourceProbe | None = None,
) -> core.Journey:
    """The journey of the event ``start`` names (:func:`eventbus.journey.trace`), each entry as ``mask``
    shows its key; a start that names none (a bad cursor, a key that is not a stream) is InvalidArgument."""
    masks: dict[bytes, EntryMask | None] = {}

    def shown(key: bytes, entry_id: str, fields: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if key not in masks:
            masks[key] = mask(key) if mask is not None else None
        entry_mask = masks[key]
        if entry_mask is None:
            return fields
        return list(entry_mask(Entry(id=entry_id, fields=tuple(fields))).fields)

    with translated(conn):
        try:
            found = core.trace(get_client(conn), start, patterns=dlq_patterns(), shown=shown, query=query,
                               cursor=cursor, budget=budget, probe=probe, replays=replays, sources=sources)  # fmt: skip
        except core.JourneyError as exc:
            raise InvalidArgument(str(exc), conn=conn) from exc
    return core.journey_of(found)
