"""What the Prometheus and Grafana tests share: a bus shaped like the demo's (``eventbus/demo.py``) with
the snapshot and mirror tasks run over it, the figures Redis itself gives for it, the names ``/metrics``
exposes with samples, a real Prometheus started on a free port, and the shipped files' paths.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from streams_app.metrics import mirror, snapshots
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0
from tests.polling import wait_for
from tests.servers import free_port

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "deploy" / "prometheus" / "busconsole-rules.yml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "tests" / "busconsole-rules.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "busconsole-dashboard.json"


def demo_bus(r: redis.Redis) -> None:
    """The demo's shop in miniature, then two snapshots (so rates exist) and a full mirror sync.

    ``orders`` with ``billing`` (a few pending), ``inventory`` (all acknowledged) and ``analytics``
    (a crashed consumer: 8 pending, never acknowledged, plus lag); ``payments`` with ``ledger``; ``emails``
    with ``mailer`` at the end of the stream and a consumer that never read; ``orders:dlq`` and
    ``payments:dlq``; an empty ``progress:nightly-report``.
    """
    for i in range(30):
        r.xadd("orders", {"type": "order.created", "n": str(i)})
    for group in ("billing", "inventory", "analytics"):
        r.xgroup_create("orders", group, id="0")
    _read(r, "orders", "billing", "billing-1", count=25, ack=20)
    _read(r, "orders", "inventory", "inventory-1", count=30, ack=30)
    _read(r, "orders", "analytics", "analytics-worker-1", count=8, ack=0)
    for i in range(10):
        r.xadd("payments", {"type": "payment.captured", "n": str(i)})
    r.xgroup_create("payments", "ledger", id="0")
    _read(r, "payments", "ledger", "ledger-1", count=10, ack=9)
    for i in range(5):
        r.xadd("emails", {"type": "receipt", "n": str(i)})
    r.xgroup_create("emails", "mailer", id="$")
    r.xgroup_createconsumer("emails", "mailer", "mailer-standby")
    for i in range(3):
        r.xadd("orders:dlq", {"type": "order.created", "n": str(i), "dlq_error": "card declined"})
    r.xadd("payments:dlq", {"type": "payment.captured", "currency": "XTS", "dlq_error": "test currency"})
    r.xadd("progress:nightly-report", {"step": "1"})
    r.xtrim("progress:nightly-report", maxlen=0, approximate=False)

    snapshots.snapshot_take(tick=T0)
    for i in range(5):
        r.xadd("orders", {"type": "order.created", "n": f"late-{i}"})
    r.xadd("orders:dlq", {"type": "order.created", "n": "late", "dlq_error": "card declined"})
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))
    mirror.mirror_sync(conn=CONN)


def _read(r: redis.Redis, key: str, group: str, consumer: str, *, count: int, ack: int) -> None:
    entries = r.xreadgroup(group, consumer, {key: ">"}, count=count)[0][1]
    if ack:
        r.xack(key, group, *[entry_id for entry_id, _ in entries[:ack]])


@dataclass(frozen=True)
class RedisFigures:
    """What Redis says of the bus: XLEN per stream, per group XINFO GROUPS' lag and XPENDING's count."""

    lengths: dict[str, int]
    pending: dict[tuple[str, str], int]
    lag: dict[tuple[str, str], int]
    consumers: int
    dlqs: dict[str, int]


def redis_figures(r: redis.Redis, *, dlqs: tuple[str, ...] = ("orders:dlq", "payments:dlq")) -> RedisFigures:
    keys = sorted(k.decode() for k in r.scan_iter(_type="stream"))
    pending, lag, consumers = {}, {}, 0
    for key in keys:
        for g in r.xinfo_groups(key):
            name = g["name"].decode()
            pending[(key, name)] = r.xpending(key, name)["pending"]
            lag[(key, name)] = g["lag"]
            consumers += len(r.xinfo_consumers(key, name))
    return RedisFigures({k: r.xlen(k) for k in keys}, pending, lag, consumers, {k: r.xlen(k) for k in dlqs})


def exposed_names(text: str) -> set[str]:
    """The names of the samples in an exposition (``_total`` included), parsed by prometheus_client.

    A family announced with ``# HELP``/``# TYPE`` but without samples does not count: a query over it
    would find nothing.
    """
    return {sample.name for family in text_string_to_metric_families(text) for sample in family.samples}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_targets() -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every query target of every panel, rows' nested panels included."""
    out: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            out.extend((panel["title"], target["expr"]) for target in panel.get("targets", []))
            walk(panel.get("panels", []))

    walk(dashboard()["panels"])
    return out


def binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"{name} is not on PATH: run `make setup` (scripts/ensure_system.sh installs Debian's prometheus)")
    return path


@dataclass
class PrometheusServer:
    """A real ``prometheus`` on 127.0.0.1 and a free port, in a temp dir, with the config given to it."""

    config: dict[str, Any]
    port: int = field(default_factory=free_port)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="busconsole-prometheus-")))
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> PrometheusServer:
        config = self.directory / "prometheus.yml"
        config.write_text(json.dumps(self.config, indent=2))  # JSON is YAML
        self.log = self.directory / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [binary("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={self.directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT,
            )
        wait_for(self._ready, what=f"prometheus ready on {self.port}", timeout=30)
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector ``expr`` gives now (``/api/v1/query``)."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return data["result"]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None
        shutil.rmtree(self.directory, ignore_errors=True)


def scrape_config(*, target: str, token: str | None = None, token_file: Path | None = None,
                  interval: str = "1s") -> dict[str, Any]:
    """A Prometheus config scraping busconsole's ``/metrics`` at ``target`` with a bearer token (inline, or
    read from ``token_file`` as the README's config does), every ``interval``, and evaluating the shipped
    alert rules: the README's config over plain HTTP with a short interval."""
    credentials = {"credentials": token} if token_file is None else {"credentials_file": str(token_file)}
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "rule_files": [str(RULES)],
        "scrape_configs": [{
            "job_name": "busconsole",
            "metrics_path": "/metrics",
            "authorization": {"type": "Bearer", **credentials},
            "static_configs": [{"targets": [target]}],
        }],
    }
