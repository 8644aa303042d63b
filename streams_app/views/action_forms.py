"""Forms for the operator actions of the HTML pages (POST data), and the query strings of some pages.

An HTML form posts text, and a checkbox is "on" whatever its value says: Django's form fields read
it that way, which is right here and wrong for JSON. The JSON API therefore has typed models of its
own (:mod:`streams_app.views.api.schemas`); both give the services the same values (entry IDs as
canonical text, names as bytes) and check IDs with the one parser of :mod:`streams_app.redis_ops.ids`.
Use with :func:`streams_app.views.forms.validated`, which turns errors into a 400.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import forms

from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_id, parse_position, parse_time
from streams_app.triage.counts import TriageFilter

#: Entries one selection may name: one bounded Redis call (the access layer's own limit).
MAX_SELECTION = 1000


class IdListField(forms.Field):
    """A list of exact entry IDs (``ms-seq``), de-duplicated in order.

    The list's length is checked before any ID is parsed, and duplicates are dropped with a dict
    (linear): a list of 100,000 IDs is refused at once instead of being compared pair by pair.
    """

    widget = forms.MultipleHiddenInput

    def __init__(self, *, max_items: int = MAX_SELECTION, **kwargs: Any) -> None:
        self.max_items = max_items
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> list[str]:
        if value in (None, "", []):
            return []
        if not isinstance(value, list | tuple):
            raise forms.ValidationError("Give a list of entry IDs.")
        if len(value) > self.max_items:
            raise forms.ValidationError(f"At most {self.max_items} entry IDs at once ({len(value)} given).")
        out: list[str] = []
        for item in value:
            if not isinstance(item, str):
                raise forms.ValidationError("Entry IDs are text like 1700000000000-0.")
            try:
                out.append(str(parse_id(item, allow_bare=False, what="entry ID")))
            except InvalidArgument as exc:
                raise forms.ValidationError(exc.message) from None
        return list(dict.fromkeys(out))

    def validate(self, value: list[str]) -> None:
        if self.required and not value:
            raise forms.ValidationError("Select at least one entry.", code="required")


class _CheckedText(forms.CharField):
    """Short text that a parser of :mod:`streams_app.redis_ops.ids` checks; its error is the form's."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 64)
        super().__init__(**kwargs)

    def clean(self, value: Any) -> str | None:
        value = super().clean(value)
        if not value:
            return None
        try:
            return self.checked(value)
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.message) from None

    def checked(self, value: str) -> str:
        raise NotImplementedError


class EntryIdField(_CheckedText):
    """One exact entry ID (``ms-seq``); with ``allow_bare``, a bare ``ms`` is read as ``ms-0``."""

    def __init__(self, *, allow_bare: bool = False, **kwargs: Any) -> None:
        self.allow_bare = allow_bare
        super().__init__(**kwargs)

    def checked(self, value: str) -> str:
        return str(parse_id(value, allow_bare=self.allow_bare))


class PositionField(_CheckedText):
    """An entry ID, a millisecond timestamp or an ISO-8601 date-time (plus the given special words)."""

    def __init__(self, *, specials: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.specials = specials
        super().__init__(**kwargs)

    def checked(self, value: str) -> str:
        if value not in self.specials:
            parse_position(value)
        return value


class NameField(forms.CharField):
    """A consumer, stream or field name typed by the operator, as the bytes Redis gets (UTF-8)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 512)
        kwargs.setdefault("strip", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> Any:
        if value is not None and not isinstance(value, str):
            raise forms.ValidationError("Give the name as text.")
        return super().to_python(value)

    def clean(self, value: Any) -> bytes | None:
        text = super().clean(value)
        return text.encode() if text else None


class FieldFilterField(forms.Field):
    """``field=value`` pairs an entry must all hold: a JSON object, or one ``name=value`` per line."""

    widget = forms.Textarea

    def to_python(self, value: Any) -> dict[bytes, bytes]:
        if value in (None, "", {}):
            return {}
        pairs: dict[bytes, bytes] = {}
        if isinstance(value, dict):
            for name, field_value in value.items():
                if not isinstance(field_value, str) or not name:
                    raise forms.ValidationError("The filter maps field names to text values.")
                pairs[name.encode()] = field_value.encode()
        elif isinstance(value, str):
            for line in value.splitlines():
                if not line.strip():
                    continue
                name, sep, field_value = line.partition("=")
                if not sep or not name.strip():
                    raise forms.ValidationError(f"{line[:80]!r} is not name=value.")
                pairs[name.strip().encode()] = field_value.encode()
        else:
            raise forms.ValidationError("The filter is an object of field names to values.")
        if len(pairs) > 20:
            raise forms.ValidationError("At most 20 fields in a filter.")
        return pairs


# ---------------------------------------------------------------------------- pending entries


class ClaimForm(forms.Form):
    ids = IdListField()
    consumer = NameField()
    min_idle_ms = forms.IntegerField(min_value=0)


class AutoclaimForm(forms.Form):
    consumer = NameField()
    min_idle_ms = forms.IntegerField(min_value=0)
    count = forms.IntegerField(required=False, min_value=1, max_value=1000)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        data["count"] = data.get("count") or 100
        return data


class NextField(forms.CharField):
    """The page a confirm step returns to (checked to be a path on this site where it is used)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 4096)
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)


class AutoclaimConfirmForm(AutoclaimForm):
    """The sweep's confirm page (GET): what the sweep form sent, and the page to come back to."""

    next = NextField()


class AckForm(forms.Form):
    ids = IdListField()


class AckConfirmForm(AckForm):
    """The page's ack: the operator ticks a box saying these messages will never be processed."""

    confirm = forms.BooleanField(
        required=True, error_messages={"required": "Tick the box to confirm: acked entries are not processed."}
    )


class RewindForm(forms.Form):
    to = PositionField(specials=("0", "-", "$"))
    dry_run = forms.BooleanField(required=False)


# ---------------------------------------------------------------------------------------- DLQs


class TriageFilterForm(forms.Form):
    """The dead letters of one triage count (:class:`streams_app.triage.counts.TriageFilter`): an error
    signature (the reports' and the triage's, ``pipeline.signatures.normalize_error``), a group and an
    origin stream as the page shows them, or ``no_group``/``no_origin`` for the dead letters that record
    none. ``filter`` is the one object, None when no part is given."""

    signature = forms.CharField(required=False, max_length=300, strip=False)
    group = forms.CharField(required=False, max_length=512, strip=False)
    origin = forms.CharField(required=False, max_length=512, strip=False)
    no_group = forms.BooleanField(required=False)
    no_origin = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        for name in ("signature", "group", "origin"):
            data[name] = data.get(name) or None
        if self.errors:
            return data
        try:
            where = TriageFilter.from_params(data)
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.message) from None
        data["filter"] = where or None
        return data


class DlqPageForm(TriageFilterForm):
    error = forms.CharField(required=False, max_length=200)
    before = EntryIdField(required=False)
    count = forms.IntegerField(required=False, min_value=1, max_value=500)
    # the triage counts' window: the dead letters older than this (None: the newest)
    triage_before = EntryIdField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        data["count"] = data.get("count") or 50
        data["error"] = data.get("error") or None
        return data


class DlqRequeueForm(forms.Form):
    """Either ``ids`` (done now) or ``all`` with ``up_to`` (a background job up to that ID)."""

    ids = IdListField(required=False)
    all = forms.BooleanField(required=False)
    up_to = EntryIdField(required=False)
    batch = forms.IntegerField(required=False, min_value=1, max_value=5000)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        if data.get("all"):
            if not data.get("up_to"):
                raise forms.ValidationError("Requeue all needs up_to: the newest entry ID you saw.")
            if data.get("ids"):
                raise forms.ValidationError("Give either ids or all, not both.")
        elif not data.get("ids"):
            raise forms.ValidationError("Select at least one entry (ids), or give all with up_to.")
        return data


class RequeueAllConfirmForm(forms.Form):
    """"Requeue all up to ``up_to``"'s confirm page (GET): the newest ID the operator saw."""

    up_to = EntryIdField()
    next = NextField()


class DlqDeleteForm(forms.Form):
    ids = IdListField()


class DlqPurgeForm(forms.Form):
    up_to = EntryIdField()
    confirm = forms.CharField(max_length=1024, strip=False)


# -------------------------------------------------------------------------------------- replay


class ReplayForm(forms.Form):
    start = PositionField(specials=("-", "0"))
    end = PositionField(specials=("+", "$"))
    target = NameField(required=False)
    match = FieldFilterField(required=False)
    dry_run = forms.BooleanField(required=False)
    batch = forms.IntegerField(required=False, min_value=1, max_value=5000)


# ------------------------------------------------------------------------------- admin actions


class ConsumerDeleteForm(forms.Form):
    force = forms.BooleanField(required=False)  # delete even with pending entries (they are dropped)


class GroupDeleteForm(forms.Form):
    confirm = forms.CharField(max_length=1024, strip=False)  # the group's name, typed


class TrimForm(forms.Form):
    """Exactly one of ``maxlen`` (entries to keep, about) and ``minid`` (older entries go)."""

    maxlen = forms.IntegerField(required=False, min_value=0)
    minid = PositionField(required=False)
    dry_run = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        if self.errors:
            return data
        if (data.get("maxlen") is None) == (not data.get("minid")):
            raise forms.ValidationError("Give exactly one of maxlen (entries to keep) and minid (an ID or a time).")
        data["minid"] = data.get("minid") or None
        return data


class EntriesDeleteForm(forms.Form):
    """Entry IDs as a list (``ids``: checkboxes, the JSON array) and/or typed (``ids_text``)."""

    ids = IdListField(required=False)
    ids_text = forms.CharField(required=False, max_length=64 * MAX_SELECTION, widget=forms.Textarea)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        if self.errors:
            return data
        typed = (data.get("ids_text") or "").replace(",", " ").split()
        try:
            data["ids"] = IdListField().clean([*data.get("ids", []), *typed])
        except forms.ValidationError as exc:
            raise forms.ValidationError(exc.messages) from None
        return data


# --------------------------------------------------------------------------------- jobs, audit


class JobsForm(forms.Form):
    before = forms.IntegerField(required=False, min_value=1)
    state = forms.ChoiceField(
        required=False, choices=[("", "any"), *((s, s) for s in ("queued", "running", "done", "failed", "cancelled"))]
    )


class AuditFiltersForm(forms.Form):
    """The audit list's filters and its "older than" cursor (the last row's id)."""

    action = forms.CharField(required=False, max_length=64)
    user = forms.CharField(required=False, max_length=150)
    connection = forms.CharField(required=False, max_length=100)
    outcome = forms.ChoiceField(
        required=False, choices=[("", "any"), ("ok", "ok"), ("error", "error"), ("denied", "denied")]
    )
    since = forms.CharField(required=False, max_length=64)
    before = forms.IntegerField(required=False, min_value=1)
    count = forms.IntegerField(required=False, min_value=1, max_value=500)

    def clean_since(self) -> datetime | None:
        value = (self.cleaned_data.get("since") or "").strip()
        if not value:
            return None
        try:
            ms = parse_time(value)
        except InvalidArgument as exc:
            raise forms.ValidationError(exc.message) from None
        return datetime.fromtimestamp(ms / 1000, tz=UTC)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        data["count"] = data.get("count") or 50
        return data
