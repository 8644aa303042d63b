"""Rewinding a consumer group (XGROUP SETID with ENTRIESREAD): the preview's figure against Redis's own.

Each rewind is checked three ways that share no code with the action: the group's ``last-delivered-id``
and ``lag`` in XINFO GROUPS, and the entries XREADGROUP then redelivers, compared with a plain-Python
slice of the IDs the test wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime

import redis

from streams_app.redis_ops import actions
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import deliver, group_row


def _stream_of(r: redis.Redis, n: int, *, first_ms: int = 1_000) -> list[str]:
    """n entries with IDs ``<first_ms + i>-0`` and ``<first_ms + i>-1`` for even i (two per ms)."""
    pipe = r.pipeline()
    ids = []
    for i in range(n):
        ms = first_ms + i
        for seq in (0, 1) if i % 2 == 0 else (0,):
            ids.append(f"{ms}-{seq}")
            pipe.xadd("s", {"n": str(i)}, id=f"{ms}-{seq}")
    pipe.execute()
    return ids


def _check_rewind(r: redis.Redis, plan: actions.RewindPlan, expected_redelivered: list[str]) -> None:
    """Redis's lag and what XREADGROUP then delivers both equal the preview's figure."""
    assert plan.will_redeliver == len(expected_redelivered)
    row = group_row(r, "s", "g")
    assert row["last-delivered-id"].decode() == plan.last_delivered_id
    assert row["lag"] == plan.will_redeliver
    assert deliver(r, "s", "g", "reader") == expected_redelivered


def test_rewind_to_an_id_preview_equals_lag_and_redelivery(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xgroup_create("s", "g", id="$")
    target = ids[40]

    preview = actions.rewind_preview(CONN, b"s", b"g", to=target)
    assert group_row(r, "s", "g")["last-delivered-id"].decode() == ids[-1]  # nothing changed

    plan = actions.rewind(CONN, b"s", b"g", to=target)
    assert plan == preview
    assert plan.current_last_delivered_id == ids[-1]
    assert plan.entries_read == 41 and plan.lag_known
    _check_rewind(r, plan, ids[41:])
    assert group_row(r, "s", "g")["lag"] == 0


def test_rewind_to_a_time_redelivers_from_that_millisecond(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xgroup_create("s", "g", id="$")
    when = datetime.fromtimestamp(1.050, tz=UTC).isoformat()  # the ms 1050, which holds 1050-0 and 1050-1

    plan = actions.rewind(CONN, b"s", b"g", to=when)

    expected = [i for i in ids if int(i.split("-")[0]) >= 1050]
    assert plan.last_delivered_id == "1049-0"
    _check_rewind(r, plan, expected)
    # A bare millisecond means the same.
    assert actions.rewind_preview(CONN, b"s", b"g", to="1050").will_redeliver == len(expected)


def test_rewind_to_start_of_a_trimmed_stream_and_to_the_end(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xtrim("s", maxlen=80, approximate=False)
    r.xgroup_create("s", "g", id="$")

    plan = actions.rewind(CONN, b"s", b"g", to="0")
    assert plan.last_delivered_id == "0-0"
    _check_rewind(r, plan, ids[-80:])

    end = actions.rewind(CONN, b"s", b"g", to="$")
    assert (end.last_delivered_id, end.will_redeliver) == (ids[-1], 0)
    assert group_row(r, "s", "g")["lag"] == 0


def test_rewind_past_deleted_entries_still_counts_exactly(r: redis.Redis) -> None:
    ids = _stream_of(r, 60)
    r.xgroup_create("s", "g", id="$")
    r.xdel("s", ids[50], ids[55])

    plan = actions.rewind(CONN, b"s", b"g", to=ids[20])

    expected = [i for i in ids[21:] if i not in (ids[50], ids[55])]
    assert plan.will_redeliver == len(expected) and not plan.lag_known
    assert group_row(r, "s", "g")["lag"] is None  # Redis cannot tell with tombstones ahead
    assert deliver(r, "s", "g", "reader") == expected
    assert group_row(r, "s", "g")["lag"] == 0  # and recovers once past them


def test_rewind_on_a_big_stream_counts_in_batches(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(25_000):
        pipe.xadd("s", {"n": str(i)}, id=f"{10_000 + i}-0")
    pipe.execute()
    r.xgroup_create("s", "g", id="$")

    plan = actions.rewind(CONN, b"s", b"g", to="12345-0")

    assert plan.will_redeliver == 25_000 - 2_346
    assert group_row(r, "s", "g")["lag"] == plan.will_redeliver
    delivered = 0
    for _ in range(100):
        batch = deliver(r, "s", "g", "reader", n=5_000)
        if not batch:
            break
        delivered += len(batch)
    assert delivered == plan.will_redeliver
