"""The stream page reads what it shows in one round trip to the bus, and shows exactly what it showed
when it took two (docs/performance.md#goals-and-floors: the HTML page's cost against its API).

The page's HTML for hostile keys and payloads (markup, quotes, bidi controls, bytes that are not UTF-8,
msgpack, a value over the 64 KiB preview, a masked field) is compared with the page as the console
rendered it before the read was merged (``data/stream_page_hostile.json``, written by the code of that
commit), with only what changes per request blanked: the CSRF tokens and the clock. Round trips are
counted where redis-py sends them (a pipeline is one send), commands by Redis (``INFO commandstats``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgpack
import pytest
import redis
import redis.connection
from django.test import Client

from streams_app.masking.models import MaskRule
from tests.console.helpers import stream_url

GOLDEN = Path(__file__).parent / "data" / "stream_page_hostile.json"
KEY = b"ev<il>\"&'k\xe2\x80\xaeey\xff"
T0 = 1767225600000
HOSTILE = [
    {"type": '<script>alert("t")</script>', "data": '{"note": "<img src=x onerror=alert(1)>", "q": "\\"\'&"}'},
    {b"<b>name\xff</b>": b"a & b < c \xe2\x80\xae gnp.exe", b"card": b"4111 1111 1111 1111"},
    {"ts": str(T0 + 5), "at": "2026-01-01T00:00:00Z", "packed": msgpack.packb({"k": "<v>", "n": [1, 2]})},
    {"big": b"<q>" + b"a" * (70 * 1024), "bin": bytes(range(0, 40)), "empty": b""},
    {"json": json.dumps({"s": "\u202e<x>", "list": list(range(30)), "nested": {"a": "'\"&"}})},
    {"dup": "1", "dup ": "2", "_retries": "3", "_group": "<g>"},
]
# What changes from one request to the next: the CSRF tokens and the time the facts were read.
VOLATILE = [
    (re.compile(r'(name="csrfmiddlewaretoken" value=")[^"]+"'), r'\1"'),
    (re.compile(r'("X-CSRFToken": ")[^"]+"'), r'\1"'),
    (re.compile(r"read \d\d:\d\d:\d\d UTC"), "read UTC"),
]
# The value over the preview limit is kept in the golden file as its length (the page shows 64 KiB of it).
LONG_RUN = (re.compile(r"a{1000,}"), lambda m: f"[a x {len(m.group(0))}]")


def _fill(r: redis.Redis) -> None:
    for i, fields in enumerate(HOSTILE):
        r.xadd(KEY, fields, id=f"{T0 + i * 1001}-{i}")
    r.xgroup_create(KEY, "<grp>", id="0")
    r.xreadgroup("<grp>", "c1", {KEY: ">"}, count=2)
    r.xadd(b"{" + KEY + b"}:dlq", {"error": "<boom>"}, id=f"{T0}-0")
    MaskRule.objects.create(stream_glob="ev*", field_path="card")


def _pages(viewer_client: Client, admin_client_: Client) -> dict[str, str]:
    url = stream_url(KEY)
    pages = {
        "viewer": viewer_client.get(url),
        "viewer, a middle page": viewer_client.get(url + f"?count=2&before={T0 + 4 * 1001}-4"),
        "admin": admin_client_.get(url),
        "admin, unmasked, oldest first": admin_client_.get(url + "?order=asc&unmasked=1&count=3"),
        "viewer, htmx refresh": viewer_client.get(url + "?count=3", HTTP_HX_REQUEST="true"),
    }
    out = {}
    for name, response in pages.items():
        assert response.status_code == 200, name
        body = response.content.decode()
        for pattern, blank in [*VOLATILE, LONG_RUN]:
            body = pattern.sub(blank, body)
        out[name] = body
    return out


def test_the_page_shows_hostile_entries_exactly_as_before(
    viewer_client: Client, admin_client_: Client, r: redis.Redis
) -> None:
    _fill(r)
    pages = _pages(viewer_client, admin_client_)
    if not GOLDEN.exists():  # pragma: no cover - written once, by the commit before the merged read
        GOLDEN.write_text(json.dumps(pages, indent=1, ensure_ascii=False) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert list(pages) == list(expected)
    for name, body in pages.items():
        assert body == expected[name], name
    # What the golden holds is what the security rules want: nothing of a payload unescaped, the mask on.
    for body in pages.values():
        assert "<script>" not in body and "<img" not in body and "<b>name" not in body
    assert "4111 1111 1111 1111" not in pages["viewer"] and "4111 1111 1111 1111" in pages[
        "admin, unmasked, oldest first"
    ]


def _commands(r: redis.Redis) -> dict[str, int]:
    stats = {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in r.info("commandstats").items()}
    stats.pop("config|resetstat", None)
    return stats


def test_the_page_reads_facts_dead_letters_and_entries_in_one_round_trip(
    viewer_client: Client, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(r)
    url = stream_url(KEY) + "?count=3"
    viewer_client.get(url)  # connections made and the server's health read before counting
    bus = r.connection_pool.connection_kwargs
    sends = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counted(conn, command, check_health=True):
        if (conn.port, conn.db) == (bus["port"], bus.get("db", 0)):
            sends.append(command)
        return original(conn, command, check_health)

    r.config_resetstat()
    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
    response = viewer_client.get(url)
    monkeypatch.undo()
    stats = _commands(r)
    assert response.status_code == 200
    assert len(sends) == 1, sends
    # What was sent: the stream's facts and groups, the TYPE of each DLQ candidate and of the stream, and
    # one range of entries.
    assert stats == {"xinfo|stream": 1, "xinfo|groups": 1, "type": 3, "xrevrange": 1}


@pytest.mark.parametrize("entry_id", ["1767225600000-0", "0-1", "1-2 x&y=<z>", "é/?#"])
def test_the_links_built_once_per_stream_are_the_links_of_each_entry(entry_id: str) -> None:
    """The rows build the stream's part of their links once; each link is still what plain ``quote`` and
    ``urlencode`` make of the key and the ID (an ID that is not digits and a dash is encoded)."""
    from urllib.parse import quote, urlencode

    from streams_app.views import links

    for key in (KEY, b"orders", b"a b/c?d"):
        expected = f"/c/default/journey/?{urlencode({'q': entry_id, 'stream': key.decode('utf-8', 'replace')})}"
        assert links.journey_urls("default", key)(entry_id) == expected
        assert links.entry_urls("default", key)(entry_id) == f"/c/default/streams/{quote(key, safe='')}/entries/{entry_id}/"


def test_the_frames_files_are_where_static_puts_them_and_follow_its_settings(settings) -> None:
    from django.template import Context, Template
    from django.templatetags.static import static

    tag = Template("{% load console %}{% asset 'css/console.css' %}|{% asset 'js/x&y.js' %}")
    assert tag.render(Context()) == f"{static('css/console.css')}|{static('js/x&y.js').replace('&', '&amp;')}"
    settings.STATIC_URL = "/elsewhere/"
    assert tag.render(Context()).startswith("/elsewhere/css/console.css|")


# The navigation's links as base.html wrote them with loops, ``with`` and ``if`` tags before the tag.
NAV_BEFORE = """{% load console %}      {% for c in console_connections %}<a href="{% nav_url 'streams' conn=c.name %}" class="{% if c.name == conn %}active{% endif %}">{{ c.name }}</a>{% endfor %}
      {% with dlq_conn=conn|default:console_connections.0.name %}{% if dlq_conn %}<a href="{% nav_url 'dlq-list' conn=dlq_conn %}" class="nav-ops">DLQs</a><a href="{% nav_url 'retries-list' conn=dlq_conn %}" class="nav-ops" title="The event bus's scheduled retries">Retries</a><a href="{% nav_url 'timeline' conn=dlq_conn %}" class="nav-ops" title="The incident timeline: DLQ depth, lag, alerts, operator actions and annotations on one time axis">Timeline</a>{% endif %}{% endwith %}
      <a href="{% nav_url 'alerts' %}" class="{% if request.resolver_match.url_name == 'alerts' %}active{% endif %}">Alerts</a>
      <a href="{% nav_url 'reports' %}" class="{% if request.resolver_match.url_name == 'reports' %}active{% endif %}">Reports</a>
      <a href="{% nav_url 'jobs' %}">Jobs</a>
      <a href="{% nav_url 'audit' %}">Audit</a>
      <a href="{% nav_url 'views' %}" class="{% if request.resolver_match.url_name == 'views' %}active{% endif %}" title="Your saved views and the shared ones">Views</a>
"""


@pytest.mark.parametrize("here", [None, "alerts", "reports", "views", "jobs", "stream"])
@pytest.mark.parametrize("conn", [None, "", "default", "other", "b.c-d_e"])
# Not without connections: the template failed on ``console_connections.0.name`` (the console always has one).
@pytest.mark.parametrize("names", [["default"], ["default", "other", "b.c-d_e"]])
def test_the_navigation_links_are_what_the_template_made(conn: str | None, names: list[str], here: str | None) -> None:
    from types import SimpleNamespace

    from django.template import Context, Template

    from streams_app.redis_ops.client import Connection

    context = {"console_connections": [Connection(name=n, host="h", port=1, db=0) for n in names]}
    if conn is not None:
        context["conn"] = conn
    if here is not None:  # no request, or one Django did not resolve, marks nothing
        context["request"] = SimpleNamespace(resolver_match=SimpleNamespace(url_name=here) if here != "jobs" else None)
    expected = Template(NAV_BEFORE).render(Context(context))
    assert Template("{% load console %}      {% nav_links %}\n").render(Context(context)) == expected


@pytest.mark.parametrize("use_tz", [True, False])
def test_the_facts_clock_shows_what_the_now_tag_shows(settings, use_tz: bool) -> None:
    from django.template import Context, Template

    settings.USE_TZ, settings.TIME_ZONE = use_tz, "Asia/Kolkata"
    django_now, ours = Template('{% now "H:i:s" %}'), Template("{% load console %}{% time_now %}")
    before, shown, after = django_now.render(Context()), ours.render(Context()), django_now.render(Context())
    assert shown in (before, after) and re.fullmatch(r"\d\d:\d\d:\d\d", shown)
