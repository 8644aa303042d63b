"""The API's groups and consumers endpoints: ranked, paged by offset, documented.

Real redis-server, Django's test client (and a real 3-primary cluster for keys in other slots).
Expected pages are slices of Redis's own XINFO GROUPS / XINFO CONSUMERS replies sorted in plain
Python (:mod:`tests.console.views.ranked_bus`), walked by the ``next_offset`` each reply gives.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from tests.console.helpers import stream_api
from tests.console.views.ranked_bus import (
    GROUP,
    N_CONSUMERS,
    N_GROUPS,
    STREAM,
    build_consumers,
    build_groups,
    sorted_by_name,
    sorted_rows,
    text,
)

GROUPS = stream_api(STREAM, "groups/")
CONSUMERS = stream_api(STREAM, f"groups/{GROUP}/consumers/")


def walk(web: Client, url: str, key: str, count: int) -> tuple[list[dict], list[dict]]:
    """Every row from offset 0 on, ``count`` at a time, following ``next_offset``; and the replies."""
    rows, replies, offset = [], [], 0
    for _ in range(200):
        sep = "&" if "?" in url else "?"
        reply = web.get(f"{url}{sep}count={count}&offset={offset}")
        assert reply.status_code == 200, reply.content[:300]
        data = reply.json()
        replies.append(data)
        rows += data[key]
        if data["next_offset"] is None:
            return rows, replies
        assert data["next_offset"] == offset + count
        offset = data["next_offset"]
    raise AssertionError("next_offset never ended")


def group_json(g: dict) -> dict:
    return {"name": text(g["name"]), "consumers": g["consumers"], "pending": g["pending"],
            "last_delivered_id": g["last-delivered-id"].decode(), "entries_read": g["entries-read"], "lag": g["lag"]}


@pytest.fixture
def many_groups(r: redis.Redis) -> list[dict]:
    build_groups(r)
    return r.xinfo_groups(STREAM)


@pytest.fixture
def many_consumers(r: redis.Redis) -> redis.Redis:
    build_consumers(r)
    return r


@pytest.mark.parametrize(
    ("query", "field", "descending", "sort", "order"),
    [
        ("", "pending", True, "pending", "desc"),
        ("?sort=lag", "lag", True, "lag", "desc"),
        ("?sort=lag&order=asc", "lag", False, "lag", "asc"),
        ("?sort=consumers", "consumers", True, "consumers", "desc"),
    ],
)
def test_groups_walk_equals_the_sorted_xinfo_reply(viewer_client: Client, many_groups, query, field, descending,
                                                    sort, order) -> None:
    rows, replies = walk(viewer_client, GROUPS + query, "groups", 17)
    assert rows == [group_json(g) for g in sorted_rows(many_groups, field, descending=descending)]
    assert len(replies) == -(-N_GROUPS // 17)
    assert {(r["total"], r["sort"], r["order"]) for r in replies} == {(N_GROUPS, sort, order)}
    assert [r["offset"] for r in replies] == list(range(0, N_GROUPS, 17))


def test_groups_with_unknown_lag_come_last_as_null(viewer_client: Client, many_groups) -> None:
    unknown = sorted(text(g["name"]) for g in many_groups if g["lag"] is None)
    for order in ("asc", "desc"):
        rows, _ = walk(viewer_client, f"{GROUPS}?sort=lag&order={order}", "groups", 1000)
        assert [g["name"] for g in rows[-len(unknown):]] == unknown
        assert all(g["lag"] is None for g in rows[-len(unknown):])
        assert all(g["lag"] is not None for g in rows[: -len(unknown)])


def test_groups_by_name_both_ways(viewer_client: Client, many_groups) -> None:
    for order in ("asc", "desc"):
        rows, _ = walk(viewer_client, f"{GROUPS}?sort=name&order={order}", "groups", 50)
        assert [g["name"] for g in rows] == [text(g["name"]) for g in
                                             sorted_by_name(many_groups, descending=order == "desc")]


def test_the_default_page_is_fifty_and_an_offset_past_the_end_is_empty(viewer_client, many_groups) -> None:
    first = viewer_client.get(GROUPS).json()
    assert len(first["groups"]) == 50 and first["next_offset"] == 50 and first["total"] == N_GROUPS
    past = viewer_client.get(f"{GROUPS}?offset={N_GROUPS}").json()
    assert past == {"groups": [], "total": N_GROUPS, "offset": N_GROUPS, "next_offset": None, "sort": "pending",
                    "order": "desc"}


@pytest.mark.parametrize(
    ("url", "key", "field", "descending"),
    [(CONSUMERS, "consumers", "pending", True), (CONSUMERS + "?sort=pending&order=asc", "consumers", "pending", False),
     (CONSUMERS + "?sort=idle", "consumers", "idle", True), (CONSUMERS + "?sort=name&order=desc", "consumers", "name", True),
     (CONSUMERS + "?sort=inactive", "consumers", "inactive", True)],
)
def test_consumers_walk_equals_the_sorted_xinfo_reply(viewer_client: Client, many_consumers, url, key, field,
                                                       descending) -> None:
    rows, replies = walk(viewer_client, url, key, 23)
    xinfo = many_consumers.xinfo_consumers(STREAM, GROUP)  # after: idle times grew alike, the order held
    expected = (sorted_by_name(xinfo, descending=descending) if field == "name"
                else sorted_rows(xinfo, field, descending=descending))
    assert [(c["name"], c["pending"]) for c in rows] == [(text(c["name"]), c["pending"]) for c in expected]
    assert all(c["inactive_ms"] is None for c in rows) == all("inactive" not in c for c in xinfo)
    assert {r["total"] for r in replies} == {N_CONSUMERS}


@pytest.mark.parametrize(
    "query",
    ["sort=lag", "sort=", "order=down", "offset=-1", "offset=1.5", "count=0", "count=1001", "count=+5"],
)
@pytest.mark.parametrize("url", [GROUPS, CONSUMERS])
def test_bad_paging_is_a_400_naming_the_parameter(viewer_client: Client, many_consumers, url: str, query: str) -> None:
    if url == GROUPS and query == "sort=lag":
        query = "sort=idle"  # lag is a groups' sort; idle is not
    reply = viewer_client.get(f"{url}?{query}")
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "bad_request" and query.split("=")[0] in reply.json()["error"]["message"]


def test_a_missing_group_or_stream_is_a_404(viewer_client: Client, many_consumers) -> None:
    for url in (stream_api(STREAM, "groups/nope/consumers/"), stream_api("nope", "groups/"),
                stream_api("nope", f"groups/{GROUP}/consumers/")):
        reply = viewer_client.get(url)
        assert reply.status_code == 404 and reply.json()["error"]["code"] == "not_found", url


def test_the_document_describes_the_paging_parameters(viewer_client: Client) -> None:
    doc = viewer_client.get("/api/v1/openapi.json").json()
    for path, sorts in (("/api/v1/c/{conn}/streams/{key}/groups/", {"pending", "lag", "consumers", "name"}),
                        ("/api/v1/c/{conn}/streams/{key}/groups/{group}/consumers/",
                         {"pending", "idle", "inactive", "name"})):
        params = {p["name"]: p for p in doc["paths"][path]["get"]["parameters"] if p["in"] == "query"}
        assert set(params) == {"sort", "order", "offset", "count"}
        assert set(params["sort"]["schema"]["enum"]) == sorts


def test_keys_on_every_node_of_a_cluster(on_cluster, viewer_client: Client, rc) -> None:
    """Groups and consumers of streams in slots owned by different primaries, through the same endpoints."""
    keys = ["pg-a", "pg-b", "pg-c", "pg-d", "pg-e", "pg-f"]
    nodes = {rc.get_node_from_key(k).name for k in keys}
    assert len(nodes) >= 2  # really spread over the cluster
    for key in keys:
        rc.xadd(key, {"n": "1"})
        rc.xadd(key, {"n": "2"})
        for g in ("b", "a", "c"):
            rc.xgroup_create(key, g, id="0")
        rc.xreadgroup("c", "w2", {key: ">"}, count=2)
        rc.xreadgroup("a", "w1", {key: ">"}, count=1)
        rc.xgroup_createconsumer(key, "c", "w1")
    for key in keys:
        groups = viewer_client.get(stream_api(key, "groups/")).json()
        assert [g["name"] for g in groups["groups"]] == ["c", "a", "b"]
        consumers = viewer_client.get(stream_api(key, "groups/c/consumers/")).json()
        assert [(c["name"], c["pending"]) for c in consumers["consumers"]] == [("w2", 2), ("w1", 0)]


def test_the_stream_reply_carries_the_first_page_of_groups_and_where_the_rest_are(viewer_client, many_groups):
    data = viewer_client.get(stream_api(STREAM, "")).json()
    expected = sorted_rows(many_groups, "pending", descending=True)[:50]
    assert [g["name"] for g in data["groups"]] == [text(g["name"]) for g in expected]
    assert data["groups_total"] == len(many_groups) == N_GROUPS
    assert viewer_client.get(data["groups_url"]).json()["groups"] == data["groups"]
