"""The tail page on a Redis Cluster whose node stops: "not receiving", then "live" again.

Here rather than in tests/cluster/test_tail.py because the session's one Chromium (the ``browser``
fixture) must come from tests/browser/conftest.py: a second Playwright in the same process fails.
"""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from tests.cluster.test_tail import on_private, private_cluster  # noqa: F401 - the module's own cluster
from tests.conftest import session_cookie


@pytest.mark.browser
def test_the_page_of_a_tail_whose_node_stops_says_not_receiving(
    on_private, private_cluster, asgi_server, page, viewer  # noqa: F811 - the imported fixtures
) -> None:
    from playwright.sync_api import expect

    rc = on_private
    port = rc.get_node_from_key(b"orders").port
    node = next(n for n in private_cluster.nodes if n.port == port)
    page.context.add_cookies([{"name": name, "value": value, "url": asgi_server.url}
                              for name, value in session_cookie(viewer).items()])
    page.goto("/c/default/streams/orders/tail/")
    state = page.locator("#tail-state")
    expect(state).to_have_attribute("data-state", "live", timeout=15_000)
    node.stop()
    try:
        expect(state).to_have_attribute("data-state", "stalled", timeout=30_000)
        expect(state).to_contain_text("not receiving: Redis server 'default' is unreachable")
        expect(state).to_contain_text(str(port))
    finally:
        node.start()
    private_cluster.wait_ok()
    expect(state).to_have_attribute("data-state", "live", timeout=30_000)
    fresh = RedisCluster.from_url(private_cluster.url())
    try:
        entry = fresh.xadd(b"orders", {"n": "after"}).decode()
    finally:
        fresh.close()
    expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(entry, timeout=15_000)
