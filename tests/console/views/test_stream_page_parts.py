"""The stream page's facts, the export form and search box of the stream and DLQ pages
(``streams_app/templatetags/stream_parts.py``), and the page frame's user links and "Save view" form
(``who_links``, ``save_view_form``), built in Python, give what their template markup gave: each is
compared with the markup it replaced, rendered by Django's template engine, for hostile keys, names and
queries, missing and odd values, thousands separators, each role and the CSRF field present or not.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.template import Context, Template
from django.test import RequestFactory, override_settings

from streams_app.redis_ops.types import GroupInfo, StreamInfo
from streams_app.saved.targets import SAVEABLE_PAGES

# The markup the tags replaced, as it stood in templates/streams_app/stream.html and export_form.html.
OLD_FACTS = """{% load console figures %}<section class="facts">
  <div><span class="label" title="XLEN read live when this page was made; the charts show snapshots">Length, live now</span><span class="value">{{ info.length }}</span><time class="small muted">read {% time_now %} UTC</time></div>
  <div><span class="label">Entries added</span><span class="value">{{ info.entries_added|default_if_none:"unknown" }}</span></div>
  <div><span class="label">Newest</span><span class="value mono small">{{ info.last_id|default:"—" }}</span>{% if info.last_id %}<time class="small muted">{{ info.last_id|idtime_text }} UTC</time>{% endif %}</div>
  <div><span class="label">Oldest</span><span class="value mono small">{{ info.first_id|default:"—" }}</span>{% if info.first_id %}<time class="small muted">{{ info.first_id|idtime_text }} UTC</time>{% endif %}</div>
  <div><span class="label">Last generated ID</span><span class="value mono small">{{ info.last_generated_id|default:"—" }}</span>{% if info.last_generated_id|idtime %}<time class="small muted">{{ info.last_generated_id|idtime_text }} UTC</time>{% endif %}</div>
  <div><span class="label" title="Read live when this page was made, with the length">Pending (all groups), live now</span><span class="value">{{ info.pending }}</span></div>
  <div><span class="label" title="The largest lag among the groups: entries not yet delivered to the slowest group">Lag</span><span class="value lag-cell" data-fact="stream-lag">{% lag_figure info.lag groups=info.groups|length of="stream" unknown=info.lag_unknown_groups version=health.redis_version %}</span></div>
</section>"""
OLD_EXPORT = """{% load console %}
<h2>Export</h2>
<form method="post" action="{% stream_url conn key %}export/" class="panel" id="export-form">
  {% csrf_token %}
  <p class="small muted">Download a range of <span class="mono">{{ key_text }}</span> (both ends included) as NDJSON, CSV or Parquet. A big range (over {{ stream_max }} entries) is written by a background job whose page links the file.</p>
  <div class="filters">
    <label>From <input type="text" name="from" class="mono" size="24" value="-" placeholder="ID, 2026-11-22T10:00Z or -"></label>
    <label>to <input type="text" name="to" class="mono" size="24" value="+" placeholder="ID, date-time or +"></label>
    <label>Format <select name="format">
      <option value="ndjson">NDJSON</option>
      <option value="csv">CSV</option>
      <option value="parquet">Parquet</option>
    </select></label>
    <label>Matching <input type="text" name="q" class="mono" size="30" value="{{ q }}" placeholder="search query (optional)"></label>
  </div>
  <p><button type="submit" id="export-download">Download</button>
     <button type="submit" class="subtle button" id="export-job" formaction="{% stream_url conn key %}export/job/">Export in background</button></p>
</form>
"""
HOSTILE = "<script>\"x\"&'\u202e</script>"


def _group(name: bytes, *, pending: int, lag: int | None) -> GroupInfo:
    return GroupInfo(name=name, consumers=1, pending=pending, last_delivered_id="0-0", entries_read=None, lag=lag)


def _info(**changes: object) -> StreamInfo:
    fields: dict = {
        "key": b"k", "length": 1234567, "first_id": "1767225600000-0", "last_id": "1767225600999-7",
        "last_generated_id": "1767225600999-7", "entries_added": 9876543, "max_deleted_entry_id": "0-0",
        "radix_tree_keys": 1, "groups": (),
    }
    fields.update(changes)
    return StreamInfo(**fields)


INFOS = {
    "plain": _info(),
    "empty": _info(length=0, first_id=None, last_id=None, last_generated_id="0-0", entries_added=None),
    "never written": _info(length=0, first_id=None, last_id=None, last_generated_id=None, entries_added=0),
    "lagging groups": _info(groups=(_group(b"a", pending=3, lag=12), _group(b"b", pending=0, lag=0))),
    "a lag unknown": _info(groups=(_group(b"a", pending=1, lag=None), _group(b"b", pending=2, lag=4012))),
    "every lag unknown": _info(groups=(_group(b"a", pending=0, lag=None),)),
    "an odd ID": _info(last_id="not-an-id", first_id=HOSTILE, last_generated_id="99999999999999999999-0"),
}
_CLOCK = re.compile(r"read \d\d:\d\d:\d\d UTC")


def _same_clock(html: str) -> str:
    return _CLOCK.sub("read UTC", html)


@pytest.mark.parametrize("version", ["7.0.15", "6.2.14", None])
@pytest.mark.parametrize("name", list(INFOS))
@pytest.mark.parametrize("separators", [False, True])
def test_the_facts_are_what_their_markup_showed(name: str, version: str | None, separators: bool) -> None:
    context = {"info": INFOS[name], "health": SimpleNamespace(redis_version=version) if version else None}
    with override_settings(USE_THOUSAND_SEPARATOR=separators):
        old = Template(OLD_FACTS).render(Context(context))
        new = Template("{% load stream_parts %}{% stream_facts %}").render(Context(context))
    assert _same_clock(new) == _same_clock(old)
    assert ("1,234,567" in new) == (separators and name in ("plain", "lagging groups", "a lag unknown", "every lag unknown", "an odd ID"))


@pytest.mark.parametrize("key_text", ["orders", HOSTILE])
@pytest.mark.parametrize("query", ["", "?q=" + "%3Cb%3E%22%26%27", "?q=data.id+%3D%3D+42&q=second"])
@pytest.mark.parametrize("csrf", [None, "NOTPROVIDED", "tok<en>"])
def test_the_export_form_is_what_its_markup_showed(key_text: str, query: str, csrf: str | None) -> None:
    request = RequestFactory().get("/c/default/streams/x/" + query)
    context = {"conn": "default", "key": key_text.encode(), "key_text": key_text, "request": request}
    if csrf is not None:
        context["csrf_token"] = csrf
    with override_settings(USE_THOUSAND_SEPARATOR=True, BUSCONSOLE_EXPORT_STREAM_MAX=250000):
        from django.conf import settings

        old = Template(OLD_EXPORT).render(
            Context({**context, "q": request.GET.get("q", ""), "stream_max": settings.BUSCONSOLE_EXPORT_STREAM_MAX})
        )
        new = Template("{% load stream_parts %}{% export_form %}").render(Context(context))
    assert new == old
    assert "250,000" in new and "<script>" not in new


# The user links as they stood in templates/base.html, and templates/streams_app/_save_view.html.
OLD_WHO = """{% load console %}<span class="role role-{{ console_role }}">{{ console_role }}</span>
      <span class="who-name" title="{{ user.get_username }}">{{ user.get_username }}</span>
      <a href="{% nav_url 'tokens' %}" class="{% if request.resolver_match.url_name == 'tokens' %}active{% endif %}" title="Your personal API tokens">Tokens</a>
      <form method="post" action="{% nav_url 'logout' %}" class="inline">{% csrf_token %}<button type="submit" class="link">Log out</button></form>"""
OLD_SAVE_VIEW = '{% load saved_views console %}{% if request|saveable_page %}{% comment %}\n"Save view" in the page frame: posts this page\'s address. The hidden field holds\nthe raw path and query as the server received them; static/js/saved-views.js replaces it with the\nbrowser\'s address when the form is sent (the tail page moves its position in the URL after loading).\n{% endcomment %}<div class="page-tools"><details class="save-view" id="save-view">\n  <summary title="Save this page, with its filters and position, as a named view">Save view</summary>\n  <form method="post" action="{% nav_url \'views\' %}" class="save-view-form" data-save-view>\n    {% csrf_token %}\n    <input type="hidden" name="url" value="{{ request.path_info }}{% if request.META.QUERY_STRING %}?{{ request.META.QUERY_STRING }}{% endif %}">\n    <label>Name <input type="text" name="name" maxlength="100" required placeholder="e.g. failing payments"></label>\n    {% if console_role == "operator" or console_role == "admin" %}<label class="small"><input type="checkbox" name="shared" value="1"> shared with everyone</label>{% endif %}\n    <span><button type="submit">Save</button> <a href="{% nav_url \'views\' %}" class="small">All saved views</a></span>\n  </form>\n</details></div><script src="{% asset \'js/saved-views.js\' %}" defer></script>{% endif %}\n'


def _frame_request(path: str, url_name: str | None) -> object:
    request = RequestFactory().get(path)
    request.resolver_match = SimpleNamespace(url_name=url_name) if url_name is not None else None
    return request


@pytest.mark.parametrize("role", ["viewer", "operator", "admin", ""])
@pytest.mark.parametrize("url_name", ["tokens", "stream", sorted(SAVEABLE_PAGES)[0], "login", None])
@pytest.mark.parametrize("path", ["/c/default/streams/ev%3Cil%3E%22k/?count=5&q=%3Cb%3E%22%27", "/tokens/"])
@pytest.mark.parametrize("csrf", [None, "tok<en>"])
def test_the_frames_user_links_and_save_view_are_what_their_markup_showed(
    role: str, url_name: str | None, path: str, csrf: str | None
) -> None:
    user = User(username=HOSTILE)
    context = {"console_role": role, "user": user, "request": _frame_request(path, url_name)}
    if csrf is not None:
        context["csrf_token"] = csrf
    for old, new in ((OLD_WHO, "{% load console %}{% who_links %}"), (OLD_SAVE_VIEW, "{% load saved_views %}{% save_view_form %}")):
        assert Template(new).render(Context(context)) == Template(old).render(Context(context))
    saveable = Template("{% load saved_views %}{% save_view_form %}").render(Context(context))
    assert ("save-view-form" in saveable) == (url_name in SAVEABLE_PAGES)
    assert ('name="shared"' in saveable) == (url_name in SAVEABLE_PAGES and role in ("operator", "admin"))
    assert "<script>" not in Template("{% load console %}{% who_links %}").render(Context(context))


def test_who_links_without_a_user_leave_the_name_empty() -> None:
    context = {"console_role": "", "user": AnonymousUser(), "request": _frame_request("/", None)}
    assert Template("{% load console %}{% who_links %}").render(Context(context)) == Template(OLD_WHO).render(Context(context))


# The search box as it stood in templates/streams_app/_search_box.html, its help (a partial rendered in
# place) included from where it is now.
OLD_SEARCH_BOX = '{# The search box of the stream and DLQ pages ({% search_box page_url %}): a GET form, the query in the page\'s URL; results load in place. #}\n{% load partials %}\n<div class="page-head" id="search">\n  <form method="get" action="#search" class="filters compact search-form">\n    <label>Search <input type="search" name="q" value="{{ q }}" size="48" maxlength="2000" class="mono" placeholder=\'data.customer.id == 42, error.contains("timeout") or plain text\'></label>\n    <label>from <input type="text" name="from" value="{{ start }}" size="16" class="mono" placeholder="ID or time"></label>\n    <label>to <input type="text" name="to" value="{{ end }}" size="16" class="mono" placeholder="ID or time"></label>\n    <select name="direction" aria-label="Direction"><option value="asc"{% if not newest_first %} selected{% endif %}>oldest first</option><option value="desc"{% if newest_first %} selected{% endif %}>newest first</option></select>\n    {% if limit %}<input type="hidden" name="limit" value="{{ limit }}">{% endif %}\n    <button type="submit">Search</button>\n    {% if q %}<a href="{{ search_page }}">Clear</a>{% endif %}\n  </form>\n  <details class="small search-help"><summary>How search works</summary>\n    {% include "streams_app/_search_box.html#query-syntax" %}\n    <p>One search scans at most 100,000 entries or 2 seconds and says how far it got; <em>Continue</em> picks up where it stopped.</p>\n  </details>\n</div>\n{% if q %}\n<section id="search-results" class="panel search-results" aria-live="polite">\n  <p id="search-status" class="search-status" role="status">Searching…</p>\n  <div class="search-hits"><div class="search-more" hx-get="{{ search_page }}search/?{{ query }}" hx-trigger="load" hx-swap="outerHTML"><a class="small" href="{{ search_page }}search/?{{ query }}">Show the results</a></div></div>\n</section>\n{% endif %}\n'


@pytest.mark.parametrize(
    "query",
    ["", "?q=timeout", "?q=" + "%3Cb%3E%22%26%27&from=1-0&to=%3Cx%3E&direction=desc&limit=500",
     "?direction=asc&limit=%22%3E&q=a&q=data.id+%3D%3D+42", "?from=&to=&q=&limit="],
)
@pytest.mark.parametrize("page", ["/c/default/streams/orders/", "/c/default/streams/ev%3Cil%3E%22%27/"])
def test_the_search_box_is_what_its_markup_showed(query: str, page: str) -> None:
    request = RequestFactory().get(page + query)
    params = request.GET
    old_context = {
        "search_page": page, "q": params.get("q") or "", "start": params.get("from") or "",
        "end": params.get("to") or "", "newest_first": params.get("direction") == "desc",
        "limit": params.get("limit") or "", "query": params.urlencode(),
    }
    old = Template(OLD_SEARCH_BOX).render(Context(old_context))
    new = Template("{% load stream_parts %}{% search_box page %}").render(Context({"request": request, "page": page}))
    assert new == old
    assert ("search-results" in new) == bool(old_context["q"]) and "<b>" not in new and "How search works" in new


# The stream page's crumbs, heading and links as they stood in templates/streams_app/stream.html.
OLD_TITLE = """{% load console %}<nav class="crumbs"><a href="{% nav_url 'overview' %}">Overview</a> › <a href="{% nav_url 'streams' conn=conn %}">{{ conn }}</a> › <span class="mono">{{ key_text }}</span></nav>
<div class="page-head">
  <h1 class="mono">{{ key_text }}{% if dlq %} <span class="pill warn">DLQ · {{ dlq }}</span>{% endif %}</h1>"""
OLD_LINKS = """{% load console %}{% if dlq %}<a class="button warn" href="{% dlq_url conn key %}">Dead-letter view ›</a>{% endif %}
    <a class="button" href="tail/">Live tail</a>
    <a class="button subtle" href="{{ stream_page }}retries/" data-action="retries">Retries</a>
    <a class="button subtle" href="{{ stream_page }}timeline/" data-action="timeline" title="DLQ depth, lag, alerts, operator actions and annotations of this stream on one time axis">Timeline</a>
    <a class="button subtle" href="{{ stream_page }}add/" data-action="add-entry">Add entry</a>
    <a class="button subtle" href="{{ api_url }}">JSON</a>"""


@pytest.mark.parametrize("key", [b"orders", b"orders:dlq", HOSTILE.encode() + b"\xff:dlq"])
@pytest.mark.parametrize("conn", ["default", "b.c-d_e"])
def test_the_stream_pages_title_and_links_are_what_their_markup_showed(key: bytes, conn: str) -> None:
    from eventbus.text import display_text
    from streams_app.views import links
    from streams_app.views.presenters import dlq_convention

    context = {
        "conn": conn, "key": key, "key_text": display_text(key), "dlq": dlq_convention(key),
        "stream_page": links.stream_url(conn, key), "api_url": links.api_stream_url(conn, key),
    }
    for old, new in ((OLD_TITLE, "{% stream_title %}"), (OLD_LINKS, "{% stream_links %}")):
        assert Template("{% load stream_parts %}" + new).render(Context(context)) == Template(old).render(Context(context))
    assert ("Dead-letter view" in Template("{% load stream_parts %}{% stream_links %}").render(Context(context))) == (
        context["dlq"] is not None
    )


OLD_PAGER = """{% load console %}{% if page.prev %}<a rel="prev" href="{% if params.order == 'asc' %}{% query before=page.prev after=None at=None %}{% else %}{% query after=page.prev before=None at=None %}{% endif %}">‹ {% if params.order == "asc" %}Older{% else %}Newer{% endif %}</a>{% endif %}
    {% if page.next %}<a rel="next" href="{% if params.order == 'asc' %}{% query after=page.next before=None at=None %}{% else %}{% query before=page.next after=None at=None %}{% endif %}">{% if params.order == "asc" %}Newer{% else %}Older{% endif %} ›</a>{% endif %}"""


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("cursors", [(None, None), ("5-0", None), (None, "9-1"), ("5-0", "9-1")])
@pytest.mark.parametrize("query", ["?count=5", "?at=2026-01-01&groups_sort=lag&q=%3Cb%3E%22%27&after=1-0&order=asc"])
def test_the_entries_pager_is_what_its_markup_showed(order: str, cursors: tuple, query: str) -> None:
    context = {
        "page": SimpleNamespace(prev=cursors[0], next=cursors[1]), "params": {"order": order},
        "request": RequestFactory().get("/c/default/streams/x/" + query),
    }
    new = Template("{% load stream_parts %}{% entries_pager %}").render(Context(context))
    assert new == Template(OLD_PAGER).render(Context(context))
    assert ('rel="next"' in new) == bool(cursors[1]) and "<b>" not in new
