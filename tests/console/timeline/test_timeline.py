"""The incident timeline: its data is what the test wrote, and its window lives in the address.

The test drives a real Redis between real snapshots (entries added, a group reading some, dead letters
arriving) and counts in plain Python what each snapshot must say: the DLQ's depth and its growth, each
group's lag and pending. It writes alerts, audit rows (one through a real action, others as rows) and
annotations (through the API) at known times, and checks the timeline shows exactly those of its scope
and window, in order, and never an audit row's parameters. Zoom, pan and the permalink are checked
against the plain arithmetic of the window's ends.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from streams_app.alerts.models import Alert, AlertRule
from streams_app.annotations.models import Annotation
from streams_app.audit.models import AuditEvent
from streams_app.metrics import mirror, snapshots
from streams_app.metrics.models import name_hash
from streams_app.timeline import tracks
from streams_app.timeline.tracks import GROUPS_MAX, timeline_build
from streams_app.timeline.window import window_parse
from tests.console.helpers import post_json

pytestmark = pytest.mark.django_db

CANARY = "canary-param-4e1b"
GROUPS = ["billing", *(f"g{i}" for i in range(GROUPS_MAX))]  # one more than the timeline shows


class Bus:
    """What the test did to Redis, counted in plain Python, and the ticks it snapshotted."""

    def __init__(self, r: redis.Redis) -> None:
        self.r = r
        self.added = 0
        self.read_by_billing = 0
        self.dead = 0
        self.ticks: list[datetime] = []
        self.expected: dict[str, list[float]] = {"depth": [], "lag": [], "pending": []}

    def step(self, tick: datetime, *, add: int, read: int, die: int) -> None:
        for _ in range(add):
            self.r.xadd("orders", {"type": "order.created"})
        self.added += add
        if read:
            got = self.r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=read)
            self.read_by_billing += sum(len(entries) for _, entries in got)
        for _ in range(die):
            self.r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom"})
        self.dead += die
        snapshots.snapshot_take(tick=tick)
        self.ticks.append(tick)
        self.expected["depth"].append(self.dead)
        # lag as Redis reports it (None where it cannot tell: docs/architecture.md#lag-redis-cannot-tell); where it can, it is what was not read
        lag = next(g["lag"] for g in self.r.xinfo_groups("orders") if g["name"] == b"billing")
        assert lag is None or lag == self.added - self.read_by_billing
        self.expected["lag"].append(lag)
        self.expected["pending"].append(self.read_by_billing)


@pytest.fixture
def bus(r: redis.Redis) -> Bus:
    r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "old"})
    r.xdel("orders:dlq", r.xrange("orders:dlq")[0][0])  # an empty DLQ, seen by the first snapshot
    r.xadd("orders", {"type": "first"})
    for name in GROUPS:
        r.xgroup_create("orders", name, id="$")
    r.xadd("payments", {"type": "payment"})
    b = Bus(r)
    first = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(minutes=6))
    for i, (add, read, die) in enumerate([(3, 0, 0), (4, 2, 1), (2, 5, 3), (0, 1, 0), (5, 0, 2)]):
        b.step(first + timedelta(seconds=60 * i), add=add, read=read, die=die)
    return b


def pairs(points) -> list[tuple[datetime, float | None]]:
    return [(t, v) for t, v in points]  # the samples as read, whatever sequence type holds them


def test_the_timeline_shows_what_the_test_wrote(bus: Bus, operator: User, viewer_client: Client, api_token,
                                                 monkeypatch) -> None:
    t = bus.ticks
    rule = AlertRule.objects.create(name="dead letters", kind=AlertRule.Kind.DLQ_GROWTH, threshold=1)

    def alert(key: str, opened: datetime, resolved: datetime | None, message: str) -> Alert:
        return Alert.objects.create(
            rule=rule, connection="default", target_key=key.encode(), key_hash=name_hash(key.encode()),
            target_text=key, target_hash=name_hash(f"{key}{opened}".encode()),
            state="resolved" if resolved else "open", opened_at=opened, resolved_at=resolved, message=message)

    grew = alert("orders:dlq", t[1] + timedelta(seconds=5), t[3] + timedelta(seconds=5), "grew by 4")
    still = alert("orders:dlq", t[4] + timedelta(seconds=5), None, "grew by 2")
    alert("payments", t[2], None, "another stream's alert")
    alert("orders:dlq", t[0] - timedelta(days=2), t[0] - timedelta(days=1), "long ago")

    # an operator action through the API (its audit row is written now), and rows as the audit path writes them
    token = api_token(operator)
    pending = [p["message_id"].decode() for p in bus.r.xpending_range("orders", "billing", "-", "+", 10)]
    acked = post_json("/api/v1/c/default/streams/orders/groups/billing/ack", {"ids": pending[:2]}, token)
    assert acked.status_code == 200 and acked.json()["acked"] == 2
    AuditEvent.objects.create(at=t[2] + timedelta(seconds=10), username="rita", connection="default",
                              action="dlq.requeue_matching", target_stream=b"orders:dlq", target_display="orders:dlq",
                              parameters={"q": f'data.ssn == "{CANARY}"'}, outcome="ok", affected=3)
    AuditEvent.objects.create(at=t[2] + timedelta(seconds=20), username="rita", connection="default",
                              action="stream.trim.preview", target_stream=b"orders", target_display="orders",
                              outcome="ok")  # a preview changes nothing: not shown
    AuditEvent.objects.create(at=t[2] + timedelta(seconds=30), username="sam", connection="default", action="ack",
                              target_stream=b"payments", target_display="payments", outcome="ok", affected=1)

    deploy = post_json("/api/v1/annotations", {"text": "deploy v1.4 <script>", "tags": ["deploy"],
                                               "connection": "default", "stream": "orders",
                                               "time": t[2].isoformat()}, token).json()
    other = post_json("/api/v1/annotations", {"text": "payments deploy", "connection": "default",
                                              "stream": "payments", "time": t[3].isoformat()}, token).json()
    monkeypatch.setattr(tracks, "STUCK_IDLE", timedelta(0))  # worker-1 holds entries: it counts as stuck now
    mirror.mirror_sync(conn="default")

    window = window_parse({"window": "15m"}, now=timezone.now())
    line = timeline_build(conn="default", key=b"orders", window=window)

    # snapshots: the DLQ's depth and growth, billing's lag and pending, at every tick, as counted above
    assert [m.key_text for m in line.dlqs] == ["orders:dlq"] and line.dlqs_total == 1
    assert pairs(line.dlq_points) == list(zip(t, map(float, bus.expected["depth"]), strict=True))
    depth = bus.expected["depth"]
    assert pairs(line.growth_points) == [(t[i], float(depth[i] - depth[i - 1])) for i in range(1, len(t))]
    billing = next(g for g in line.groups if g.group.name_text == "billing")
    assert pairs(billing.series["lag"]) == [(at, None if v is None else float(v)) for at, v in zip(t, bus.expected["lag"], strict=True)]
    assert pairs(billing.series["pending"]) == list(zip(t, map(float, bus.expected["pending"]), strict=True))
    assert line.groups[0].group.name_text == "billing"  # the most pending first
    assert (len(line.groups), line.groups_total) == (GROUPS_MAX, len(GROUPS))

    lanes = {lane.kind: lane for lane in line.lanes}
    assert [m.note.ident for m in lanes["alerts"].marks] == [grew.pk, still.pk]
    assert [m.note.ident for m in lanes["annotations"].marks] == [deploy["id"]]
    actions = [m.note.text for m in lanes["actions"].marks]
    assert len(actions) == 2 and actions[0].startswith("rita: dlq.requeue_matching on orders:dlq (ok, 3 changed")
    assert actions[1].startswith(f"{operator.username}: ack on orders · group billing (ok, 2 changed, 2 IDs named)")
    stuck = [m.note.text for m in lanes["stuck"].marks]
    assert stuck == [f"consumer worker-1 of billing holds {bus.read_by_billing - 2} pending, "
                     + stuck[0].split(" pending, ", 1)[1]]

    kinds = [(e.kind, e.at) for e in line.events]
    assert [k for k, _ in kinds if k != "stuck"] == [
        "alert opened", "annotation", "action", "alert resolved", "alert opened", "action"]
    assert [at for _, at in kinds] == sorted(at for _, at in kinds)

    # the page says the same, escaped, and never an action's parameters
    html = viewer_client.get("/c/default/streams/orders/timeline/?window=15m").content.decode()
    assert CANARY not in html and "stream.trim.preview" not in html
    assert "deploy v1.4 &lt;script&gt;" in html and "deploy v1.4 <script>" not in html
    assert f'data-annotation="{deploy["id"]}"' in html and f'data-annotation="{other["id"]}"' not in html
    assert f">{GROUPS_MAX} of {len(GROUPS)} groups" in html
    chart = re.search(r'data-chart="pending-billing">(.*?)</figure>', html, re.S).group(1)
    assert f'data-points="{len(t)}"' in chart
    assert re.search(rf'class="chart-last"[^>]*>{bus.expected["pending"][-1]}</span>', chart)
    assert f'data-annotation="{deploy["id"]}"' in chart  # the annotation is on the timeline's charts too

    # the connection's timeline has the other stream's alert, action and annotation too
    whole = timeline_build(conn="default", key=None, window=window)
    assert sorted(e.kind for e in whole.events if "payments" in e.text) == ["action", "alert opened", "annotation"]
    assert CANARY not in viewer_client.get("/c/default/timeline/?window=15m").content.decode()


def _query(href: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(unescape(href)).query).items()}


def _nav(html: str) -> dict[str, dict[str, str]]:
    return {m.group(2): _query(m.group(1)) for m in re.finditer(r'<a href="([^"]+)"[^>]*data-nav="([a-z-]+)"', html)}


def test_zoom_pan_and_the_permalink_are_addresses(viewer_client: Client, r: redis.Redis) -> None:
    html = viewer_client.get("/c/default/timeline/?from=2026-11-22T10:00:00Z&to=2026-11-22T11:00:00Z").content.decode()
    assert 'data-window-start="2026-11-22T10:00:00+00:00"' in html and 'data-window-end="2026-11-22T11:00:00+00:00"' in html
    nav = _nav(html)
    assert nav["zoom-in"] == {"from": "2026-11-22T10:15:00Z", "to": "2026-11-22T10:45:00Z"}
    assert nav["zoom-out"] == {"from": "2026-11-22T09:30:00Z", "to": "2026-11-22T11:30:00Z"}
    assert nav["earlier"] == {"from": "2026-11-22T09:30:00Z", "to": "2026-11-22T10:30:00Z"}
    assert nav["later"] == {"from": "2026-11-22T10:30:00Z", "to": "2026-11-22T11:30:00Z"}
    assert nav["permalink"] == {"from": "2026-11-22T10:00:00Z", "to": "2026-11-22T11:00:00Z"}

    # a live window's permalink fixes its ends: opened later, it shows the same window
    live = viewer_client.get("/c/default/timeline/?window=6h").content.decode()
    start = re.search(r'data-window-start="([^"]+)"', live).group(1)
    end = re.search(r'data-window-end="([^"]+)"', live).group(1)
    permalink = _nav(live)["permalink"]
    assert datetime.fromisoformat(end) - datetime.fromisoformat(start) == timedelta(hours=6)
    assert "later" not in _nav(live)  # nothing after now
    again = viewer_client.get("/c/default/timeline/", permalink).content.decode()
    assert f'data-window-start="{datetime.fromisoformat(start).replace(microsecond=0).isoformat()}"' in again
    assert 'data-window-live="false"' in again
    # panning never goes past now
    now = datetime.now(UTC)
    later = _nav(viewer_client.get("/c/default/timeline/", {"from": (now - timedelta(minutes=40)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"), "to": (now - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")}).content.decode())["later"]
    assert datetime.fromisoformat(later["to"].replace("Z", "+00:00")) <= datetime.now(UTC)


@pytest.mark.parametrize("query", [
    {"window": "2h"}, {"from": "2026-11-22T10:00:00Z"}, {"from": "x", "to": "y"},
    {"from": "2026-11-22T10:00:00Z", "to": "2026-11-22T10:01:00Z"},  # under 5 minutes
    {"from": "2026-11-01T10:00:00Z", "to": "2026-11-22T10:00:00Z"},  # over 7 days
    {"from": "2026-11-22T11:00:00Z", "to": "2026-11-22T10:00:00Z"},
])
def test_a_window_it_cannot_show_is_a_400(viewer_client: Client, query: dict, r: redis.Redis) -> None:
    for path in ("/c/default/timeline/", "/c/default/streams/orders/timeline/"):
        assert viewer_client.get(path, query).status_code == 400


def test_the_form_adds_an_annotation_for_operators_with_csrf(operator: User, viewer_client: Client,
                                                             r: redis.Redis) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    form = {"text": "rollback <b>", "tags": "deploy, rollback", "time": "2026-11-22T10:30:00Z",
            "from": "2026-11-22T10:00:00Z", "to": "2026-11-22T11:00:00Z"}
    assert web.post("/c/default/streams/orders/timeline/annotate/", form).status_code == 403  # no CSRF token
    page = web.get("/c/default/streams/orders/timeline/?from=2026-11-22T10:00:00Z&to=2026-11-22T11:00:00Z")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    done = web.post("/c/default/streams/orders/timeline/annotate/", {**form, "csrfmiddlewaretoken": token})
    assert done.status_code == 302
    assert done["Location"] == "/c/default/streams/orders/timeline/?from=2026-11-22T10%3A00%3A00Z&to=2026-11-22T11%3A00%3A00Z"
    a = Annotation.objects.get()
    assert (a.text, a.tags, a.at, bytes(a.key), a.connection) == (
        "rollback <b>", ["deploy", "rollback"], datetime(2026, 11, 22, 10, 30, tzinfo=UTC), b"orders", "default")
    back = web.get(done["Location"]).content.decode()
    assert f'data-annotation="{a.pk}"' in back and "rollback &lt;b&gt;" in back
    assert list(AuditEvent.objects.values_list("action", "outcome")) == [("annotation.create", "ok")]

    refused = viewer_client.post("/c/default/timeline/annotate/", {"text": "no"})
    assert refused.status_code == 403
    bad = web.post("/c/default/timeline/annotate/", {"text": "x", "time": "soon", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400
    assert Annotation.objects.count() == 1
    assert "Add an annotation" not in viewer_client.get("/c/default/timeline/").content.decode()
