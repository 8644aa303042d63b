"""Forms that validate the pages' GET parameters before anything reaches Redis, and the HTML action
views' input.

A form that does not validate becomes an :class:`InvalidArgument` (a 400 with the field's
message), so no view does ``int(request.GET[...])`` by hand. The JSON API validates with the typed
models of :mod:`streams_app.views.api.schemas` instead, through the same role-and-audit path
(:func:`streams_app.services.action_input`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from django import forms
from django.http import HttpRequest, QueryDict

from streams_app import services
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads.limits import DEFAULT_PAGE, MAX_PAGE
from streams_app.views.action_forms import EntryIdField, PositionField


def validated(form_class: type[forms.Form], data: QueryDict | Mapping[str, Any]) -> dict[str, Any]:
    form = form_class(data)
    if not form.is_valid():
        problems = "; ".join(
            f"{name}: {' '.join(map(str, errors))}" if name != "__all__" else " ".join(map(str, errors))
            for name, errors in form.errors.items()
        )
        raise InvalidArgument(problems)
    return form.cleaned_data


def action_data(
    request: HttpRequest,
    conn: str,
    action: str,
    form_class: type[forms.Form],
    data: QueryDict | Mapping[str, Any],
    *,
    key: bytes,
    group: bytes | None = None,
) -> dict:
    """An HTML action view's input: the role check of ``action``, then ``data`` (the POST) validated by
    ``form_class`` (see :func:`streams_app.services.action_input`)."""
    return services.action_input(
        user=request.user, conn=conn, action=action, stream=key, group=group,
        validate=partial(validated, form_class, data),
    )


class StreamsForm(forms.Form):
    match = forms.CharField(required=False, max_length=512)
    cursor = forms.IntegerField(required=False, min_value=0)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)
    sort = forms.ChoiceField(required=False, choices=[("", "scan order"), ("length", "length"),
                                                      # these need the mirror
                                                      ("pending", "pending"), ("lag", "lag"),
                                                      ("last", "last entry"), ("name", "name")])
    offset = forms.IntegerField(required=False, min_value=0)
    live = forms.BooleanField(required=False)  # scan Redis even when a mirror exists
    families_offset = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1)  # family mode's rows

    def clean(self):
        data = super().clean()
        data["match"] = data.get("match") or "*"
        data["cursor"] = data.get("cursor") or 0
        data["count"] = data.get("count") or DEFAULT_PAGE
        data["offset"] = data.get("offset") or 0
        data["families_offset"] = data.get("families_offset") or 0
        return data


class FamiliesForm(forms.Form):
    """The families page: a page of rows (``offset``; ``now=1`` for a bounded pass now rather than the
    snapshot's rows), or of one family's members (``cursor``)."""

    cursor = forms.IntegerField(required=False, min_value=0, max_value=2**64 - 1)
    offset = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)
    # "now=1": one bounded pass over Redis now instead of the snapshot's stored rows
    now = forms.BooleanField(required=False)

    def clean(self):
        data = super().clean()
        data["cursor"] = data.get("cursor") or 0
        data["offset"] = data.get("offset") or 0
        data["count"] = data.get("count") or DEFAULT_PAGE
        return data


class EntriesForm(forms.Form):
    order = forms.ChoiceField(required=False, choices=[("desc", "newest first"), ("asc", "oldest first")])
    after = EntryIdField(required=False, allow_bare=True)
    before = EntryIdField(required=False, allow_bare=True)
    at = PositionField(required=False)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def clean(self):
        data = super().clean()
        data["order"] = data.get("order") or "desc"
        data["count"] = data.get("count") or DEFAULT_PAGE
        if sum(bool(data.get(k)) for k in ("after", "before", "at")) > 1:
            raise forms.ValidationError("Give at most one of after, before and at.")
        return data


_ORDERS = {None: "desc", "": "desc", "desc": "desc", "asc": "asc"}


def entries_params(data: QueryDict) -> dict[str, Any]:
    """:class:`EntriesForm`'s cleaned data for ``data``, the stream page's query string.

    Most requests are the newest page or a plain order and count: those are read here, because building
    the form deep-copies its fields, which costs more than the reading. Anything else (a
    cursor, a position, a count that is not plain digits in range, an unknown order) goes through the
    form, which decides and words the refusal. ``tests/console/views/test_stream_page_cheap.py`` holds
    the two to the same answers."""
    order, count = _ORDERS.get(data.get("order"), ""), data.get("count") or str(DEFAULT_PAGE)
    if order and not (data.get("after") or data.get("before") or data.get("at")) and count.isascii() and count.isdigit():
        number = int(count)
        if 1 <= number <= MAX_PAGE:
            return {"order": order, "after": None, "before": None, "at": None, "count": number}
    return validated(EntriesForm, data)


class PendingForm(forms.Form):
    consumer = forms.CharField(required=False, max_length=512, strip=False)
    min_idle_ms = forms.IntegerField(required=False, min_value=0)
    after = EntryIdField(required=False, allow_bare=True)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def clean(self):
        data = super().clean()
        data["count"] = data.get("count") or DEFAULT_PAGE
        return data
