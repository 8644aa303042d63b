"""What differs on Valkey, checked against a real valkey-server (Valkey 8.1.8) and, for comparison, a
redis-server 7.0 (Debian's), both started by these tests.

* The server's name and release: Valkey keeps INFO's ``redis_version`` at 7.2.4 (the Redis release whose
  commands and replies it speaks) and says what it is in ``server_name`` and ``valkey_version``; the
  overview and the API must say "Valkey 8.1.8", not "7.2.4". Expected: the binary's own ``--version``.
* XINFO CONSUMERS ``inactive`` (Redis 7.2+ and Valkey): the group page and the API show Valkey's figure;
  on Redis 7.0 the column says it is not available there, and the API gives null.
* The script cache: Valkey 8 evicts scripts that EVAL loaded beyond its cache (INFO ``evicted_scripts``),
  and every server empties it on SCRIPT FLUSH or a restart; a DLQ requeue then loads its script again.
"""

from __future__ import annotations

import html
import re
import subprocess
from collections.abc import Iterator

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import actions
from streams_app.redis_ops import client as redis_client
from tests.console.helpers import CONN, group_url
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS
from tests.polling import wait_for
from tests.servers import RedisServer, server_binaries

pytestmark = pytest.mark.valkey

API_CONNECTIONS = "/api/v1/connections/"


def released_as(kind: str) -> str:
    """``Valkey 8.1.8`` / ``Redis 7.0.15`` from the binary's own ``--version`` ("Valkey server v=8.1.8 ...")."""
    banner = subprocess.run([server_binaries(kind)[0], "--version"], capture_output=True, text=True,
                            check=True).stdout
    name, release = re.match(r"(\w+) server v=(\S+)", banner).groups()
    return f"{name} {release}"


@pytest.fixture
def own_redis(settings) -> Iterator[redis.Redis]:
    """A redis-server (Debian's 7.0) of the test's own, whatever the suite runs on; the console on it."""
    server = RedisServer(kind="redis").start()
    settings.BUS_REDIS_URLS = {"default": server.url(0)}
    redis_client.reset()
    client = redis.Redis.from_url(server.url(0))
    yield client
    client.close()
    redis_client.reset()
    server.cleanup()


def overview_version_cell(viewer_client: Client) -> str:
    page = viewer_client.get("/").content.decode()
    row = re.search(r'<tr class="">\s*<td><a href="/c/default/streams/"><strong>default</strong>.*?</tr>', page, re.S)
    assert row, page
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    return html.unescape(cells[3]).strip()


def test_overview_and_api_say_valkey_and_its_release(viewer_client: Client, r: redis.Redis) -> None:
    expected = released_as("valkey")
    info = r.info("server")
    assert info["server_name"] == "valkey" and info["redis_version"] != expected.split()[1]  # the premise
    assert overview_version_cell(viewer_client) == expected
    listed = viewer_client.get(API_CONNECTIONS).json()["connections"][0]
    assert listed["server"] == expected
    assert listed["redis_version"] == info["redis_version"]  # what the server speaks, as INFO says


def test_overview_and_api_say_redis_and_its_release(viewer_client: Client, own_redis: redis.Redis) -> None:
    expected = released_as("redis")
    assert overview_version_cell(viewer_client) == expected
    listed = viewer_client.get(API_CONNECTIONS).json()["connections"][0]
    assert listed["server"] == expected and listed["redis_version"] == expected.split()[1]


def consumer_with_a_gap(client: redis.Redis) -> None:
    """Consumer ``c1`` of ``orders``/``billing`` reads one entry, then at least 1 s later reads nothing:
    its idle time (since its last attempt) starts again, its inactive time (since its last successful
    read) does not, so the two figures differ by a second or more."""
    client.xadd("orders", {"n": "1"})
    client.xgroup_create("orders", "billing", id="0")
    client.xreadgroup("billing", "c1", {"orders": ">"}, count=1)
    wait_for(lambda: client.xinfo_consumers("orders", "billing")[0]["idle"] >= 1000,
             what="c1 idle for a second", timeout=10)
    assert client.xreadgroup("billing", "c1", {"orders": ">"}, count=1) == []


def consumer_cells(viewer_client: Client) -> tuple[str, str]:
    page = viewer_client.get(group_url("orders", "billing")).content.decode()
    row = re.search(r'<tr data-consumer="c1">.*?</tr>', page, re.S).group(0)
    idle = re.search(r'<td class="num idle-cell"[^>]*>(.*?)</td>', row, re.S).group(1)
    inactive = re.search(r'<td class="num inactive-cell"[^>]*>(.*?)</td>', row, re.S).group(1)
    return html.unescape(idle).strip(), inactive.strip()


def api_consumer(viewer_client: Client) -> dict:
    url = "/api/v1/c/default/streams/orders/groups/billing/consumers/"
    return viewer_client.get(url).json()["consumers"][0]


def test_inactive_is_valkeys_own_figure(viewer_client: Client, r: redis.Redis) -> None:
    consumer_with_a_gap(r)
    before = r.xinfo_consumers("orders", "billing")[0]
    idle_text, inactive_cell = consumer_cells(viewer_client)
    shown = api_consumer(viewer_client)
    after = r.xinfo_consumers("orders", "billing")[0]
    assert before["inactive"] >= 1000 > before["idle"]  # the premise: Valkey tells the two apart
    # The page: whole seconds ("1s"), within what Valkey said just before and just after the page.
    assert inactive_cell in {f"{s}s" for s in range(before["inactive"] // 1000, after["inactive"] // 1000 + 1)}
    assert "unknown-figure" not in inactive_cell and idle_text.endswith(" ms")
    assert before["inactive"] <= shown["inactive_ms"] <= after["inactive"]
    assert shown["idle_ms"] < before["inactive"]


def test_inactive_says_not_available_on_redis_7_0(viewer_client: Client, own_redis: redis.Redis) -> None:
    consumer_with_a_gap(own_redis)
    version = own_redis.info("server")["redis_version"]
    assert "inactive" not in own_redis.xinfo_consumers("orders", "billing")[0]  # the premise: 7.0 has none
    _idle, inactive_cell = consumer_cells(viewer_client)
    match = re.search(r'<span class="unknown-figure" title="([^"]+)"[^>]*>(.*?)</span>', inactive_cell)
    major, minor = version.split(".")[:2]
    assert match and match.group(2) == f"n/a on Redis {major}.{minor}"
    assert "only from Redis 7.2" in html.unescape(match.group(1))
    assert api_consumer(viewer_client)["inactive_ms"] is None


def test_a_requeue_after_the_script_cache_is_emptied_loads_its_script_again(r: redis.Redis) -> None:
    first = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()
    assert len(actions.requeue(CONN, b"orders:dlq", ids=[first]).requeued) == 1
    assert "evicted_scripts" in r.info("stats")  # the premise: this server evicts scripts
    r.script_flush()
    second = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()
    assert len(actions.requeue(CONN, b"orders:dlq", ids=[second]).requeued) == 1
    assert [fields[b"_requeued_from"].decode() for _, fields in r.xrange("orders")] == [first, second]
    assert r.xlen("orders:dlq") == 0
