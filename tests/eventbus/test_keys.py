"""Key naming: every companion key of a stream hashes to the stream's slot, and the bus says standalone or
cluster the way the console does (declared in the URL, else asked of the server).

Slots are computed with redis-py's ``key_slot`` (the cluster spec's CRC16 of the ``{tag}``), not with the
naming code under test; names are the literal ones the migration note promises.
"""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from eventbus import Bus, keys
from eventbus.connection import split_mode

NAMES = [
    ("orders", "{orders}:dlq", "{orders}:retry", "{orders}:unique", "{orders}:metrics"),
    ("{orders}.v2", "{orders}.v2:dlq", "{orders}.v2:retry", "{orders}.v2:unique", "{orders}.v2:metrics"),
    ("tenant:7:events", "{tenant:7:events}:dlq", "{tenant:7:events}:retry", "{tenant:7:events}:unique",
     "{tenant:7:events}:metrics"),
    ("x{y", "{x{y}:dlq", "{x{y}:retry", "{x{y}:unique", "{x{y}:metrics"),
]


@pytest.mark.parametrize(("stream", "dlq", "retry", "unique", "metrics"), NAMES)
def test_companion_keys_share_the_stream_s_slot(stream: str, dlq: str, retry: str, unique: str,
                                                metrics: str) -> None:
    assert (keys.dlq_key(stream), keys.retry_key(stream), keys.unique_key(stream), keys.metrics_key(stream)) == (
        dlq, retry, unique, metrics)
    assert {key_slot(k.encode()) for k in (stream, dlq, retry, unique, metrics)} == {key_slot(stream.encode())}
    assert keys.slot_safe(stream)
    for key, suffix in ((dlq, ":dlq"), (retry, ":retry"), (metrics, ":metrics")):
        assert keys.stream_of(key, suffix) == stream
        assert keys.stream_of(key.encode(), suffix.encode()) == stream.encode()
    assert keys.metrics_key(stream.encode()) == metrics.encode()


def test_old_names_are_still_understood_and_an_untaggable_stream_keeps_them() -> None:
    assert keys.stream_of("orders:dlq", ":dlq") == "orders"
    assert keys.legacy_key("orders", ":retry") == "orders:retry"
    assert keys.stream_of("dlq", ":dlq") is None and keys.stream_of("orders", ":dlq") is None
    for stream in ("a}b", "{}x"):
        assert not keys.slot_safe(stream)
        assert keys.dlq_key(stream) == f"{stream}:dlq"
        assert key_slot(f"{stream}:dlq".encode()) != key_slot(stream.encode())


def test_the_url_declares_the_kind_or_the_server_is_asked(url: str) -> None:
    assert split_mode("redis://h:1/0?cluster=yes&socket_timeout=2") == ("redis://h:1/0?socket_timeout=2", "cluster")
    assert split_mode("redis://h:1/0?cluster=No") == ("redis://h:1/0", "standalone")
    assert split_mode("redis://h:1/0") == ("redis://h:1/0", "auto")
    with pytest.raises(ValueError, match="cluster='maybe'"):
        split_mode("redis://h:1/0?cluster=maybe")

    detected = Bus.from_url(url)
    assert not detected.cluster and isinstance(detected.client, redis.Redis)
    declared = Bus.from_url(f"{url}?cluster=no")
    assert declared.publish("orders", "x")  # the argument never reaches redis-py
    assert detected.client.xlen("orders") == 1
    detected.close()
    declared.close()
