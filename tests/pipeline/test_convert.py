"""Cutting converted rows into the lake's day partitions (``pipeline.convert.split_by_day``), against a
plain-Python grouping of the same rows."""

from __future__ import annotations

from datetime import date, timedelta

import pyarrow as pa
import pytest

from pipeline import convert

DAY0 = date(2026, 1, 1)


def table_of(days: list[int]) -> pa.Table:
    """Rows numbered in order, each on DAY0 + its day offset, in two chunks (as the exporter's replies)."""
    rows = pa.table({"n": pa.array(range(len(days)), pa.int64()),
                     "date": pa.array([DAY0 + timedelta(days=d) for d in days], pa.date32())})
    half = len(days) // 2
    return pa.concat_tables([rows.slice(0, half), rows.slice(half)])


def expected(days: list[int]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for n, d in enumerate(days):
        out.setdefault((DAY0 + timedelta(days=d)).isoformat(), []).append(n)
    return list(out.items())


@pytest.mark.parametrize(
    "days",
    [
        [0, 0, 0, 0],  # one day
        [0, 0, 1, 1, 1, 3, 3, 9],  # ordered, with gaps between days
        [0, 1, 2, 3, 4, 5, 6, 7],  # a day a row
        [2, 2, 0, 0, 1, 2, 0],  # out of order: a day's rows are not together
    ],
)
def test_each_day_gets_exactly_its_rows_in_order(days: list[int]) -> None:
    parts = convert.split_by_day(table_of(days))
    assert [(day, part.column("n").to_pylist()) for day, part in parts] == expected(days)
    assert all(set(part.column("date").to_pylist()) == {date.fromisoformat(day)} for day, part in parts)


def test_months_are_cut_from_ordered_days() -> None:
    table = pa.table({"n": [0, 1, 2, 3],
                      "date": pa.array([date(2026, 1, 30), date(2026, 1, 31), date(2026, 2, 1), date(2026, 3, 5)])})
    parts = convert.split_by_month(table)
    assert [(day, part.column("n").to_pylist()) for day, part in parts] == [
        ("2026-01-01", [0, 1]), ("2026-02-01", [2]), ("2026-03-01", [3]),
    ]


def test_no_rows_no_parts() -> None:
    assert convert.split_by_day(table_of([])) == []
