"""Forms that validate GET parameters before anything reaches Redis.

A form that does not validate becomes an :class:`InvalidArgument` (a 400 with the field's
message), so no view does ``int(request.GET[...])`` by hand.
"""

from __future__ import annotations

from django import forms
from django.http import QueryDict

from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_id, parse_position
from streams_app.redis_ops.reads import DEFAULT_PAGE, MAX_PAGE


def validated(form_class: type[forms.Form], data: QueryDict) -> dict:
    form = form_class(data)
    if not form.is_valid():
        problems = "; ".join(
            f"{name}: {' '.join(errors)}" if name != "__all__" else " ".join(errors)
            for name, errors in form.errors.items()
        )
        raise InvalidArgument(problems)
    return form.cleaned_data


class _IdField(forms.CharField):
    """An exact entry ID (``ms-seq``); a bare ``ms`` is read as ``ms-0``."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        try:
            return str(parse_id(value))
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.message) from None


class _PositionField(forms.CharField):
    """An entry ID or an ISO-8601 date-time."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        try:
            parse_position(value)
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.message) from None
        return value.strip()


class StreamsForm(forms.Form):
    match = forms.CharField(required=False, max_length=512)
    cursor = forms.IntegerField(required=False, min_value=0)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)
    sort = forms.ChoiceField(required=False, choices=[("", "scan order"), ("length", "length"),
                                                      # metrics (issue 6): sorted in the mirror
                                                      ("pending", "pending"), ("lag", "lag"),
                                                      ("last", "last entry"), ("name", "name")])
    offset = forms.IntegerField(required=False, min_value=0)
    live = forms.BooleanField(required=False)  # metrics (issue 6): scan Redis even when a mirror exists

    def clean(self):
        data = super().clean()
        data["match"] = data.get("match") or "*"
        data["cursor"] = data.get("cursor") or 0
        data["count"] = data.get("count") or DEFAULT_PAGE
        data["offset"] = data.get("offset") or 0
        return data


class EntriesForm(forms.Form):
    order = forms.ChoiceField(required=False, choices=[("desc", "newest first"), ("asc", "oldest first")])
    after = _IdField(required=False, max_length=64)
    before = _IdField(required=False, max_length=64)
    at = _PositionField(required=False, max_length=64)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def clean(self):
        data = super().clean()
        data["order"] = data.get("order") or "desc"
        data["count"] = data.get("count") or DEFAULT_PAGE
        if sum(bool(data.get(k)) for k in ("after", "before", "at")) > 1:
            raise forms.ValidationError("Give at most one of after, before and at.")
        return data


class PendingForm(forms.Form):
    consumer = forms.CharField(required=False, max_length=512, strip=False)
    min_idle_ms = forms.IntegerField(required=False, min_value=0)
    after = _IdField(required=False, max_length=64)
    count = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def clean(self):
        data = super().clean()
        data["count"] = data.get("count") or DEFAULT_PAGE
        return data
