"""The metadata mirror: ``mirror_sync`` creating, following, marking vanished and restoring the rows of
streams, groups and consumers, against a real Redis.

Expected values come from Redis itself (redis-py's own XINFO parsing, not the console's); an
unreachable server must leave the rows as they were.
"""

from __future__ import annotations

import pytest
import redis

from streams_app.metrics import mirror
from streams_app.metrics.models import ConsumerMirror, StreamMirror, name_hash
from streams_app.redis_ops import client as redis_client
from tests.console.helpers import CONN
from tests.console.metrics.helpers import assert_stream_matches_redis, bus, group_row, mirror_row
from tests.servers import RedisServer


def test_sync_creates_rows_as_redis_reports_them(r: redis.Redis, db) -> None:
    bus(r)
    result = mirror.mirror_sync(conn=CONN)
    assert result.streams == result.streams_created == 4
    for key in ("orders", "orders:dlq", b"bin\xff\x00key", "empty"):
        assert_stream_matches_redis(r, key)
    dlq = mirror_row("orders:dlq")
    assert dlq.is_dlq and dlq.dlq_convention == "eventbus-or-streams" and dlq.dlq_sources == ["orders"]
    assert not mirror_row("orders").is_dlq
    binary = mirror_row(b"bin\xff\x00key")
    assert binary.key_bytes == b"bin\xff\x00key" and binary.key_text == "bin\\xff\\x00key"
    assert group_row(b"bin\xff\x00key", b"g\xff").name_text == "g\\xff"
    assert mirror_row("empty").length == 0 and mirror_row("empty").last_id is None
    assert mirror_row("orders").lag == max(g["lag"] for g in r.xinfo_groups("orders"))


def test_sync_follows_changes_marks_vanished_and_restores_returned(r: redis.Redis, db) -> None:
    bus(r)
    mirror.mirror_sync(conn=CONN)
    orders_id, first_seen = mirror_row("orders").pk, mirror_row("orders").first_seen
    shipping = group_row("orders", "shipping")

    r.xadd("orders", {"type": "late"})  # changed
    r.xreadgroup("billing", "worker-3", {"orders": ">"}, count=1)  # a new consumer
    r.xgroup_delconsumer("orders", "billing", "worker-2")  # vanished consumer
    r.xgroup_destroy("orders", "shipping")  # vanished group
    r.delete("empty")  # vanished stream
    r.xadd("fresh", {"x": "1"})  # created
    result = mirror.mirror_sync(conn=CONN)

    assert (result.streams_created, result.streams_deleted, result.groups_deleted, result.consumers_deleted) == (1, 1, 1, 1)
    assert mirror_row("orders").pk == orders_id and mirror_row("orders").first_seen == first_seen
    for key in ("orders", "orders:dlq", "fresh"):
        assert_stream_matches_redis(r, key)
    assert mirror_row("empty").deleted_at == result.synced_at
    shipping.refresh_from_db()
    assert shipping.deleted_at == result.synced_at
    gone = ConsumerMirror.objects.get(group=group_row("orders", "billing"), name_hash=name_hash(b"worker-2"))
    assert gone.deleted_at == result.synced_at

    # they come back: same rows, no longer deleted
    r.xadd("empty", {"x": "again"})
    r.xgroup_create("orders", "shipping", id="$")
    again = mirror.mirror_sync(conn=CONN)
    assert again.streams_returned == 1
    assert mirror_row("empty").deleted_at is None and group_row("orders", "shipping").pk == shipping.pk
    assert group_row("orders", "shipping").deleted_at is None
    assert_stream_matches_redis(r, "empty")
    assert_stream_matches_redis(r, "orders")


def test_an_unreachable_server_marks_nothing_deleted(r: redis.Redis, db, settings, spare_redis: RedisServer) -> None:
    spare = redis.Redis.from_url(spare_redis.url(0))
    spare.xadd("s", {"x": "1"})
    settings.BUS_REDIS_URLS = {CONN: settings.BUS_REDIS_URLS[CONN], "spare": spare_redis.url(0)}
    mirror.mirror_sync(conn="spare")
    spare_redis.stop()
    redis_client.reset()
    with pytest.raises(Exception, match="unreachable"):
        mirror.mirror_sync(conn="spare")
    assert StreamMirror.objects.get(connection="spare").deleted_at is None
