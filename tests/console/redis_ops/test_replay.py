"""Replaying a range of a stream into another (or the same) stream, and counting what a replay would copy.

Counts and copies are checked against a plain-Python filter over a raw XRANGE of the source; the copies'
fields (order included, one fresh ``_replayed_from`` marker) against the originals as Redis holds them.
A job resumed from a stale cursor must copy nothing twice: the Redis-side cursor decides.
"""

from __future__ import annotations

import redis

from streams_app.redis_ops import actions
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import raw_xrange, stream_fields


def _replay_stream(r: redis.Redis, n: int = 500) -> list[str]:
    pipe = r.pipeline()
    ids = []
    for i in range(n):
        ids.append(f"{5_000 + i}-0")
        fields = {"kind": "a" if i % 3 == 0 else "b", "n": str(i)}
        if i % 7 == 0:
            fields["_replayed_from"] = "1-1"  # a copy of a copy gets one fresh marker
        pipe.xadd("src", fields, id=ids[-1])
    pipe.execute()
    return ids


def _python_matches(r: redis.Redis, first: str, last: str, match: dict[bytes, bytes]) -> list[str]:
    raw = raw_xrange(r, "src", first, last)
    return [
        entry_id.decode()
        for entry_id, flat in raw
        if all((k, v) in zip(flat[::2], flat[1::2], strict=True) for k, v in match.items())
    ]


def test_replay_count_equals_a_plain_python_filter(r: redis.Redis) -> None:
    ids = _replay_stream(r)
    assert actions.replay_count(CONN, b"src", start=ids[100], end=ids[399], match={b"kind": b"a"}) == len(
        _python_matches(r, ids[100], ids[399], {b"kind": b"a"})
    )
    assert actions.replay_count(CONN, b"src", start="-", end="+") == 500
    by_time = actions.replay_count(
        CONN, b"src", start="1970-01-01T00:00:05.010Z", end="5020", match={b"kind": b"b", b"n": b"11"}
    )
    assert by_time == 1
    detail = actions.replay_count_detail(CONN, b"src", start="-", end="+", limit=50)
    assert detail == actions.ReplayCount(matched=50, scanned=50, complete=False)


def test_replay_copies_with_marker_and_resumes_from_the_redis_side_cursor(r: redis.Redis) -> None:
    ids = _replay_stream(r)
    first, last = actions.resolve_range(CONN, b"src", ids[10], "+")
    assert (first, last) == (ids[10], ids[-1])
    match = {b"kind": b"a"}
    job_key = b"busconsole:job:7:cursor"

    saved = None
    for _ in range(2):  # two batches; the caller saves its progress after the first only
        batch = actions.replay_range(
            CONN,
            b"src",
            start=first,
            end=last,
            target=b"dst",
            match=match,
            after=saved,
            batch=40,
            job_key=job_key,
        )
        if saved is None:
            saved = batch.cursor
    assert actions.replay_cursor(CONN, job_key) == ids[10 + 80 - 1]

    stale, rounds = saved, 0
    while True:
        batch = actions.replay_range(
            CONN,
            b"src",
            start=first,
            end=last,
            target=b"dst",
            match=match,
            after=stale,
            batch=40,
            job_key=job_key,
        )
        stale, rounds = batch.cursor, rounds + 1
        if stale is None:
            break
        assert rounds < 50

    expected = _python_matches(r, first, last, match)
    copies = stream_fields(r, "dst")
    assert [dict(c)[b"_replayed_from"].decode() for c in copies] == expected
    originals = {
        entry_id.decode(): list(zip(flat[::2], flat[1::2], strict=True))
        for entry_id, flat in raw_xrange(r, "src")
    }
    for copy, origin in zip(copies, expected, strict=True):
        assert copy == [f for f in originals[origin] if f[0] != b"_replayed_from"] + [
            (b"_replayed_from", origin.encode())
        ]
    # The job is done: running it again copies nothing.
    again = actions.replay_range(
        CONN, b"src", start=first, end=last, target=b"dst", match=match, job_key=job_key
    )
    assert (again.copied, again.cursor) == (0, None)


def test_replay_into_the_same_stream_stops_at_the_resolved_end(r: redis.Redis) -> None:
    ids = _replay_stream(r, 100)
    first, last = actions.resolve_range(CONN, b"src", "-", "2100-01-01T00:00:00Z")
    assert last == ids[-1]

    after, copied = None, 0
    for _ in range(100):
        batch = actions.replay_range(CONN, b"src", start=first, end=last, target=b"src", after=after, batch=7)
        copied += batch.copied
        after = batch.cursor
        if after is None:
            break
    assert copied == 100 and r.xlen("src") == 200
    copies = stream_fields(r, "src")[100:]
    assert [dict(c)[b"_replayed_from"].decode() for c in copies] == ids
