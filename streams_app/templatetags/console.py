"""Template filters and tags for stream IDs, durations, byte strings and console URLs."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.template.defaulttags import CsrfTokenNode
from django.templatetags.static import static
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timezone import localtime

from eventbus.text import display_text, id_ms, id_time
from streams_app.alerts.models import Alert
from streams_app.metrics.charts import format_duration_ms
from streams_app.redis_ops import conventions
from streams_app.redis_ops.ids import U64_MAX, bound_text
from streams_app.redis_ops.types import Entry
from streams_app.views import links, presenters

register = template.Library()


@register.filter
def idtime(entry_id: str | None) -> datetime | None:
    """The time an entry ID was generated (its millisecond part)."""
    ms = id_ms(entry_id)
    return None if ms is None else id_time(ms)


@register.filter
def idtime_text(entry_id: str | None) -> str:
    """``{{ id|idtime_text }}``: what ``{{ id|idtime|date:"Y-m-d H:i:s" }}`` shows, for the tables that
    show it on every row. The ``date`` filter goes through the localisation machinery to format four
    numbers, which made it the costliest cell of a group's or a pending entry's row. In the current
    time zone as ``date`` is (the console's is UTC: the pages say so beside it); "" without a time."""
    moment = idtime(entry_id)
    return "" if moment is None else localtime(moment).strftime("%Y-%m-%d %H:%M:%S")


@register.filter
def duration_ms(ms: int | None) -> str:
    """``93784000`` -> ``1d 2h``: idle times at a glance (two largest units)."""
    if ms is None:
        return "unknown"
    return format_duration_ms(int(ms))


@register.filter
def text(value: bytes | str | None) -> str:
    """Bytes as text: UTF-8, other bytes as \\xNN. Still autoescaped by the template."""
    if value is None:
        return ""
    return display_text(value) if isinstance(value, bytes) else str(value)


@register.filter
def seg(value: bytes | str) -> str:
    return links.segment(value)


@register.filter
def keyseg(key: bytes) -> str:
    """A stream key's segment as its links carry it: by digest when too long for a URL."""
    return links.key_segment(key)


@register.simple_tag
def stream_url(conn: str, key: bytes) -> str:
    return links.stream_url(conn, key)


@register.simple_tag
def journey_url(conn: str, key: bytes, entry_id: str) -> str:
    """The journey of the event an entry (or a dead letter) belongs to."""
    return links.journey_url(conn, key, entry_id)


@register.simple_tag
def group_url(conn: str, key: bytes, group: bytes) -> str:
    return links.group_url(conn, key, group)


@register.simple_tag
def entry_url(conn: str, key: bytes, entry_id: str) -> str:
    return links.entry_url(conn, key, entry_id)


@register.simple_tag
def raw_field_url(conn: str, key: bytes, entry_id: str, index: int) -> str:
    return links.raw_field_url(conn, key, entry_id, index)


@register.simple_tag(takes_context=True)
def query(context, **changes) -> str:
    """The current query string with some parameters changed (None removes one); a changed parameter
    moves to the end, in the order given.

    Built from pairs rather than ``request.GET.copy()``: a page has a dozen of these links and the copy
    is a deep copy. ``urlencode`` of the pairs gives what ``QueryDict.urlencode`` gives."""
    pairs = [
        (name, value)
        for name, values in context["request"].GET.lists()
        if name not in changes
        for value in values
    ]
    pairs += [(name, value) for name, value in changes.items() if value not in (None, "")]
    return f"?{urlencode(pairs)}" if pairs else "?"


@register.simple_tag
def nav_url(view_name: str, **kwargs: str) -> str:
    """``{% url %}`` for the links every page repeats (the navigation bar, the crumbs): reversed once
    per process and URLconf, then looked up.

    ``reverse()`` walks the resolver's tables on every call, and the frame of each page holds a dozen
    such links whose targets cannot change while the process runs. The script prefix (a deployment
    under a sub-path) and the URLconf in force are part of the cache key, so the answer is always
    what ``reverse()`` would give now. Only for view names with few distinct arguments (connection
    names): the cache is bounded, but a key or entry ID per link would only churn it.
    """
    return _reversed(
        get_script_prefix(), get_urlconf() or settings.ROOT_URLCONF, view_name, tuple(kwargs.items())
    )


@lru_cache(maxsize=256)
def _reversed(prefix: str, urlconf: str, view_name: str, kwargs: tuple[tuple[str, str], ...]) -> str:
    return reverse(view_name, urlconf=urlconf, kwargs=dict(kwargs))


@register.simple_tag(takes_context=True)
def nav_links(context: template.Context) -> SafeString:
    """The navigation bar's links: each connection's streams (the page's own marked), the DLQs, retries
    and timeline of the page's connection (else the first one), then the console's own screens, the
    one shown marked. Built here, not by loops, ``with`` and ``if`` tags in ``base.html``: the frame of
    every page spent some forty template nodes on them. Every value is escaped. The bar is made once per
    process for each script prefix, URLconf, set of connections, page connection and screen (what it is
    made from), as :func:`nav_url` reverses once: only those vary from page to page."""
    conns = context.get("console_connections") or []
    here = getattr(getattr(context.get("request"), "resolver_match", None), "url_name", None)
    return _nav_bar(
        get_script_prefix(),
        get_urlconf() or settings.ROOT_URLCONF,
        tuple(c.name for c in conns),
        context.get("conn"),
        here,
    )


_OPS = (
    '<a href="{dlqs}" class="nav-ops">DLQs</a>'
    '<a href="{retries}" class="nav-ops" title="The event bus\'s scheduled retries">Retries</a>'
    '<a href="{timeline}" class="nav-ops" title="The incident timeline:'
    ' DLQ depth, lag, alerts, operator actions and annotations on one time axis">Timeline</a>'
)
_SCREENS = (
    "{streams}\n      {ops}"
    '\n      <a href="{alerts}" class="{alerts_active}">Alerts</a>'
    '\n      <a href="{reports}" class="{reports_active}">Reports</a>'
    '\n      <a href="{jobs}">Jobs</a>'
    '\n      <a href="{audit}">Audit</a>'
    '\n      <a href="{views}" class="{views_active}" title="Your saved views and the shared ones">Views</a>'
)


@lru_cache(maxsize=256)
def _nav_bar(prefix: str, urlconf: str, conns: tuple[str, ...], conn: object, here: object) -> SafeString:
    def url(view_name: str, **kwargs: str) -> str:
        return _reversed(prefix, urlconf, view_name, tuple(kwargs.items()))

    def active(name: str) -> str:
        return "active" if here == name else ""

    streams = format_html_join(
        "", '<a href="{}" class="{}">{}</a>', ((url("streams", conn=c), "active" if c == conn else "", c) for c in conns)
    )
    dlq_conn = str(conn or (conns[0] if conns else ""))
    ops = format_html(
        _OPS,
        dlqs=url("dlq-list", conn=dlq_conn),
        retries=url("retries-list", conn=dlq_conn),
        timeline=url("timeline", conn=dlq_conn),
    ) if dlq_conn else ""
    return format_html(
        _SCREENS, streams=streams, ops=ops,
        alerts=url("alerts"), alerts_active=active("alerts"),
        reports=url("reports"), reports_active=active("reports"),
        jobs=url("jobs"), audit=url("audit"),
        views=url("views"), views_active=active("views"),
    )


_WHO = (
    '<span class="role role-{role}">{role}</span>'
    '\n      <span class="who-name" title="{name}">{name}</span>'
    '\n      <a href="{tokens}" class="{tokens_active}" title="Your personal API tokens">Tokens</a>'
    '\n      <form method="post" action="{logout}" class="inline">{csrf}'
    '<button type="submit" class="link">Log out</button></form>'
)


@register.simple_tag(takes_context=True)
def who_links(context: template.Context) -> SafeString:
    """The signed-in user's corner of the navigation bar: the role, the user name, the tokens link (marked
    on the tokens page) and the log-out form. Built here for the reason of :func:`nav_links`; every value
    is escaped by ``format_html`` and the CSRF field is Django's own tag's."""
    user = context.get("user")
    here = getattr(getattr(context.get("request"), "resolver_match", None), "url_name", None)
    return format_html(
        _WHO,
        role=str(context.get("console_role", "")),
        name=user.get_username() if user is not None else "",
        tokens=nav_url("tokens"),
        tokens_active="active" if here == "tokens" else "",
        logout=nav_url("logout"),
        csrf=CsrfTokenNode().render(context),
    )


@register.simple_tag
def time_now() -> str:
    """What ``{% now "H:i:s" %}`` shows (the time of day in the current time zone) without its trip through
    the date filter's format parser, on every stream page."""
    return localtime().strftime("%H:%M:%S") if settings.USE_TZ else datetime.now().strftime("%H:%M:%S")


@register.simple_tag
def asset(path: str) -> str:
    """``{% static %}`` for the frame's own files (style sheet, scripts, icon), looked up once per process
    and script prefix: Django's tag asks whether staticfiles is installed and joins the storage's URL
    on every call, eight times a page. Forgotten when the static settings change (tests override them),
    as Django forgets its storage."""
    return _static(get_script_prefix(), path)


@lru_cache(maxsize=64)
def _static(prefix: str, path: str) -> str:
    return static(path)


@receiver(setting_changed)
def _forget_assets(*, setting: str, **kwargs: object) -> None:
    if setting in ("STORAGES", "STATIC_ROOT", "STATIC_URL", "FORCE_SCRIPT_NAME"):
        _static.cache_clear()


@register.simple_tag(takes_context=True)
def hidden_params(context: template.Context, *names: str) -> SafeString:
    """An ``<input type="hidden">`` for each of ``names`` in the query string (its last value, in the
    query string's order, escaped), so a form that changes some parameters keeps these ones."""
    return format_html_join(
        "",
        '<input type="hidden" name="{}" value="{}">',
        ((name, value) for name, value in context["request"].GET.items() if name in names),
    )


@register.simple_tag
def dlq_url(conn: str, key: bytes) -> str:
    """The dead-letter page of the DLQ ``key``."""
    return links.dlq_url(conn, key)


@register.filter
def alert_url(alert: Alert) -> str:
    """The page of what an alert is about (``{{ alert|alert_url }}``)."""
    return presenters.alert_url(alert)


@register.filter
def can_act(role: str, needed: str = "operator") -> bool:
    """Whether a role (``console_role``) may press operator buttons (``|can_act``) or admin ones
    (``|can_act:"admin"``); only a hint for the page, the server checks again."""
    if needed == "admin":
        return role == "admin"
    return role in ("operator", "admin")


@register.filter
def msdate(ms: int | None) -> datetime | None:
    """Milliseconds since the epoch as a UTC datetime (a DLQ entry's failed-at)."""
    if ms is None:
        return None
    return id_time(int(ms))


@register.simple_tag
def dlq_error(entry: Entry, key: bytes) -> str | None:
    """The error a dead letter holds, parsed by its DLQ's convention (None: not a dead letter, or none):
    ``{% dlq_error e.entry key as error_text %}``. ``entry`` is already masked for the reader."""
    return conventions.parse_dlq_entry(key, entry.id, entry.fields).error


@register.simple_tag
def id_bound(value: str | None, side: str = "end") -> SafeString:
    """A range bound as a person reads it (``{% id_bound job.parameters.end "end" %}``): "to the end of
    2026-11-29 12:30:00.000 UTC" for ``<ms>-18446744073709551615``, with the exact value on hover
    (:func:`streams_app.redis_ops.ids.bound_text`, the one helper every page and message uses)."""
    if not value:
        return format_html('<span class="muted">—</span>')
    return format_html('<span class="id-bound" title="{}">{}</span>', value, bound_text(str(value), side=side))


@register.simple_tag
def id_with_time(entry_id: str | None, lead: str = "id") -> str:
    """A stream ID with its human time beside it: ``{% id_with_time entry.id %}``.

    Renders ``<code class="stream-id">ID</code> <time datetime="ISO">YYYY-MM-DD HH:MM:SS.mmm UTC</time>``
    (``lead="time"`` puts the time first and the raw ID in small print, for range bounds where the time
    is what a reader wants). A bound built as ``<ms>-18446744073709551615`` says on hover that it runs
    to the end of that millisecond. Anything that is not an ID with a time (``-``, ``+``, ``$``, ``0-0``,
    nothing) is shown as given, in ``<code>``, without a time. Built with ``format_html``: the ID is
    escaped like any other value.
    """
    if entry_id in (None, ""):
        return format_html('<span class="muted">—</span>')
    raw = str(entry_id)
    ms = id_ms(raw)
    if not ms:
        return format_html('<code class="stream-id">{}</code>', raw)
    moment = id_time(ms)
    hint = "the time in the ID's millisecond part"
    if raw.endswith(f"-{U64_MAX}"):
        hint = "up to the end of this millisecond (the ID's sequence is the largest there is)"
    when = format_html(
        '<time class="small muted" datetime="{}" title="{}">{} UTC</time>',
        moment.isoformat(timespec="milliseconds"),
        hint,
        moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
    )
    if lead == "time":
        return format_html('{} <code class="stream-id small muted" title="stream ID">{}</code>', when, raw)
    return format_html('<code class="stream-id">{}</code> {}', raw, when)
