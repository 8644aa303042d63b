"""The incident timeline: ``/c/<conn>/timeline/`` and ``/c/<conn>/streams/<key>/timeline/``.

One time axis for what an incident review asks: the DLQ's depth and growth, lag and pending per group,
stuck consumers, alerts opened and resolved, operator actions and annotations
(:mod:`streams_app.timeline.tracks`). The window is in the address (:mod:`streams_app.timeline.window`):
the 15 min to 7 d live windows, earlier/later, zoom in/out and the permalink are plain links, so every
view of the timeline can be reloaded, shared and saved. A live window refreshes itself after each
snapshot (htmx, the ``timeline`` partial). Any signed-in user may read it; its form adds an annotation
(an operator's, audited, CSRF-protected) and comes back to the same window.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from eventbus.text import display_text
from streams_app import services
from streams_app.accounts.roles import Role, role_of
from streams_app.annotations.models import TAG_MAX, TAGS_MAX, TEXT_MAX
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.timeline.tracks import DLQS_MAX, EVENTS_MAX, GROUPS_MAX, timeline_build
from streams_app.timeline.window import PRESETS, TimeWindow, iso, moment_parse, window_parse
from streams_app.views import links
from streams_app.views.common import connection_context, render_screen
from streams_app.views.forms import validated


def _link(path: str, query: dict[str, str]) -> str:
    return f"{path}?{urlencode(query)}"


def _path(conn: str, key: bytes | None) -> str:
    """The timeline's address: the stream's (its page's address, as links build it), or the connection's."""
    return links.stream_url(conn, key) + "timeline/" if key is not None else reverse("timeline", kwargs={"conn": conn})


def _window_params(data) -> dict[str, str]:
    return {name: data.get(name, "") for name in ("window", "from", "to")}


def _render(request: HttpRequest, conn: str, key: bytes | None) -> HttpResponse:
    context = connection_context(request, conn)
    now = timezone.now()
    window = window_parse(_window_params(request.GET), now=now)
    path = _path(conn, key)
    line = timeline_build(conn=conn, key=key, window=window)
    context.update(
        line=line,
        key=key,
        key_text=display_text(key) if key is not None else "",
        path=path,
        presets=[(name, _link(path, {"window": name})) for name in PRESETS],
        nav={
            "earlier": _link(path, window.moved(by=-0.5, now=now)),
            "later": _link(path, window.moved(by=0.5, now=now)) if window.end < now else "",
            "zoom_in": _link(path, window.zoomed(factor=0.5, now=now)),
            "zoom_out": _link(path, window.zoomed(factor=2, now=now)),
            "permalink": _link(path, window.permalink()),
            "refresh": _link(path, window.query()),
            "connection": _link(_path(conn, None), window.query()),
            "audit": _link(reverse("audit"), {"connection": conn, "since": iso(window.start)}),
        },
        limits={"dlqs": DLQS_MAX, "groups": GROUPS_MAX, "events": EVENTS_MAX},
        can_annotate=role_of(request.user) >= Role.OPERATOR,
        tag_max=TAG_MAX,
        text_max=TEXT_MAX,
    )
    return render_screen(request, "streams_app/timeline.html", context, partial="timeline")


@require_GET
def connection_timeline(request: HttpRequest, conn: str) -> HttpResponse:
    return _render(request, conn, None)


@require_GET
def stream_timeline(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    return _render(request, conn, key)


class AnnotateForm(forms.Form):
    """The timeline's "add an annotation" form: the API's fields, as a person types them."""

    text = forms.CharField(max_length=TEXT_MAX, strip=True)
    tags = forms.CharField(required=False, max_length=TAGS_MAX * (TAG_MAX + 2),
                           help_text="Comma-separated, e.g. deploy, billing.")
    time = forms.CharField(required=False, max_length=40, help_text="ISO-8601 (UTC when no offset); empty: now.")
    time_end = forms.CharField(required=False, max_length=40)

    def clean_tags(self) -> list[str]:
        tags = [t.strip() for t in self.cleaned_data["tags"].split(",") if t.strip()]
        if len(tags) > TAGS_MAX or any(len(t) > TAG_MAX for t in tags):
            raise forms.ValidationError(f"At most {TAGS_MAX} tags of at most {TAG_MAX} characters.")
        return tags


def _annotate(request: HttpRequest, conn: str, key: bytes | None) -> HttpResponse:
    connection_context(request, conn)
    now = timezone.now()
    back_window: TimeWindow
    try:
        back_window = window_parse(_window_params(request.POST), now=now)
    except InvalidArgument:
        back_window = window_parse({}, now=now)

    def validate() -> dict:
        data = validated(AnnotateForm, request.POST)
        data["at"] = moment_parse(data["time"], "time") if data["time"] else now
        data["end_at"] = moment_parse(data["time_end"], "time_end") if data["time_end"] else None
        return data

    data = services.action_input(
        user=request.user, conn=conn, action="annotation.create", stream=key, validate=validate
    )
    annotation = services.annotation_create(
        user=request.user,
        at=data["at"],
        end_at=data["end_at"],
        text=data["text"],
        tags=data["tags"],
        conn=conn,
        key=key,
    )
    messages.success(request, f"Annotation added at {annotation.at:%Y-%m-%d %H:%M:%S} UTC.")
    return HttpResponseRedirect(_link(_path(conn, key), back_window.query()))


@require_POST
def connection_annotate(request: HttpRequest, conn: str) -> HttpResponse:
    return _annotate(request, conn, None)


@require_POST
def stream_annotate(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    return _annotate(request, conn, key)
