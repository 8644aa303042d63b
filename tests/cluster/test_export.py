"""The lake export on a real 3-primary Redis Cluster: streams on every node, every entry exactly once.

The expected entries are read by the test itself with ``rc`` (paged XRANGE on the raw cluster client);
the lake is read back with pyarrow alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from redis.cluster import RedisCluster

from streams_app.lake import export

pytestmark = pytest.mark.django_db


@pytest.fixture
def lake_dir(tmp_path: Path, settings) -> Path:
    path = tmp_path / "lake"
    settings.BUSCONSOLE_LAKE = str(path)
    return path


def fill(rc: RedisCluster, keys: list[bytes], per_key: int) -> None:
    for n, key in enumerate(keys):
        for i in range(per_key + n):  # a different length per stream
            rc.xadd(key, {"type": f"t{i % 3}", "data": f'{{"i": {i}}}'})


def redis_ids(rc: RedisCluster, key: bytes) -> list[str]:
    out, start = [], "-"
    for _ in range(10_000):
        page = rc.xrange(key, min=start, max="+", count=100)
        if not page:
            return out
        out += [entry_id.decode() for entry_id, _ in page]
        start = "(" + page[-1][0].decode()
    raise AssertionError("stream longer than the test expects")


def lake_ids(lake: Path) -> Counter:
    files = [str(p) for p in (lake / "entries").rglob("*.parquet") if not p.name.startswith(".")]
    rows = ds.dataset(files, format="parquet").to_table(columns=["stream", "entry_id"]).to_pylist()
    return Counter((row["stream"], row["entry_id"]) for row in rows)


@pytest.mark.parametrize(
    "workers",
    [1, pytest.param(2, marks=pytest.mark.django_db(transaction=True))],  # workers write checkpoints themselves
)
def test_an_export_of_streams_on_three_nodes_has_every_entry_once(on_cluster, rc, lake_dir: Path, workers):
    keys = [b"orders", b"payments", b"x", b"{orders}.v2", b"emails", b"y"]
    assert len({rc.get_node_from_key(k).name for k in keys}) == 3
    fill(rc, keys, 40)
    first = export.export_run(conns=[on_cluster], tables=False, workers=workers, parallel_min=0)
    assert first.failed == [] and first.streams == len(keys)
    # a second run after more entries on every node exports only the new ones
    fill(rc, keys, 5)
    second = export.export_run(conns=[on_cluster], tables=False, workers=workers, parallel_min=0)
    assert second.failed == []
    expected = {(key, entry_id) for key in keys for entry_id in redis_ids(rc, key)}
    seen = lake_ids(lake_dir)
    assert max(seen.values()) == 1
    assert set(seen) == expected
    assert first.entries + second.entries == len(expected)
