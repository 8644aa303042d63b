"""The Grafana dashboard (``deploy/grafana/busconsole-dashboard.json``) reads only metric names that the
console's ``/metrics`` really exposes, with samples, on a bus shaped like the demo's; its variables pick
a connection and a stream; its JSON is a dashboard Grafana imports (panels with ids, positions, targets).

Metric names are taken from each target's PromQL by the tokenizer of ``tests/console/metrics/promql.py``
(documented there, and checked here on expressions whose names are known); the exposed names are parsed
from the live response by prometheus_client's parser. ``test_prometheus_server.py`` also runs every
query on a real Prometheus and requires data from each.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from tests.console.metrics.prometheus_helpers import dashboard, dashboard_targets, demo_bus, exposed_names
from tests.console.metrics.promql import metric_names, variable_metric_names


@pytest.mark.parametrize(("expr", "names"), [
    ('busconsole_group_lag{connection=~"$connection", stream=~"$stream"}', {"busconsole_group_lag"}),
    ("sum by (connection, stream) (rate(busconsole_stream_entries_added_total[$__rate_interval])) > bool 0",
     {"busconsole_stream_entries_added_total"}),
    ("busconsole_snapshot_skipped_total - busconsole_snapshot_skipped_total offset 15m > 0",
     {"busconsole_snapshot_skipped_total"}),
    ("a>0 or on(job) group_left(instance) b unless ignoring (x) c, 1e3 * d", {"a", "b", "c", "d"}),
    ('label_replace(up{job="x"}, "to", "$1", "from", "(.*)")', {"up"}),
    ("topk(5, max_over_time(busconsole_dlq_depth[5m:1m]))", {"busconsole_dlq_depth"}),
    ('1 - busconsole_snapshot_connection_error{connection=~"${connection}"}', {"busconsole_snapshot_connection_error"}),
])
def test_the_tokenizer_finds_the_metric_names(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_metric_the_dashboard_queries_is_exposed(r: redis.Redis, client: Client, viewer, api_token) -> None:
    demo_bus(r)
    exposed = exposed_names(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode())
    used: dict[str, set[str]] = {}
    for title, expr in dashboard_targets():
        for name in metric_names(expr):
            used.setdefault(name, set()).add(title)
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            for name in variable_metric_names(variable["query"]):
                used.setdefault(name, set()).add(f"variable {variable['name']}")
    assert {name: sorted(titles) for name, titles in used.items() if name not in exposed} == {}
    # names that appear only with data are among them
    assert {"busconsole_group_lag", "busconsole_stream_entries_per_second", "busconsole_dlq_depth",
            "busconsole_connection_consumer_idle_seconds_max"} <= set(used)


def test_the_dashboard_has_connection_and_stream_variables_and_importable_panels() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["connection"]["query"] == "label_values(busconsole_snapshot_connection_error, connection)"
    assert variables["stream"]["query"].startswith("label_values(busconsole_stream_length{connection=~\"$connection\"}")
    targets = dashboard_targets()
    assert len(targets) >= 20
    assert all("$connection" in expr or "snapshot" in expr or "metrics_series" in expr for _, expr in targets)
    assert any("$stream" in expr for _, expr in targets)

    panels = board["panels"]  # rows are open: their panels follow them at the top level
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    titles = {p["title"] for p in panels}
    for wanted in ("Stream length", "DLQ depth", "Lag per group", "Pending per group", "Consumers idle",
                   "Snapshot age", "Redis reachable"):
        assert wanted in titles
    for p in panels:
        assert set(p["gridPos"]) == {"h", "w", "x", "y"} and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            refs = [t["refId"] for t in p["targets"]]
            assert refs and len(refs) == len(set(refs)) and all(t["expr"] for t in p["targets"])
