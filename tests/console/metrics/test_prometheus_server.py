"""A real Prometheus (Debian's ``prometheus``, started here on a free port) scrapes the console's real ASGI
server with an API token, and what its query API answers is what Redis says.

Expected figures come from the test's own Redis (XLEN, XINFO GROUPS' lag, XPENDING's count, XINFO
CONSUMERS) after the snapshot and mirror tasks the exposition reads have run, and, for an unreachable
connection, from a redis-server the test stopped. Prometheus evaluates the shipped alert rules and
every query of the shipped Grafana dashboard. Waits are bounded polls (``tests.polling``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import yaml

from tests.console.helpers import CONN
from tests.console.metrics.prometheus_helpers import (
    RULES,
    PrometheusServer,
    dashboard_targets,
    demo_bus,
    redis_figures,
    scrape_config,
)
from tests.polling import wait_for

#: What the dashboard's Grafana variables stand for here: the demo connection, every stream.
GRAFANA_VARIABLES = {"connection": CONN, "stream": ".+", "__rate_interval": "1m", "__interval": "10s", "__range": "1h"}


@pytest.fixture
def prometheus() -> Iterator[Callable[[dict[str, Any]], PrometheusServer]]:
    started: list[PrometheusServer] = []

    def start(config: dict[str, Any]) -> PrometheusServer:
        server = PrometheusServer(config)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def _targets_scraped(prom: PrometheusServer) -> dict[str, dict[str, Any]] | None:
    """The active targets by job once every one has been scraped (health "up" or "down"), else None."""
    targets = {t["labels"]["job"]: t for t in prom.api("targets")["activeTargets"]}
    return targets if targets and all(t["health"] != "unknown" for t in targets.values()) else None


def _values(prom: PrometheusServer, expr: str, *labels: str) -> dict[Any, float]:
    out = {}
    for item in prom.query(expr):
        key = tuple(item["metric"].get(label, "") for label in labels)
        out[key[0] if len(key) == 1 else key] = float(item["value"][1])
    return out


def _value(prom: PrometheusServer, expr: str) -> float:
    """The one value of an aggregation without labels."""
    (item,) = prom.query(expr)
    return float(item["value"][1])


@pytest.mark.slow
def test_prometheus_scrapes_with_a_bearer_token_and_queries_give_redis_figures(
    r: redis.Redis, asgi_server, viewer, api_token, prometheus, spare_redis, settings
) -> None:
    gone_url = spare_redis.url(0)
    settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, "gone": gone_url}
    spare_redis.stop()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(gone_url).ping()
    demo_bus(r)
    expected = redis_figures(r)

    target = f"127.0.0.1:{asgi_server.port}"
    config = scrape_config(target=target, token=api_token(viewer))
    anonymous = {**config["scrape_configs"][0], "job_name": "anonymous"}
    del anonymous["authorization"]
    config["scrape_configs"].append(anonymous)
    prom = prometheus(config)
    targets = wait_for(lambda: _targets_scraped(prom), what="both targets scraped", timeout=30)
    assert targets["busconsole"]["health"] == "up", targets["busconsole"]["lastError"]
    assert targets["anonymous"]["health"] == "down" and "401" in targets["anonymous"]["lastError"]
    wait_for(lambda: prom.query('busconsole_metrics_series{job="busconsole"}'), what="the series", timeout=30)

    selector = f'{{job="busconsole",connection="{CONN}"}}'
    assert _values(prom, f"busconsole_stream_length{selector}", "stream") == expected.lengths
    assert _values(prom, f"busconsole_group_pending{selector}", "stream", "group") == expected.pending
    assert _values(prom, f"busconsole_group_lag{selector}", "stream", "group") == expected.lag
    assert _values(prom, f"busconsole_dlq_depth{selector}", "dlq") == expected.dlqs
    # queries over the scraped series
    assert _value(prom, f"sum(busconsole_group_pending{selector})") == sum(expected.pending.values())
    assert _value(prom, f"max(busconsole_group_lag{selector})") == max(expected.lag.values())
    assert _values(prom, f"busconsole_connection_entries{selector}", "connection") == {
        CONN: sum(expected.lengths.values())}
    assert _values(prom, f"busconsole_connection_consumers{selector}", "connection") == {CONN: expected.consumers}
    assert _values(prom, f'topk(1, busconsole_group_pending{selector}) > 0', "group") == {
        max(expected.pending, key=expected.pending.get)[1]: max(expected.pending.values())}
    assert _values(prom, 'busconsole_snapshot_connection_error{job="busconsole"}', "connection") == {
        CONN: 0, "gone": 1}


@pytest.mark.slow
def test_prometheus_loads_the_rules_and_every_dashboard_query_returns_data(
    r: redis.Redis, asgi_server, viewer, api_token, prometheus, tmp_path
) -> None:
    demo_bus(r)
    token_file = tmp_path / "busconsole.token"  # as the README's config reads it
    token_file.write_text(api_token(viewer))
    prom = prometheus(scrape_config(target=f"127.0.0.1:{asgi_server.port}", token_file=token_file))
    targets = wait_for(lambda: _targets_scraped(prom), what="the target scraped", timeout=30)
    assert targets["busconsole"]["health"] == "up", targets["busconsole"]["lastError"]

    shipped = [rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]

    def evaluated() -> list[dict[str, Any]] | None:
        rules = [rule for group in prom.api("rules")["groups"] for rule in group["rules"]]
        return rules if rules and all(rule["health"] != "unknown" for rule in rules) else None

    rules = wait_for(evaluated, what="every rule evaluated once", timeout=30)
    assert sorted(rule["name"] for rule in rules) == sorted(shipped)
    assert {rule["name"]: (rule["health"], rule.get("lastError", "")) for rule in rules} == dict.fromkeys(
        shipped, ("ok", ""))

    for title, expr in dashboard_targets():
        query = re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_VARIABLES[m.group(1)], expr)
        wait_for(lambda q=query: prom.query(q), what=f"data for {title!r}: {query}", timeout=30)
