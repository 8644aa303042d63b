"""The event bus's delayed retries (Sidekiq's Retries tab): a connection's retry sets, one stream's
waiting retries with their due times, and the buttons retry now, move to DLQ and delete.

Acting on "all" goes through a confirm page that shows how many retries are due up to the latest
due time the operator saw (the rewind and replay pattern): the count comes first, then the button.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from eventbus.decoding import DecodedField, decode_fields
from eventbus.text import display_text
from streams_app import services
from streams_app.masking.apply import errors_masker
from streams_app.redis_ops import retries as retry_reads
from streams_app.redis_ops.actions.retries import RetryOutcome
from streams_app.redis_ops.commands import server_ms
from streams_app.services.retries import ACTIONS
from streams_app.views import links
from streams_app.views.actions import action_view
from streams_app.views.common import connection_context, render_screen
from streams_app.views.forms import action_data, validated
from streams_app.views.masking import request_masker

VERBS = {"stream": "Retry now", "dlq": "Move to DLQ", "delete": "Delete"}


def retries_url(conn: str, key: bytes, *, legacy: bool = False) -> str:
    return links.stream_url(conn, key) + "retries/" + ("?legacy=1" if legacy else "")


def api_retries_url(conn: str, key: bytes) -> str:
    return links.api_stream_url(conn, key) + "retries/"


def due_text(due_ms: int, now_ms: int) -> str:
    """A due time relative to the server's clock: ``in 40 s``, ``overdue 3 m``, ``due now``."""
    delta = (due_ms - now_ms) / 1000
    if abs(delta) < 1:
        return "due now"
    seconds = abs(delta)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            amount = f"{int(seconds // size)} {unit}"
            break
    else:
        amount = f"{int(seconds)} s"
    return f"in {amount}" if delta > 0 else f"overdue {amount}"


class RetriesPageForm(forms.Form):
    after = forms.RegexField(regex=r"^[0-9]{1,20}:[0-9]{1,9}$", required=False, max_length=40)
    count = forms.IntegerField(required=False, min_value=1, max_value=retry_reads.MAX_PAGE)
    legacy = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        data["count"] = data.get("count") or retry_reads.DEFAULT_PAGE
        return data


class RefListField(forms.Field):
    """Retry refs (``<due ms>-<sha1>``), at most 1000, de-duplicated in order."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value: Any) -> list[str]:
        if value in (None, "", []):
            return []
        if not isinstance(value, list | tuple) or len(value) > 1000:
            raise forms.ValidationError("Give at most 1000 retries at once.")
        for item in value:
            if not isinstance(item, str) or retry_reads.REF.fullmatch(item) is None:
                raise forms.ValidationError(
                    "A retry is named <due ms>-<40 hex digits>, as this page shows it."
                )
        return list(dict.fromkeys(value))


class RetryActionForm(forms.Form):
    refs = RefListField(required=False)
    all = forms.BooleanField(required=False)
    up_to = forms.IntegerField(required=False, min_value=0, max_value=2**63 - 1)
    legacy = forms.BooleanField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        if data.get("all"):
            if data.get("up_to") is None:
                raise forms.ValidationError("“All” needs up_to, the latest due time you saw.")
        elif not data.get("refs"):
            raise forms.ValidationError("Select at least one retry.")
        return data


@dataclass(frozen=True, slots=True)
class RetryRow:
    entry: retry_reads.RetryEntry
    due: str
    overdue: bool
    fields: list[DecodedField]
    type_text: str | None
    group_text: str | None


def _row(entry: retry_reads.RetryEntry, now_ms: int) -> RetryRow:
    return RetryRow(
        entry=entry,
        due=due_text(entry.due_ms, now_ms),
        overdue=entry.due_ms <= now_ms,
        fields=decode_fields(entry.fields, limit=4096) if entry.fields else [],
        type_text=display_text(entry.event_type) if entry.event_type is not None else None,
        group_text=display_text(entry.group) if entry.group is not None else None,
    )


@require_GET
def retries_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    listing = services.retry_list(conn=conn)
    context.update(
        listing=listing,
        rows=[
            {
                "summary": summary,
                "key_text": display_text(summary.rset.key),
                "stream_text": display_text(summary.rset.stream),
                "url": retries_url(conn, summary.rset.stream, legacy=summary.rset.legacy),
                "stream_url": links.stream_url(conn, summary.rset.stream),
                "next_due": due_text(summary.next_due_ms, listing.now_ms)
                if summary.next_due_ms is not None
                else None,
            }
            for summary in listing.sets
        ],
    )
    return render_screen(request, "streams_app/retries_list.html", context)


@require_GET
def retries_page(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(RetriesPageForm, request.GET)
    rset = retry_reads.retry_set(key, legacy=params["legacy"])
    masker = request_masker(request, conn, key)
    error = errors_masker(conn, key, rset.dlq)
    page = retry_reads.retry_page(conn, rset, after=params["after"], count=params["count"], mask=masker.entry)
    here = retries_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        set_text=display_text(rset.key),
        dlq_text=display_text(rset.dlq),
        legacy=rset.legacy,
        page=page,
        params=params,
        rows=[
            _row(replace(e, error=error(e.error)), page.now_ms)
            for e in page.entries
        ],
        retries_page=here,
        stream_page=links.stream_url(conn, key),
        dlq_page=links.dlq_url(conn, rset.dlq),
        api_url=api_retries_url(conn, key) + ("?legacy=1" if rset.legacy else ""),
        here=links.with_query(here, request),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/retries.html", context, partial="entries")


def _retries_page(conn: str, key: bytes) -> str:
    return retries_url(conn, key)


def _message(mode: str, outcome: RetryOutcome) -> str:
    n = len(outcome.taken)
    noun = "retry" if n == 1 else "retries"
    if mode == "stream":
        text = f"Re-added {n} {noun} to {display_text(outcome.target or b'')} now."
    elif mode == "dlq":
        text = f"Moved {n} {noun} to {display_text(outcome.target or b'')}."
    else:
        text = f"Deleted {n} {noun}; they will not run."
    if outcome.missing:
        text += f" {len(outcome.missing)} had already left the schedule (a worker re-added them, or someone else acted)."
    if outcome.failed:
        text += f" {len(outcome.failed)} stayed: " + "; ".join(reason for _, reason in outcome.failed[:3])
    if outcome.remaining:
        text += f" {outcome.remaining} more are due up to that time: press again to continue."
    return text


def _act(request: HttpRequest, conn: str, key: bytes, mode: str) -> str:
    action = ACTIONS[mode]
    data = action_data(request, conn, action, RetryActionForm, request.POST, key=key)
    outcome = services.retry_act(
        user=request.user,
        conn=conn,
        key=key,
        mode=mode,
        legacy=data["legacy"],
        refs=data["refs"],
        up_to_ms=data["up_to"] if data["all"] else None,
    )
    return _message(mode, outcome)


@action_view(_retries_page)
def retry_now(request: HttpRequest, conn: str, key: bytes) -> str:
    return _act(request, conn, key, "stream")


@action_view(_retries_page)
def retry_dead_letter(request: HttpRequest, conn: str, key: bytes) -> str:
    return _act(request, conn, key, "dlq")


@action_view(_retries_page)
def retry_delete(request: HttpRequest, conn: str, key: bytes) -> str:
    return _act(request, conn, key, "delete")


class RetryPreviewForm(forms.Form):
    mode = forms.ChoiceField(choices=list(VERBS.items()))
    up_to = forms.IntegerField(min_value=0, max_value=2**63 - 1)
    legacy = forms.BooleanField(required=False)


@action_view(_retries_page)
def retry_all_preview(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """How many retries "all" would take, with the button that does it (bounded by the same due time)."""
    mode = request.POST.get("mode", "")
    action = ACTIONS.get(mode, "retry.now") + ".count"
    data = action_data(request, conn, action, RetryPreviewForm, request.POST, key=key)
    count = services.retry_act_count(
        user=request.user,
        conn=conn,
        key=key,
        mode=data["mode"],
        up_to_ms=data["up_to"],
        legacy=data["legacy"],
    )
    rset = retry_reads.retry_set(key, legacy=data["legacy"])
    context = {
        "conn": conn,
        "key": key,
        "key_text": display_text(key),
        "set_text": display_text(rset.key),
        "dlq_text": display_text(rset.dlq),
        "mode": data["mode"],
        "verb": VERBS[data["mode"]],
        "count": count,
        "up_to": data["up_to"],
        "legacy": rset.legacy,
        "up_to_text": due_text(data["up_to"], server_ms(conn)),
        "confirm_url": links.stream_url(conn, key)
        + "retries/"
        + {"stream": "retry", "dlq": "dead-letter", "delete": "delete"}[data["mode"]]
        + "/",
        "back_url": retries_url(conn, key, legacy=rset.legacy),
    }
    return render(request, "streams_app/retries_preview.html", context)
