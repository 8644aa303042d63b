"""The stream page's frame after the work that does not change per request was moved out of it: the
navigation links reversed once per process, the search box and export form filled from the query string
in Python, the hidden parameters of the "Jump to" form, the ID times, and the stream's facts read with its
dead-letter check in one round trip.

Expected values come from Django's ``reverse()``, from plain Python (``html.escape``, ``urlencode``,
``datetime``) and from Redis itself (``TYPE``, ``INFO commandstats``), never from the tags under test.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
import redis
import redis.connection
from django.contrib.auth.models import Group, User
from django.template import Context, Template
from django.test import Client
from django.urls import reverse, set_script_prefix
from redis.cluster import RedisCluster

from streams_app.redis_ops.reads import streams as stream_reads
from tests.console.helpers import CONN, seg, stream_url
from tests.servers import RedisClusterServers

HOSTILE = '<script>"x"&\'</script>'
HOSTILE_KEY = "ev<il>\"&':key"  # no "/": a path segment holds it as is

NAV = ["overview", "alerts", "reports", "jobs", "audit", "views", "tokens", "logout"]
NAV_CONN = ["streams", "dlq-list", "retries-list"]


def _render(source: str, **context: object) -> str:
    return Template("{% load console %}" + source).render(Context(context))


def test_navigation_links_are_what_reverse_gives() -> None:
    for name in NAV:
        assert _render(f"{{% nav_url '{name}' %}}") == html.escape(reverse(name))
    for name in NAV_CONN:
        for conn in ("default", "other"):
            assert _render(f"{{% nav_url '{name}' conn=c %}}", c=conn) == html.escape(
                reverse(name, kwargs={"conn": conn})
            )


def test_navigation_links_follow_the_script_prefix() -> None:
    """A deployment under a sub-path: the cached links change with the prefix, never stay stale."""
    before = _render("{% nav_url 'alerts' %}")
    try:
        set_script_prefix("/console/")
        assert _render("{% nav_url 'alerts' %}") == reverse("alerts") == "/console" + before
    finally:
        set_script_prefix("/")
    assert _render("{% nav_url 'alerts' %}") == before


def test_the_page_frame_links_every_navigation_target(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    body = viewer_client.get(stream_url("orders")).content.decode()
    hrefs = set(re.findall(r'(?:href|action)="([^"]+)"', body))
    expected = {reverse(name) for name in NAV} | {reverse(name, kwargs={"conn": CONN}) for name in NAV_CONN}
    assert expected <= hrefs


def test_a_role_change_shows_on_the_next_request(viewer: User, viewer_client: Client, r: redis.Redis) -> None:
    """The role is remembered for one request only: promoted between two requests, the next page shows it."""
    r.xadd("orders", {"n": "1"})
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert '<span class="role role-viewer">viewer</span>' in body
    assert 'id="stream-admin"' not in body
    viewer.groups.add(Group.objects.get(name="admin"))
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert '<span class="role role-admin">admin</span>' in body
    assert 'id="stream-admin"' in body
    viewer.groups.set([Group.objects.get(name="viewer")])
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert '<span class="role role-viewer">viewer</span>' in body and 'id="stream-admin"' not in body


def test_the_search_box_echoes_the_query_string_escaped(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    params = {"q": HOSTILE, "from": '"><b>', "to": "1-0", "direction": "desc", "limit": "7&x=<y>"}
    body = viewer_client.get(stream_url("orders") + "?" + urlencode(params)).content.decode()
    box = body.split('<div class="page-head" id="search">', 1)[1].split("</form>", 1)[0]
    assert f'name="q" value="{html.escape(HOSTILE)}"' in box
    assert f'name="from" value="{html.escape(params["from"])}"' in box
    assert 'name="to" value="1-0"' in box
    assert (
        '<option value="asc">oldest first</option><option value="desc" selected>newest first</option>' in box
    )
    assert f'<input type="hidden" name="limit" value="{html.escape(params["limit"])}">' in box
    assert f'<a href="{stream_url("orders")}">Clear</a>' in box
    assert "<script>" not in box and "<b>" not in box
    # The results load from the search endpoint with the same query string.
    assert f'hx-get="{stream_url("orders")}search/?{html.escape(urlencode(params))}"' in body


def test_without_a_search_the_box_is_empty(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    body = viewer_client.get(stream_url("orders")).content.decode()
    box = body.split('<div class="page-head" id="search">', 1)[1].split("</form>", 1)[0]
    assert 'name="q" value=""' in box and 'name="from" value=""' in box and 'name="to" value=""' in box
    assert (
        '<option value="asc" selected>oldest first</option><option value="desc">newest first</option>' in box
    )
    assert 'name="limit"' not in box and "Clear" not in box
    assert 'id="search-results"' not in body


def test_the_export_form_takes_the_search_and_the_configured_limit(
    viewer_client: Client, r: redis.Redis, settings
) -> None:
    settings.BUSCONSOLE_EXPORT_STREAM_MAX = 12345
    r.xadd("orders", {"n": "1"})
    body = viewer_client.get(stream_url("orders") + "?" + urlencode({"q": HOSTILE})).content.decode()
    form = body.split('id="export-form"', 1)[1].split("</form>", 1)[0]
    assert "(over 12345 entries)" in form
    assert f'name="q" class="mono" size="30" value="{html.escape(HOSTILE)}"' in form
    assert re.search(r'name="csrfmiddlewaretoken" value="[^"]+"', form)


def test_the_jump_form_keeps_the_groups_parameters_escaped(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "g", id="0")
    query = [("groups_sort", "name"), ("x", "1"), ("groups_order", "asc"), ("groups_page", '1"><b>')]
    response = viewer_client.get(stream_url("orders") + "?" + urlencode(query))
    assert response.status_code == 400  # the page number is validated before anything is shown
    query[-1] = ("groups_page", "1")
    body = viewer_client.get(stream_url("orders") + "?" + urlencode(query)).content.decode()
    jump = body.split("<label>Jump to", 1)[1].split("</form>", 1)[0]
    hidden = re.findall(r'<input type="hidden" name="([^"]*)" value="([^"]*)">', jump)
    assert hidden == [
        ("order", "desc"),
        ("groups_sort", "name"),
        ("groups_order", "asc"),
        ("groups_page", "1"),
    ]


def test_the_jump_form_escapes_what_it_keeps() -> None:
    from django.test import RequestFactory

    request = RequestFactory().get("/", {"groups_sort": HOSTILE, "other": "x"})
    out = _render('{% hidden_params "groups_sort" "groups_page" %}', request=request)
    assert out == f'<input type="hidden" name="groups_sort" value="{html.escape(HOSTILE)}">'


@pytest.mark.parametrize(
    "entry_id", ["1767225600000-0", "1700000000123-5", "0-1", "18446744073709551615-0", "", None, "-", "x"]
)
def test_id_times_are_shown_to_the_second_in_utc(entry_id: str | None) -> None:
    out = _render("{{ i|idtime_text }}", i=entry_id)
    ms = entry_id.split("-")[0] if entry_id else ""
    if not ms.isdigit():
        assert out == ""
        return
    expected = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
    if int(ms) < 253402300800000:
        expected = datetime.fromtimestamp(int(ms) // 1000, tz=UTC)
    assert out == expected.strftime("%Y-%m-%d %H:%M:%S")


def test_the_facts_show_the_time_of_the_newest_and_oldest_ids(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"}, id="1767225600123-0")
    r.xadd("orders", {"n": "2"}, id="1767229200999-0")
    body = viewer_client.get(stream_url("orders")).content.decode()
    facts = body.split('<section class="facts">', 1)[1].split("</section>", 1)[0]
    assert '<time class="small muted">2026-01-01 01:00:00 UTC</time>' in facts  # newest
    assert '<time class="small muted">2026-01-01 00:00:00 UTC</time>' in facts  # oldest


class _Sends:
    """What redis-py sends while it is on: one count per command sent alone, one per pipeline."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self.on = False
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(conn, command, check_health=True):
            if self.on:
                self.count += 1
            return original(conn, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)


def _commands(r: redis.Redis) -> dict[str, int]:
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in r.info("commandstats").items()}


def test_facts_and_dead_letter_queues_in_one_round_trip(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xadd("{orders}:dlq", {"error": "x"})
    r.set("orders:dlq", "not a stream")
    stream_reads.stream_info(CONN, b"orders")  # the client is connected before counting
    sends = _Sends(monkeypatch)
    r.config_resetstat()
    sends.on = True
    info, dlqs, missed = stream_reads.stream_info_with_dlqs(CONN, b"orders")
    sends.on = False
    assert sends.count == 1
    commands = _commands(r)
    assert commands["xinfo|stream"] == 1 and commands["xinfo|groups"] == 1 and commands["type"] == 2
    assert info.length == r.xlen("orders") and [g.name for g in info.groups] == [b"billing"]
    assert (
        dlqs == [k for k in (b"{orders}:dlq", b"orders:dlq") if r.type(k) == b"stream"] == [b"{orders}:dlq"]
    )
    assert missed == ()


def test_dead_letter_queues_named_after_groups_cost_a_second_trip(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = b"omni-stream:orders"
    r.xadd(key, {"n": "1"})
    for group in (b"g1", b"g2", b'"><b>'):
        r.xgroup_create(key, group, id="0")
    r.xadd(b"omni-dlq:g2", {"error": "x"})
    r.xadd(b'omni-dlq:"><b>', {"error": "x"})
    r.xadd(b"omni-stream:orders:dlq", {"error": "x"})
    stream_reads.stream_info(CONN, key)
    sends = _Sends(monkeypatch)
    sends.on = True
    _, dlqs, missed = stream_reads.stream_info_with_dlqs(CONN, key)
    sends.on = False
    assert sends.count == 2
    groups = sorted(g["name"] for g in r.xinfo_groups(key))
    candidates = [b"{omni-stream:orders}:dlq", b"omni-stream:orders:dlq", *(b"omni-dlq:" + g for g in groups)]
    assert dlqs == [k for k in candidates if r.type(k) == b"stream"]
    assert missed == ()


def test_a_missing_stream_is_not_found(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("{gone}:dlq", {"error": "x"})
    assert viewer_client.get(stream_url("gone")).status_code == 404
    r.set("plain", "x")
    assert viewer_client.get(stream_url("plain")).status_code == 404


def test_the_stream_page_links_its_dead_letter_queue(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd(HOSTILE_KEY, {"n": "1"})
    r.xadd(HOSTILE_KEY + ":dlq", {"error": "x"})
    body = viewer_client.get(stream_url(HOSTILE_KEY)).content.decode()
    assert f'href="/c/{CONN}/dlq/{seg(HOSTILE_KEY + ":dlq")}/"' in body
    assert f'title="Dead letters in {html.escape(HOSTILE_KEY + ":dlq")}"' in body


def test_on_a_cluster_a_silent_dead_letter_node_is_named_not_fatal(
    own_cluster: RedisClusterServers, viewer_client: Client
) -> None:
    rc = RedisCluster.from_url(own_cluster.url())
    first = f"127.0.0.1:{own_cluster.nodes[0].port}"  # the node the console meets the cluster through
    stream = next(
        s
        for s in (f"orders{i}".encode() for i in range(100))
        if rc.get_node_from_key(s).name != rc.get_node_from_key(s + b":dlq").name
        and first not in (rc.get_node_from_key(s).name, rc.get_node_from_key(s + b":dlq").name)
    )
    dlq = stream + b":dlq"
    rc.xadd(stream, {"n": "1"})
    rc.xadd(dlq, {"error": "x"})
    dead = rc.get_node_from_key(dlq).name
    rc.close()
    body = viewer_client.get(stream_url(stream)).content.decode()
    assert f'href="/c/{CONN}/dlq/{seg(dlq)}/"' in body and "DLQ not checked" not in body

    victim = next(node for node in own_cluster.nodes if f"127.0.0.1:{node.port}" == dead)
    victim.process.kill()
    victim.process.wait(5)
    page = viewer_client.get(stream_url(stream))
    assert page.status_code == 200
    body = page.content.decode()
    assert f"DLQ not checked on {dead} (no answer)" in body and f"/dlq/{seg(dlq)}/" not in body


def test_the_live_refresh_reads_the_entries_only(viewer_client: Client, r: redis.Redis) -> None:
    """The htmx refresh of the entries section reads no facts, groups or DLQs: one TYPE and one range."""
    for i in range(3):
        r.xadd("orders", {"n": str(i)})
    for i in range(50):
        r.xgroup_create("orders", f"g{i}", id="0")
    r.xadd("{orders}:dlq", {"error": "x"})
    full = viewer_client.get(stream_url("orders")).content.decode()
    r.config_resetstat()
    refresh = viewer_client.get(stream_url("orders"), HTTP_HX_REQUEST="true")
    commands = _commands(r)
    commands.pop("config|resetstat", None)
    assert commands == {"type": 1, "xrevrange": 1}
    body = refresh.content.decode()
    assert body.lstrip().startswith('<section id="entries"') and "Consumer groups" not in body
    section = full.split('<section id="entries"', 1)[1].split("</section>", 1)[0]
    assert body.split('<section id="entries"', 1)[1].split("</section>", 1)[0] == section


def _figure(source: str, **context: object) -> str:
    return Template("{% load figures %}" + source).render(Context(context))


@pytest.mark.parametrize(
    ("lag", "version", "groups", "expected"),
    [
        (0, "7.0.15", 1, "0\n"),
        (12345, "7.0.15", 1, "<strong>12345</strong>\n"),
        (None, "7.0.15", 1, '<span class="unknown-figure" title="{unknown}" tabindex="0">unknown</span>\n'),
        (
            None,
            "6.2.14",
            1,
            '<span class="unknown-figure" title="{old}" tabindex="0">n/a on Redis 6.2</span>\n',
        ),
        (None, None, 0, '<span class="muted" title="{none}">—</span>\n'),
    ],
)
def test_lag_figures(lag: int | None, version: str | None, groups: int, expected: str) -> None:
    from streams_app.templatetags import figures

    out = _figure("{% lag_figure lag version=v groups=n %}", lag=lag, v=version, n=groups)
    assert out == expected.format(
        unknown=html.escape(figures.LAG_UNKNOWN),
        old=html.escape(figures.LAG_TOO_OLD),
        none=html.escape(figures.LAG_NO_GROUP),
    )
    assert "'" not in out.split("title=", 1)[-1]  # the apostrophes of the reasons are escaped too


def test_inactive_figures() -> None:
    assert _figure("{% inactive_figure ms version='7.2.4' %}", ms=(26 * 3600 + 5) * 1000) == "1d 2h\n"
    never = _figure("{% inactive_figure None version='7.2.4' %}")
    assert (
        never.startswith('<span class="unknown-figure" title="This consumer has never read')
        and ">never</span>\n" in never
    )
    old = _figure("{% inactive_figure None version=v %}", v='7.0.15"><b>')
    assert ">n/a on Redis 7.0</span>\n" in old and "7.0.15&quot;&gt;&lt;b&gt;" in old and "<b>" not in old
