"""The shipped alert rules (``deploy/prometheus/busconsole-rules.yml``) pass ``promtool check rules``, pass
their unit tests under ``promtool test rules`` (Prometheus's own evaluator on series written for the test:
``deploy/prometheus/tests/busconsole-rules.test.yml``), where each alert has a case in which it fires and
one in which it stays quiet, and read only metric names that ``/metrics`` exposes (or that Prometheus
makes itself, such as ``up``).
"""

from __future__ import annotations

import re
import subprocess
from typing import Any

import redis
import yaml
from django.test import Client

from tests.console.metrics.prometheus_helpers import RULES, RULES_TEST, binary, demo_bus, exposed_names
from tests.console.metrics.promql import metric_names

#: Series Prometheus writes for every scrape target, not the target itself.
PROMETHEUS_MADE = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
#: What the rules must catch, by the alert that does.
WANTED = {
    "DLQ growing": "BusconsoleDlqGrowing",
    "lag growing": "BusconsoleLagGrowing",
    "consumer stuck": "BusconsoleConsumerStuck",
    "snapshot skipped": "BusconsoleSnapshotSkipped",
    "Redis unreachable": "BusconsoleRedisUnreachable",
}


def _alerts() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], capture_output=True, text=True, timeout=120)


def test_promtool_checks_the_rules() -> None:
    done = _promtool("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in done.stdout
    assert set(WANTED.values()) <= {rule["alert"] for rule in _alerts()}


def test_promtool_unit_tests_pass_with_a_firing_and_a_quiet_case_for_every_alert() -> None:
    done = _promtool("test", "rules", str(RULES_TEST))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout

    cases = [case for test in yaml.safe_load(RULES_TEST.read_text())["tests"] for case in test["alert_rule_test"]]
    firing = {case["alertname"] for case in cases if case["exp_alerts"]}
    quiet = {case["alertname"] for case in cases if not case["exp_alerts"]}
    names = {rule["alert"] for rule in _alerts()}
    assert (names - firing, names - quiet) == (set(), set())


def test_the_rules_read_metrics_that_metrics_exposes(r: redis.Redis, client: Client, viewer, api_token) -> None:
    demo_bus(r)
    exposed = exposed_names(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode())
    used = {name: rule["alert"] for rule in _alerts() for name in metric_names(rule["expr"])}
    assert {name: alert for name, alert in used.items() if name not in exposed | PROMETHEUS_MADE} == {}
    assert "busconsole_group_lag" in used and "busconsole_snapshot_skipped_total" in used


def test_the_readmes_scrape_config_passes_promtool(tmp_path) -> None:
    """The README's prometheus.yml, with its two paths pointed at the repository's rules and a token file."""
    readme = (RULES.parents[2] / "README.md").read_text()
    block = re.search(r"```yaml\n(# prometheus\.yml\n.*?)```", readme, re.DOTALL)
    assert block, "the README's 'Prometheus and Grafana' section lost its prometheus.yml"
    token = tmp_path / "busconsole.token"
    token.write_text("not-checked-by-promtool")
    config = tmp_path / "prometheus.yml"
    config.write_text(block.group(1).replace("/etc/prometheus/busconsole-rules.yml", str(RULES))
                      .replace("/etc/prometheus/busconsole.token", str(token)))
    done = _promtool("check", "config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in done.stdout
