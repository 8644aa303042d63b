"""A stream with many groups and a group with many consumers, for the paging tests of both lists.

Built with pipelined XGROUP CREATE / XGROUP CREATECONSUMER / XREADGROUP, in a shuffled order so that
Redis's own order is not the one the tests expect. The expected orders are Redis's XINFO replies
sorted here in plain Python, with a key of their own (negated figures, names as ties), not with the
code under test.
"""

from __future__ import annotations

import random
import time
from typing import Any

import redis

STREAM = "orders"
GROUP = "billing"
N_ENTRIES = 300
N_GROUPS = 120  # three pages of 50 (the last one short)
N_CONSUMERS = 130


def build_groups(r: redis.Redis, *, n: int = N_GROUPS) -> None:
    """``n`` groups ``g-000``... on STREAM: lags with ties (positions repeat every 40 groups), every
    ninth group SETID to an arbitrary ID (its lag unknown to Redis), and some pending entries."""
    with r.pipeline(transaction=False) as pipe:
        for i in range(N_ENTRIES):
            pipe.xadd(STREAM, {"n": str(i)})
        ids = pipe.execute()
    order = list(range(n))
    random.Random(7).shuffle(order)
    with r.pipeline(transaction=False) as pipe:
        for i in order:
            name = f"g-{i:03d}"
            position = (i * 7) % 40
            pipe.xgroup_create(STREAM, name, id=ids[position], entries_read=position + 1)
            if i % 9 == 4:
                pipe.xgroup_setid(STREAM, name, ids[200 + i % 50])  # no ENTRIESREAD: the lag is unknown
            if i % 4:
                pipe.xreadgroup(name, "w", {STREAM: ">"}, count=i % 4)
        pipe.execute()


def build_consumers(r: redis.Redis, *, n: int = N_CONSUMERS) -> None:
    """``n`` consumers ``w-000``... in GROUP: created in a shuffled order, a few milliseconds apart in
    three waves (so idle times differ and tie), most owning 1-5 pending entries and some none."""
    with r.pipeline(transaction=False) as pipe:
        for i in range(N_ENTRIES * 2):
            pipe.xadd(STREAM, {"n": str(i)})
        pipe.xgroup_create(STREAM, GROUP, id="0")
        pipe.execute()
    order = list(range(n))
    random.Random(11).shuffle(order)
    for wave in range(3):
        with r.pipeline(transaction=False) as pipe:
            for i in order[wave::3]:
                pipe.xgroup_createconsumer(STREAM, GROUP, f"w-{i:03d}")
            pipe.execute()
        time.sleep(0.005)  # the next wave is seen a few milliseconds later
    with r.pipeline(transaction=False) as pipe:
        for i in order:
            if i % 6:
                pipe.xreadgroup(GROUP, f"w-{i:03d}", {STREAM: ">"}, count=i % 6, noack=False)
        pipe.execute()


def text(name: bytes) -> str:
    return name.decode()


def sorted_rows(rows: list[dict[str, Any]], field: str, *, descending: bool) -> list[dict[str, Any]]:
    """``rows`` (XINFO replies as redis-py gives them) by ``field``, ties by name A to Z, rows whose
    ``field`` is missing or null after all others (by name)."""
    known = [row for row in rows if row.get(field) is not None]
    unknown = [row for row in rows if row.get(field) is None]
    sign = -1 if descending else 1
    known.sort(key=lambda row: (sign * row[field], row["name"]))
    unknown.sort(key=lambda row: row["name"])
    return known + unknown


def sorted_by_name(rows: list[dict[str, Any]], *, descending: bool) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: row["name"], reverse=descending)
