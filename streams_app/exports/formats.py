"""How one entry is written in each export format (see the package docstring for the choices, and why).

Each format is an :class:`Encoder`: ``start`` returns the file's head (given the first page read, from
which CSV takes its columns), ``page`` the bytes of a page of entries, ``finish`` the file's tail. The
streamed download and the background job both drive the same encoders page by page, so a job's file
and a download of the same range hold the same rows, and neither holds more than one page in memory.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from eventbus.decoding import PREVIEW_LIMIT, decoded_value
from eventbus.text import display_text
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.types import Entry

FORMATS = ("ndjson", "csv", "parquet")
CONTENT_TYPES = {
    "ndjson": "application/x-ndjson",
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
}
#: CSV columns named after fields, at most: names past these go to the ``other_fields`` JSON column.
MAX_COLUMNS = 200
CSV_FIXED = ("id", "time")
CSV_OTHER = "other_fields"
#: What a field column's name starts with: the entry's own columns (``id``, ``time``, ``other_fields``)
#: do not, so no field name, ``id`` or ``time`` or ``""`` included, can take an entry column's place.
CSV_FIELD_PREFIX = "fields."
#: What a spreadsheet reads as the start of a formula in a cell (OWASP, "CSV Injection").
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

PARQUET_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field(
            "fields", pa.list_(pa.struct([("name", pa.string()), ("value", pa.string())])), nullable=False
        ),
        pa.field("fields_raw", pa.list_(pa.struct([("name", pa.binary()), ("value", pa.binary())]))),
    ]
)


# ------------------------------------------------------------------------------------ one entry


def entry_time(entry_id: str) -> datetime:
    return parse_id(entry_id).time


def time_text(entry_id: str) -> str:
    """The ID's millisecond time in ISO 8601, UTC, to the millisecond (``2026-11-24T07:14:11.123Z``)."""
    return entry_time(entry_id).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def needs_raw(entry: Entry) -> bool:
    """Whether the texts of ``entry`` lose something: a name or value not UTF-8, or a name twice."""
    names = [name for name, _ in entry.fields]
    if len(set(names)) != len(names):
        return True
    return not all(_utf8(name) and _utf8(value) for name, value in entry.fields)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def ndjson_record(entry: Entry) -> dict[str, object]:
    """One NDJSON object: ``id``, ``time``, ``fields`` as texts, ``decoded`` JSON payloads and, when
    the texts lose something, ``raw``: every ``[name, value]`` pair in base64, in Redis's order."""
    record: dict[str, object] = {
        "id": entry.id,
        "time": time_text(entry.id),
        "fields": {display_text(name): display_text(value) for name, value in entry.fields},
    }
    decoded = {}
    for name, value in entry.fields:
        # Only values that look like a JSON object or array go to the one decoder: cheap to skip the rest.
        # The value without its display text (``decoded_value``), whose indented dump cost more than the
        # parse; a value past the preview limit is not whole JSON to the decoder, so it is not decoded.
        if value[:1] in (b"{", b"[") or value.lstrip()[:1] in (b"{", b"["):
            kind, found = decoded_value(value)
            if kind == "json" and len(value) <= PREVIEW_LIMIT:
                decoded[display_text(name)] = found
    if decoded:
        record["decoded"] = decoded
    if needs_raw(entry):
        record["raw"] = [[_b64(name), _b64(value)] for name, value in entry.fields]
    return record


def columns_of(entries: Sequence[Entry]) -> list[bytes]:
    """The CSV's field columns: the names of ``entries`` (the first page read) in order of first
    appearance, at most :data:`MAX_COLUMNS`.

    Two names that differ as bytes but read alike (``b"\\xff"`` and the byte 0xFF) would make two
    columns of one name: the later one gets none, and its fields go to ``other_fields``.
    """
    seen: dict[bytes, None] = {}
    texts: set[str] = set()
    for entry in entries:
        for name, _ in entry.fields:
            if name in seen or len(seen) >= MAX_COLUMNS:
                continue
            text = display_text(name)
            if text not in texts:
                seen[name] = None
                texts.add(text)
    return list(seen)


def csv_header(columns: Sequence[bytes]) -> list[str]:
    return [*CSV_FIXED, *(csv_cell(CSV_FIELD_PREFIX + display_text(name)) for name in columns), CSV_OTHER]


def csv_cell(text: str) -> str:
    """``text`` as a spreadsheet shows it rather than evaluates it: a ``'`` before a formula's start.

    The quote also goes before a text whose leading quotes are followed by a trigger (``'=x`` is
    written ``''=x``), so the way back is exact: a reader strips one leading ``'`` from a cell whose
    text after its leading quotes starts with one of :data:`FORMULA_TRIGGERS`, and nothing else.
    """
    return "'" + text if text.lstrip("'").startswith(FORMULA_TRIGGERS) else text


def csv_row(entry: Entry, columns: Sequence[bytes]) -> list[str]:
    """One CSV row: id, time, one cell per column (the first value of that name, through
    :func:`csv_cell`), and the fields the columns do not hold (other names, repeated names) as a JSON
    list of ``[name, value]``. An ID, a time and a JSON list never start with a formula's character."""
    slots = {name: i for i, name in enumerate(columns)}
    cells = [""] * len(columns)
    filled = [False] * len(columns)
    other: list[list[str]] = []
    for name, value in entry.fields:
        i = slots.get(name)
        if i is not None and not filled[i]:
            cells[i], filled[i] = csv_cell(display_text(value)), True
        else:
            other.append([display_text(name), display_text(value)])
    return [entry.id, time_text(entry.id), *cells, json.dumps(other, ensure_ascii=False) if other else ""]


def arrow_table(entries: Sequence[Entry]) -> pa.Table:
    """A page of entries as one Arrow table of :data:`PARQUET_SCHEMA` (one Parquet row group)."""
    return pa.table(
        {
            "id": [e.id for e in entries],
            "time": [entry_time(e.id) for e in entries],
            "fields": [
                [{"name": display_text(n), "value": display_text(v)} for n, v in e.fields] for e in entries
            ],
            "fields_raw": [
                [{"name": n, "value": v} for n, v in e.fields] if needs_raw(e) else None for e in entries
            ],
        },
        schema=PARQUET_SCHEMA,
    )


# ------------------------------------------------------------------------------------- encoders


class Encoder(Protocol):
    def start(self) -> bytes: ...
    def page(self, entries: Sequence[Entry]) -> bytes: ...
    def finish(self) -> bytes: ...


class NdjsonEncoder:
    def start(self) -> bytes:
        return b""

    def page(self, entries: Sequence[Entry]) -> bytes:
        return b"".join(self._line(e) for e in entries)

    @staticmethod
    def _line(entry: Entry) -> bytes:
        record = ndjson_record(entry)
        try:
            text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        except RecursionError:  # a payload nested as deep as the decoder goes: in ``fields`` and ``raw`` only
            record.pop("decoded", None)
            text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        return text.encode() + b"\n"

    def finish(self) -> bytes:
        return b""


class CsvEncoder:
    """RFC 4180 CSV (CRLF line ends, UTF-8 without BOM, every cell quoted) with the columns fixed when it
    starts."""

    def __init__(self, columns: Sequence[bytes], *, header: bool = True) -> None:
        self.columns = list(columns)
        self.header = header

    def _lines(self, rows: list[list[str]]) -> bytes:
        # Every cell quoted (OWASP): a separator or quote inside a value never starts a cell of its own.
        out = io.StringIO()
        csv.writer(out, quoting=csv.QUOTE_ALL).writerows(rows)
        return out.getvalue().encode()

    def start(self) -> bytes:
        return self._lines([csv_header(self.columns)]) if self.header else b""

    def page(self, entries: Sequence[Entry]) -> bytes:
        return self._lines([csv_row(e, self.columns) for e in entries]) if entries else b""

    def finish(self) -> bytes:
        return b""


class _Drain(io.RawIOBase):
    """A write-only file that hands back what was written since the last :meth:`take`."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._pos = 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        self._pos += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._pos

    def take(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


class ParquetEncoder:
    """Parquet, one row group per page, its bytes handed on as each row group is written."""

    def __init__(self) -> None:
        self._sink = _Drain()
        self._writer = pq.ParquetWriter(self._sink, PARQUET_SCHEMA, compression="zstd")

    def start(self) -> bytes:
        return self._sink.take()

    def page(self, entries: Sequence[Entry]) -> bytes:
        if entries:
            self._writer.write_table(arrow_table(entries))
        return self._sink.take()

    def finish(self) -> bytes:
        self._writer.close()
        return self._sink.take()


def encoder_for(fmt: str, first_page: Sequence[Entry], *, header: bool = True) -> Encoder:
    """The encoder of ``fmt``; CSV's columns come from ``first_page`` (the first page read)."""
    if fmt == "ndjson":
        return NdjsonEncoder()
    if fmt == "csv":
        return CsvEncoder(columns_of(first_page), header=header)
    if fmt == "parquet":
        return ParquetEncoder()
    raise ValueError(f"unknown export format {fmt!r}")
