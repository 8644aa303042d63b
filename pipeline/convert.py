"""Raw XRANGE replies to Arrow tables of the lake's schemas, vectorized.

The exporter moves millions of entries, so Python touches each entry only to hand hiredis's nested
lists to Arrow (two list comprehensions); splitting IDs, pairing names with values, finding the event
type, measuring payloads and typing the metric columns are Arrow compute kernels over whole batches.
Everything here is pure: replies in, tables out, no Redis and no Django.

A reply is what Redis sends for ``XRANGE`` with no client-side parsing: a list of
``[id, [name, value, name, value, ...]]`` with bytes everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import lake

#: Fields that name an entry's event type, in order of preference.
TYPE_FIELDS = (b"type", b"event_type", b"event")
_DAY_MS = 86_400_000

Reply = Sequence[Sequence]


class _Pairs:
    """An XRANGE reply's IDs and fields as Arrow arrays: per entry, its names and its values."""

    def __init__(self, reply: Reply) -> None:
        self.n = len(reply)
        self.ids = text(pa.array([item[0] for item in reply], pa.binary()))
        flat = pa.array([item[1] for item in reply], pa.list_(pa.binary()))
        self.lists = flat
        # Redis sends every entry's fields as name, value, name, value...: the names are the even
        # items of the flattened lists and the values the odd ones, each entry's pairs starting at half
        # its list's offset. Two takes by a cached index are cheaper than list_slice
        # (docs/performance.md#figures-behind-the-design).
        items = flat.flatten()
        even = _arange_even(len(items) // 2)
        self.names_flat = items.take(even)
        self.values_flat = items.take(pc.add(even, 1))
        self.names = pa.ListArray.from_arrays(pc.divide(flat.offsets, 2), self.names_flat)
        parts = pc.split_pattern(self.ids, "-", max_splits=1)
        self.ms = pc.cast(pc.list_element(parts, 0), pa.int64())
        self.seq = pc.cast(pc.list_element(parts, 1), pa.int64())

    def field(self, name: bytes) -> pa.Array:
        """The first value of field ``name`` in each entry (a repeated name keeps its first), else null."""
        hits = pc.indices_nonzero(pc.equal(self.names_flat, pa.scalar(name, pa.binary())))
        if len(hits) == 0:
            return pa.nulls(self.n, pa.binary())
        owners = pc.list_parent_indices(self.names).take(hits)
        if len(owners) > 1:
            # hits are in order, so a repeat of an entry's field follows its first occurrence
            previous = pa.concat_arrays([pa.array([-1], pa.int64()), owners.slice(0, len(owners) - 1)])
            first = pc.not_equal(owners, previous)
            hits, owners = hits.filter(first), owners.filter(first)
        has = pc.is_in(_arange(self.n), value_set=owners)
        pick = pc.replace_with_mask(pa.nulls(self.n, pa.uint64()), has, pc.cast(hits, pa.uint64()))
        return self.values_flat.take(pick)

    def payload_size(self) -> pa.Array:
        """Bytes of all names and values of each entry."""
        lengths = pc.cast(pc.binary_length(self.lists.flatten()), pa.int64())
        running = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(lengths)])
        offsets = self.lists.offsets
        return pc.subtract(running.take(offsets.slice(1)), running.take(offsets.slice(0, self.n)))

    def fields(self) -> pa.Array:
        pairs = pa.StructArray.from_arrays([self.names_flat, self.values_flat], fields=list(lake.FIELD_TYPE))
        return pa.ListArray.from_arrays(self.names.offsets, pairs, type=lake.ENTRY_SCHEMA.field("fields").type)

    def times(self) -> tuple[pa.Array, pa.Array]:
        """The ID times as UTC timestamps, and their UTC dates."""
        days = pc.cast(pc.divide(self.ms, _DAY_MS), pa.int32())
        return self.ms.cast(lake.TS), days.view(pa.date32())


_ARANGE = pa.array([], pa.int64())


def _arange(n: int) -> pa.Array:
    """0..n-1 as int64, sliced from a cached array that grows on demand."""
    global _ARANGE
    if len(_ARANGE) < n:
        _ARANGE = pa.array(range(max(n, 2 * len(_ARANGE))), pa.int64())
    return _ARANGE.slice(0, n)


_EVEN = pa.array([], pa.int64())


def _arange_even(n: int) -> pa.Array:
    """0, 2, .., 2(n-1) as int64, sliced from a cached array that grows on demand."""
    global _EVEN
    if len(_EVEN) < n:
        _EVEN = pa.array(range(0, 2 * max(n, 2 * len(_EVEN)), 2), pa.int64())
    return _EVEN.slice(0, n)


def text(values: pa.Array) -> pa.Array:
    """Binary values as strings: UTF-8 as is, anything else decoded with U+FFFD for bad bytes."""
    try:
        return pc.cast(values, pa.string())
    except pa.ArrowInvalid:
        encoded = pc.dictionary_encode(values)
        words = [None if v is None else v.decode("utf-8", "replace") for v in encoded.dictionary.to_pylist()]
        return pa.DictionaryArray.from_arrays(encoded.indices, pa.array(words, pa.string())).cast(pa.string())


def _number(values: pa.Array, kind: pa.DataType) -> pa.Array:
    """Text numbers to ``kind``; a value that does not parse becomes null (one at a time, only then)."""
    strings = text(values)
    try:
        return pc.cast(strings, kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        parse = int if pa.types.is_integer(kind) else float
        out = []
        for value in strings.to_pylist():
            try:
                out.append(None if value is None else parse(value.strip()))
            except ValueError:
                out.append(None)
        return pa.array(out, kind)


def entries_table(conn: str, key: bytes, key_text: str, reply: Reply) -> pa.Table:
    """One XRANGE reply of stream ``key`` as rows of :data:`lake.ENTRY_SCHEMA`."""
    p = _Pairs(reply)
    event_type = pc.coalesce(*(p.field(name) for name in TYPE_FIELDS))
    ts, day = p.times()
    return pa.Table.from_arrays(
        [
            pa.repeat(pa.scalar(conn, pa.string()), p.n),
            pa.repeat(pa.scalar(key, pa.binary()), p.n),
            pa.repeat(pa.scalar(key_text, pa.string()), p.n),
            p.ids,
            p.ms,
            p.seq,
            ts,
            day,
            text(event_type),
            p.fields(),
            p.payload_size(),
        ],
        schema=lake.ENTRY_SCHEMA,
    )


def metrics_table(conn: str, reply: Reply) -> pa.Table:
    """One XRANGE reply of ``eventbus:metrics`` as rows of :data:`lake.METRIC_SCHEMA`."""
    p = _Pairs(reply)
    ts, day = p.times()

    def txt(name: bytes) -> pa.Array:
        return text(p.field(name))

    return pa.Table.from_arrays(
        [
            pa.repeat(pa.scalar(conn, pa.string()), p.n),
            p.ids,
            p.ms,
            ts,
            day,
            txt(b"event"),
            txt(b"stream"),
            txt(b"group"),
            txt(b"type"),
            _number(p.field(b"count"), pa.int64()),
            _number(p.field(b"duration_ms"), pa.float64()),
            _number(p.field(b"max_ms"), pa.float64()),
            txt(b"consumer"),
            _number(p.field(b"ts"), pa.int64()),
            txt(b"entry_id"),
            txt(b"event_id"),
            txt(b"error"),
        ],
        schema=lake.METRIC_SCHEMA,
    )


def split_by_partition(dataset: str, table: pa.Table) -> list[tuple[str, pa.Table]]:
    """A table of ID-ordered rows of ``dataset`` cut into one table per partition directory, in order:
    per UTC day, or per month for the datasets the layout keeps by month (:data:`pipeline.lake.MONTHLY`)."""
    return split_by_month(table) if dataset in lake.MONTHLY else split_by_day(table)


def split_by_month(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """A table of ID-ordered rows cut into one table per UTC month, each named by its first day."""
    return split_by_day(table, pc.floor_temporal(table.column("date"), unit="month"))


def split_by_day(table: pa.Table, days: pa.ChunkedArray | None = None) -> list[tuple[str, pa.Table]]:
    """A table of ID-ordered rows cut into one table per UTC day (``date`` column, or ``days``), in order.

    The days of ordered rows never go back, so each day's rows are a slice of the table (no copy: a
    filter per day copied every chunk of the export once more, a measurable share of its CPU:
    docs/performance.md#figures-behind-the-design).
    Days out of order are filtered instead, one table per day all the same.
    """
    days = (table.column("date") if days is None else days).combine_chunks()
    if len(days) == 0:
        return []
    first, last = days[0].as_py(), days[-1].as_py()
    if first == last:
        return [(first.isoformat(), table)]
    if pc.all(pc.less_equal(days.slice(0, len(days) - 1), days.slice(1))).as_py():
        counts = pc.value_counts(days)
        out, start = [], 0
        for day, n in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True):
            out.append((day.isoformat(), table.slice(start, n)))
            start += n
        return out
    return [
        (day.isoformat(), table.filter(pc.equal(days, pa.scalar(day, pa.date32()))))
        for day in pc.unique(days).to_pylist()
    ]
