"""Listings and reads on a real 3-primary Redis Cluster: every primary covered, keys in any slot answer,
and a listing that misses a primary says so.

Expected keys, entries and counts come from what the test wrote and from ``rc`` (the raw cluster client);
``rc.get_node_from_key`` proves the keys really live on three different nodes.
"""

from __future__ import annotations

import asyncio
import html
import json
import re

import pytest
import redis
from django.test import Client
from redis.cluster import RedisCluster

from eventbus.keys import P_DATA, P_EVENT, P_TS
from streams_app.lake import export
from streams_app.metrics import mirror
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import commands, progress
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.reads import server as server_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.views.links import dlq_url, entry_url, group_url, stream_url
from tests.polling import wait_for

pytestmark = pytest.mark.django_db
API = "/api/v1/c/default"


def spread(rc: RedisCluster, prefix: str, n: int) -> list[bytes]:
    """``n`` stream keys ``<prefix><i>``, each with i+1 entries; asserts they sit on all three primaries."""
    keys = [f"{prefix}{i}".encode() for i in range(n)]
    for i, key in enumerate(keys):
        for j in range(i + 1):
            rc.xadd(key, {"n": str(j)})
    assert len({rc.get_node_from_key(key).name for key in keys}) == 3
    return keys


def page_keys(body: str) -> list[bytes]:
    return [html.unescape(k).encode() for k in re.findall(r'<a class="mono" href="/c/default/streams/([^"/]+)/">', body)]


def test_streams_page_and_api_list_every_node_once_paging_across_nodes(on_cluster, rc, viewer_client: Client):
    keys = spread(rc, "s", 23)
    rc.set("plain", "not a stream")
    shown: list[bytes] = []
    url = "/c/default/streams/?live=1&count=4"
    for _ in range(40):  # bounded: 23 streams at 4 a page, plus pages a SCAN may leave empty
        body = viewer_client.get(url).content.decode()
        assert "Partial:" not in body
        shown += page_keys(body)
        more = re.search(r'<a rel="next" href="([^"]+)"', body)
        if not more:
            break
        url = "/c/default/streams/" + html.unescape(more.group(1))
    assert sorted(shown) == sorted(keys)  # every node, no duplicates, no gaps

    listed: list[str] = []
    cursor = 0
    for _ in range(40):
        reply = viewer_client.get(f"{API}/streams/?count=4&cursor={cursor}").json()
        assert reply["complete"] is True and reply["missed"] == []
        listed += [row["key"] for row in reply["streams"]]
        lengths = {row["key"]: row["length"] for row in reply["streams"]}
        assert all(lengths[k] == rc.xlen(k) for k in lengths)
        cursor = reply["next_cursor"]
        if cursor is None:
            break
    assert sorted(listed) == sorted(k.decode() for k in keys)


def test_a_cursor_that_names_no_node_is_a_bad_request(on_cluster, rc, viewer_client: Client):
    spread(rc, "c", 6)
    reply = viewer_client.get(f"{API}/streams/?cursor={5 << commands.NODE_SHIFT}")
    assert reply.status_code == 400 and "cursor" in reply.json()["error"]["message"]


def test_sort_by_length_ranks_every_node_by_scan_then_from_the_mirror(on_cluster, rc, viewer_client: Client):
    keys = spread(rc, "len", 9)  # len8 is the longest (9 entries), len0 the shortest
    expected = [k.decode() for k in sorted(keys, key=lambda k: -rc.xlen(k))]
    before = viewer_client.get(f"{API}/streams/?sort=length&count=3").json()
    assert (before["source"], before["mirror"], before["complete"]) == ("scan", "empty", True)
    assert [row["key"] for row in before["streams"]] == expected[:3]
    assert viewer_client.get(f"{API}/streams/?sort=pending").status_code == 400  # needs the mirror

    mirror.mirror_sync(conn=on_cluster)
    after = viewer_client.get(f"{API}/streams/?sort=length&count=3&offset=3").json()
    assert (after["source"], after["total"], after["stale"], after["complete"]) == ("mirror", 9, False, True)
    assert [row["key"] for row in after["streams"]] == expected[3:6]
    assert after["next_offset"] == 6


def test_dlq_list_finds_dead_letters_on_every_node(on_cluster, rc, viewer_client: Client):
    dlqs = [b"{orders}:dlq", b"payments:dlq", b"d1:dlq", b"d3:dlq", b"a:dlq", b"b:dlq"]
    for key in dlqs:
        rc.xadd(key, {"error": "boom", "payload": "{}"})
    assert len({rc.get_node_from_key(k).name for k in dlqs}) == 3
    reply = viewer_client.get(f"{API}/dlq/").json()
    assert reply["complete"] is True and reply["missed"] == []
    assert sorted(d["key"] for d in reply["dlqs"]) == sorted(k.decode() for k in dlqs)
    assert all(d["depth"] == 1 for d in reply["dlqs"])
    body = viewer_client.get("/c/default/dlq/").content.decode()
    assert "Partial:" not in body and all(html.escape(k.decode()) in body for k in dlqs)


def test_pages_of_keys_on_every_node_answer_with_their_own_data(on_cluster, rc, viewer_client: Client):
    keys = [b"orders", b"payments", b"emails", b"audit", b"x", b"y"]
    assert len({rc.get_node_from_key(k).name for k in keys}) == 3
    for key in keys:
        ids = [rc.xadd(key, {"k": key, "i": str(i)}).decode() for i in range(5)]
        rc.xgroup_create(key, "g", id="0")
        rc.xreadgroup("g", "worker", {key: ">"}, count=2)
        page = viewer_client.get(stream_url("default", key) + "?count=2")
        assert page.status_code == 200, page.content[:300]
        body = page.content.decode()  # the newest two entries link to their pages, the oldest does not
        assert entry_url("default", key, ids[-1]) in body and entry_url("default", key, ids[0]) not in body
        entries = viewer_client.get(f"{API}/streams/{key.decode()}/entries/?count=2&order=asc").json()
        assert [e["id"] for e in entries["entries"]] == ids[:2]
        more = viewer_client.get(f"{API}/streams/{key.decode()}/entries/?count=2&order=asc&after={ids[1]}").json()
        assert [e["id"] for e in more["entries"]] == ids[2:4]
        assert viewer_client.get(entry_url("default", key, ids[2])).status_code == 200
        group = viewer_client.get(group_url("default", key, b"g"))
        assert group.status_code == 200 and "worker" in group.content.decode()
        pending = viewer_client.get(f"{API}/streams/{key.decode()}/groups/g/pending/").json()
        assert [p["id"] for p in pending["entries"]] == ids[:2]
        info = viewer_client.get(f"{API}/streams/{key.decode()}/").json()
        assert info["length"] == 5


def test_dlq_pages_on_every_node(on_cluster, rc, viewer_client: Client):
    dlqs = [b"{orders}:dlq", b"payments:dlq", b"d1:dlq", b"a:dlq"]
    assert len({rc.get_node_from_key(k).name for k in dlqs}) == 3
    for key in dlqs:
        entry_id = rc.xadd(key, {"error": f"boom-{key.decode()}", "payload": "{}"}).decode()
        page = viewer_client.get(dlq_url("default", key))
        assert page.status_code == 200 and entry_id in page.content.decode()
        assert f"boom-{key.decode()}" in page.content.decode()


def test_a_stream_whose_dlq_lives_on_another_node_renders_with_its_dlq(on_cluster, rc, viewer_client: Client):
    stream, dlq = b"orders", b"orders:dlq"  # the old, untagged name: another slot
    assert rc.get_node_from_key(stream).name != rc.get_node_from_key(dlq).name
    rc.xadd(stream, {"a": "1"})
    rc.xgroup_create(stream, "billing", id="0")
    rc.xadd(dlq, {"error": "boom"})
    body = viewer_client.get(stream_url("default", stream)).content.decode()
    assert dlq_url("default", dlq) in body and "DLQ not checked" not in body
    found, missed = stream_reads.existing_streams(on_cluster, [dlq, b"{orders}:dlq", b"nothing:dlq"])
    assert (found, missed) == ([dlq], ())


def test_a_transactional_stream_pipeline_runs_on_the_key_s_own_node(on_cluster, rc):
    keys = [b"orders", b"payments", b"x"]
    assert len({rc.get_node_from_key(k).name for k in keys}) == 3
    client = redis_client.get_client(on_cluster)
    for key in keys:
        ids = [rc.xadd(key, {"i": str(i)}).decode() for i in range(3)]
        found, (length,) = commands.entries_by_id(
            on_cluster, client, key, [ids[1], "1-1"], transaction=True, then=[("XLEN", key)]
        )
        assert [e.id if e else None for e in found] == [ids[1], None] and length == 3


def test_progress_and_overview_read_every_node(on_cluster, rc, viewer_client: Client):
    keys = [b"progress:a", b"progress:b", b"progress:c", b"progress:d", b"progress:e", b"progress:f"]
    assert len({rc.get_node_from_key(k).name for k in keys}) == 3
    for key in keys:
        rc.xadd(key, {P_EVENT: "step", P_DATA: '{"n": 1}', P_TS: "1"})
        done = rc.xadd(key, {P_EVENT: "done", P_DATA: "{}", P_TS: "2"}).decode()
        head = progress.progress_head(on_cluster, key)
        assert (head.last_id, head.last_event) == (done, "done")

        async def follow(key=key) -> list[str]:
            return [e.event async for e in progress.progress_follow(on_cluster, key, after=parse_id("0-0"), mask=None) if e]

        assert asyncio.run(follow()) == ["step", "done"]
    facts = server_reads.server_overview(on_cluster)
    assert facts.dbsize == len(keys) and facts.nodes == 3 and facts.missed == ()
    assert "partial" not in viewer_client.get("/").content.decode()


# ------------------------------------------------------------------------- a primary that stops answering


def _partial_everywhere(client: Client, dead: str, alive: set[str]) -> dict:
    """Every listing answers 200, says it is partial naming ``dead``, and lists no stream of ``dead``."""
    listed = client.get(f"{API}/streams/?count=1000")
    assert listed.status_code == 200, listed.content[:300]
    reply = listed.json()
    assert reply["complete"] is False and dead in reply["missed"]
    assert {row["key"] for row in reply["streams"]} <= alive
    page = client.get("/c/default/streams/?live=1")
    assert page.status_code == 200 and "Partial:" in page.content.decode() and dead in page.content.decode()
    dlqs = client.get(f"{API}/dlq/")
    assert dlqs.status_code == 200 and dlqs.json()["complete"] is False and dead in dlqs.json()["missed"]
    dlq_page = client.get("/c/default/dlq/").content.decode()
    assert "Partial:" in dlq_page and dead in dlq_page
    return reply


def test_a_dead_primary_makes_every_listing_partial_and_say_so(own_cluster, viewer_client: Client, tmp_path):
    rc = RedisCluster.from_url(own_cluster.url())
    keys = [f"k{i}".encode() for i in range(12)] + [f"d{i}:dlq".encode() for i in range(6)]
    for key in keys:
        rc.xadd(key, {"f": "v"})
    by_node = {rc.get_node_from_key(k).name: k for k in keys}
    assert len(by_node) == 3
    victim = next(node for node in own_cluster.nodes[1:])
    dead = f"127.0.0.1:{victim.port}"
    alive = {k.decode() for k in keys if rc.get_node_from_key(k).name != dead}
    rc.close()
    # the console has seen the cluster whole before the node goes
    assert viewer_client.get(f"{API}/streams/?count=1000").json()["complete"] is True
    victim.process.kill()
    victim.process.wait(5)

    at_once = _partial_everywhere(viewer_client, dead, alive)  # the others still think the cluster is ok
    assert at_once["missed"] == [dead]
    assert {row["key"] for row in at_once["streams"]} == alive  # every stream of the nodes that answer
    # the export takes what the live nodes hold and reports the silent one (its streams wait for the next run)
    stats = export.export_run(conns=["default"], tables=False, workers=1, lake_uri=str(tmp_path / "lake"))
    assert stats.entries == len(alive) and any(dead in failure for failure in stats.failed), stats.failed

    survivor = redis.Redis(port=own_cluster.nodes[0].port)
    wait_for(lambda: survivor.cluster("info").get("cluster_state") == "fail", what="the cluster to mark it failed",
             timeout=30, step=0.2)
    survivor.close()
    # once they agree it failed, the survivors refuse key reads (CLUSTERDOWN): still 200, still partial
    later = _partial_everywhere(viewer_client, dead, alive)
    assert set(later["missed"]) <= {f"127.0.0.1:{node.port}" for node in own_cluster.nodes}
    overview = viewer_client.get("/")
    assert overview.status_code == 200


def test_node_cursor_encoding_keeps_standalone_cursors_and_fits_javascript():
    assert commands.listing_cursor(0, 12345) == 12345
    assert commands.split_cursor("x", commands.listing_cursor(2, 777), 3) == (2, 777)
    assert commands.listing_cursor(31, (1 << commands.NODE_SHIFT) - 1) < 2**53
    assert json.loads(json.dumps(commands.listing_cursor(2, 777))) == (2 << 48) + 777
