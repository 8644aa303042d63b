"""Bad input to every write action is refused with the access layer's own errors, and changes nothing.

Each call names a missing key or group (NotFound) or an argument out of range (InvalidArgument); the
group's pending list, read with XPENDING afterwards, is still empty.
"""

from __future__ import annotations

import pytest
import redis

from streams_app.redis_ops import actions
from streams_app.redis_ops.errors import InvalidArgument, NotFound
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import pel


def test_bad_inputs_are_refused(r: redis.Redis) -> None:
    entry_id = r.xadd("s", {"n": "1"}).decode()
    r.xgroup_create("s", "g", id="0")
    r.set("text", "x")
    claim = actions.claim
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=["not-an-id"], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"c", min_idle_ms=-1)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[f"{i}-0" for i in range(1, 1002)], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"", min_idle_ms=0)
    with pytest.raises(NotFound):
        claim(CONN, b"nope", b"g", ids=[entry_id], consumer=b"c", min_idle_ms=0)
    with pytest.raises(NotFound):
        claim(CONN, b"s", b"nope", ids=[entry_id], consumer=b"c", min_idle_ms=0)
    with pytest.raises(NotFound):
        actions.autoclaim(CONN, b"s", b"nope", consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        actions.autoclaim(CONN, b"s", b"g", consumer=b"c", min_idle_ms=-5)
    with pytest.raises(NotFound):
        actions.ack(CONN, b"s", b"nope", ids=[entry_id])
    with pytest.raises(NotFound):
        actions.ack(CONN, b"nope", b"g", ids=[entry_id])
    with pytest.raises(NotFound):
        actions.rewind(CONN, b"s", b"nope", to="0")
    with pytest.raises(NotFound):
        actions.rewind_preview(CONN, b"text", b"g", to="0")
    for bad in ("", "yesterday", "1-2-3"):
        with pytest.raises(InvalidArgument):
            actions.rewind_preview(CONN, b"s", b"g", to=bad)
    with pytest.raises(InvalidArgument):
        actions.rewind(CONN, b"s", b"g", to="99999999999999-0")  # after the last ID: use $
    with pytest.raises(NotFound):
        actions.requeue(CONN, b"nope:dlq", ids=["1-1"])
    with pytest.raises(InvalidArgument):
        actions.requeue_range(CONN, b"orders:dlq", up_to="+")
    with pytest.raises(NotFound):
        actions.resolve_range(CONN, b"nope", "-", "+")
    with pytest.raises(InvalidArgument):
        actions.resolve_range(CONN, b"s", "2000", "1000")
    with pytest.raises(InvalidArgument):
        actions.replay_range(CONN, b"s", start="0-0", end="+", target=b"t")
    with pytest.raises(InvalidArgument):
        actions.replay_range(CONN, b"s", start="0-0", end=entry_id, target=b"text")
    with pytest.raises(InvalidArgument):
        actions.replay_count(CONN, b"s", start="-", end="+", match={"kind": "a"})
    assert pel(r, "s", "g") == {}  # nothing above changed anything
