"""Staging rows in a temporary table (:func:`streams_app.metrics.bulk.temp_table_load`): every value comes
back as it went in, including text that a text-format ``COPY`` would have to escape (tabs, newlines,
backslashes, the ``\\N`` of its NULL), NULLs, non-ASCII text and the extremes of a bigint. Runs on SQLite
and, with ``make test-postgres``, on PostgreSQL (binary ``COPY``).
"""

from __future__ import annotations

from django.db import connection, transaction

from streams_app.metrics.bulk import temp_table_drop, temp_table_load

COLUMNS = [("name", "text"), ("n", "bigint"), ("flag", "boolean"), ("other", "text")]
AWKWARD = [
    "a\tb",
    "line\nbreak",
    "cr\rlf\r\n",
    "back\\slash",
    "\\N",
    "\\",
    "",
    "é ☃ \U0001f600",
    "x" * 10_000,
    "1700000000000-0",
    "18446744073709551615-18446744073709551615",
]


def test_every_value_comes_back_as_it_went_in(db) -> None:
    rows = [(text, i, i % 2 == 0, None if i % 3 else text[::-1]) for i, text in enumerate(AWKWARD)]
    rows += [(None, None, None, None), ("max", 2**63 - 1, True, "min"), ("min", -(2**63), False, "")]
    with transaction.atomic():
        temp_table_load(connection, "test_staged", COLUMNS, rows)
        temp_table_load(connection, "test_staged", COLUMNS, rows[:2])  # one left behind is replaced
        temp_table_load(connection, "test_staged", COLUMNS, rows)
        with connection.cursor() as cursor:
            cursor.execute('SELECT name, n, flag, other FROM "test_staged"')
            back = [
                (name, n, None if flag is None else bool(flag), other)
                for name, n, flag, other in cursor.fetchall()
            ]
        temp_table_drop(connection, "test_staged")
    assert sorted(back, key=repr) == sorted(rows, key=repr)
