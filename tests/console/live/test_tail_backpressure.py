"""A slow tail client is skipped ahead and never holds back the others; queues stay bounded.

Real uvicorn and redis-server; the slow client is a raw socket with a tiny receive buffer that reads
nothing until told. What it finally reads is checked against the IDs XADD returned: entries and skip
notes must account for every entry exactly once, in order, with each gap announced.
"""

from __future__ import annotations

from typing import Any

import redis

from tests.console.live.helpers import (
    RawClient,
    entries_of,
    entries_until,
    frame,
    hub_stats,
    open_tail,
    run,
    until_live,
    xadd_many,
)


def test_a_slow_client_is_skipped_ahead_and_queues_stay_bounded(
    asgi_server, cookies, r: redis.Redis, settings
) -> None:
    settings.BUSCONSOLE_TAIL_QUEUE = capacity = 200
    key = b"firehose"
    slow = RawClient(asgi_server, cookies, key)
    try:
        assert slow.frame() == {"type": "status", "state": "live", "last_id": "0-0"}

        async def fast_reader() -> tuple[list[str], list[str], dict[str, Any]]:
            async with open_tail(asgi_server, cookies, key) as ws:
                await until_live(ws)
                ids: list[str] = []
                got: list[str] = []
                # ~12 MB of frames for a client that reads nothing; this one reads each chunk of 100
                # before the next is written, so it is never more than 100 entries behind.
                for start in range(0, 3000, 100):
                    chunk = xadd_many(r, key, 100, start=start, size=4000)
                    ids += chunk
                    got += [e["id"] for e in await entries_until(ws, chunk[-1])]
                return ids, got, hub_stats()["default"]

        ids, fast_got, stats = run(fast_reader())
        assert fast_got == ids  # the slow client held nobody back
        assert stats["subscribers"] == 2
        assert stats["max_queued"] <= capacity and stats["queued"] <= capacity * 2  # never more than the bound
        assert stats["skipped"] > 0

        # Now read the slow client's socket: entries and skip notes account for every entry exactly.
        def pos(entry_id: str) -> int:
            return ids.index(entry_id) if entry_id in ids else -1

        received: list[str] = []
        skipped = 0
        expected_next = 0  # index in ids of the entry that must come next (after an entry or a gap)
        for _ in range(100_000):
            f = slow.frame()
            if f is None:
                continue
            if f["type"] == "skipped":
                assert f["resume_after"] == (received[-1] if received else "0-0")
                assert pos(f["last_skipped"]) == pos(f["resume_after"]) + f["count"]  # one contiguous gap
                skipped += f["count"]
                expected_next = pos(f["last_skipped"]) + 1
            else:
                for entry_id in (e["id"] for e in entries_of([f])):
                    assert pos(entry_id) == expected_next
                    received.append(entry_id)
                    expected_next += 1
            if received and received[-1] == ids[-1]:
                break
        assert skipped > 0
        assert len(received) + skipped == len(ids)
        assert received == sorted(set(received), key=ids.index)  # in order, no duplicate
    finally:
        slow.close()


def test_a_reader_that_stays_behind_jumps_to_the_newest_entry_and_says_so(
    asgi_server, cookies, r: redis.Redis, settings
) -> None:
    """An overloaded process (here: XREADs of 5 entries, no lag allowed) skips ahead instead of lagging."""
    settings.BUSCONSOLE_TAIL_QUEUE = 5
    settings.BUSCONSOLE_TAIL_MAX_LAG_MS = 0
    key = b"overload"

    async def scenario() -> tuple[list[str], list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            ids = xadd_many(r, key, 200)
            frames: list[dict[str, Any]] = []
            for _ in range(10_000):
                f = await frame(ws)
                frames.append(f)
                if (f["type"] == "skipped" and f["last_skipped"] == ids[-1]) or ids[-1] in {
                    e["id"] for e in entries_of([f])
                }:
                    break  # everything written so far was received or announced as skipped
            ids.append(r.xadd(key, {"n": "after the jump"}).decode())
            await entries_until(ws, ids[-1], frames=frames)
            return ids, frames

    ids, frames = run(scenario())
    received: list[str] = []
    expected_next = 0
    for f in frames:
        if f["type"] == "skipped":
            assert f["resume_after"] == (received[-1] if received else "0-0")
            gap_end = ids.index(f["last_skipped"])
            if f["count"] is not None:
                assert gap_end == (ids.index(received[-1]) if received else -1) + f["count"]
            expected_next = gap_end + 1
        for entry_id in (e["id"] for e in entries_of([f])):
            assert ids.index(entry_id) == expected_next  # in order, and only gaps that were announced
            received.append(entry_id)
            expected_next += 1
    assert any(f["type"] == "skipped" and f.get("reason") == "lagging" for f in frames)
    assert received[-1] == ids[-1] and len(received) < len(ids)
    assert hub_stats()["default"]["jumps"] >= 1
