"""An entry ID's time: one helper (``eventbus.text.id_time``) for the console's pages and for search,
exact for the IDs Redis writes and clamped, not failing, for those datetime cannot hold."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from eventbus.search.query import compile_query
from eventbus.text import id_time

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_MS = 2**64 - 1  # the largest millisecond part an ID can have


@pytest.mark.parametrize("ms", [0, 1, 1_700_000_000_123, 253_402_300_799_999])
def test_the_time_of_a_millisecond(ms: int) -> None:
    assert id_time(ms) == EPOCH + timedelta(milliseconds=ms)


@pytest.mark.parametrize("ms", [253_402_300_800_000, 2**53, LAST_MS])
def test_past_the_year_9999_the_time_is_the_last_datetime(ms: int) -> None:
    assert id_time(ms) == datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


@dataclass(frozen=True)
class _Entry:
    id: str
    fields: tuple[tuple[bytes, bytes], ...] = ((b"k", b"v"),)


def test_search_reads_the_time_of_any_id() -> None:
    query = compile_query('time > timestamp("2100-01-01T00:00:00Z")')
    assert query.matches(_Entry(f"{LAST_MS}-{LAST_MS}"))
    assert not query.matches(_Entry("1700000000000-0"))
    assert compile_query('time == timestamp("2023-11-14T22:13:20.123Z")').matches(_Entry("1700000000123-5"))
