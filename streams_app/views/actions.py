"""The operator buttons of the HTML pages: POST in, a redirect back with a message out.

Every view here is ``@require_POST`` and CSRF-protected; who may press what, read-only mode and the
audit row are the action layer's job (:mod:`streams_app.services`), so these stay HTTP in and out. A
refusal is a 403 page; an error Redis or the input caused comes back as a message on the page the
operator came from, which still shows the current state.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from eventbus.text import display_text
from streams_app import services
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.ids import range_text
from streams_app.views import action_forms as af
from streams_app.views import links
from streams_app.views.forms import action_data
from streams_app.views.group import selection_kept


def local_next(request: HttpRequest, target: str | None, fallback: str) -> str:
    """``target`` when it is a path on this site (``/...``, no scheme, no other host, not ``//host``),
    else ``fallback``: a form's ``next`` must not turn an action into an open redirect."""
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}) and target.startswith("/"):
        return target
    return fallback


def _back(request: HttpRequest, fallback: str) -> str:
    """Where to go after the action: the form's ``next`` when it is a local URL, else ``fallback``."""
    return local_next(request, request.POST.get("next", ""), fallback)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _ids_text(ids: tuple[str, ...] | list[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _preview_context(conn: str, key: bytes, **extra: object) -> dict[str, object]:
    """What every confirm page shows: the connection and the stream, plus the action's own facts."""
    return {"conn": conn, "key": key, "key_text": display_text(key), **extra}


def action_view(fallback: Callable[..., str]) -> Callable:
    """POST only; the connection must exist; OpsError becomes an error message and a redirect back.

    ``fallback(conn, key, ...)`` is the page to return to when the form names none.
    """

    def decorator(view: Callable[..., str | HttpResponse]) -> Callable[..., HttpResponse]:
        @require_POST
        @wraps(view)
        def wrapper(request: HttpRequest, conn: str, *args: Any, **kwargs: Any) -> HttpResponse:
            request.console_conn = conn  # type: ignore[attr-defined]  # the error middleware reads it back (getattr) to name the connection
            client.connection(conn)
            back = _back(request, fallback(conn, *args, **kwargs))
            try:
                outcome = view(request, conn, *args, **kwargs)
            except OpsError as exc:
                messages.error(request, exc.message)
                return HttpResponseRedirect(back)
            if isinstance(outcome, HttpResponse):
                return outcome
            messages.success(request, outcome)
            return HttpResponseRedirect(back)

        return wrapper

    return decorator


def _group_page(conn: str, key: bytes, group: bytes) -> str:
    return links.group_url(conn, key, group)


def _stream_page(conn: str, key: bytes) -> str:
    return links.stream_url(conn, key)


def _dlq_page(conn: str, key: bytes) -> str:
    return links.dlq_url(conn, key)


# ------------------------------------------------------------------------------ pending entries


@action_view(_group_page)
def claim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> str:
    with selection_kept(request, conn, key, group):  # refused: the page comes back with the rows ticked
        data = action_data(request, conn, "claim", af.ClaimForm, request.POST, key=key, group=group)
        result = services.pending_claim(user=request.user, conn=conn, key=key, group=group, **data)
    return _claim_message(result, consumer=data["consumer"], min_idle_ms=data["min_idle_ms"])


@action_view(_group_page)
def autoclaim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> str:
    """The page's sweep (confirmed on :func:`streams_app.views.confirm.autoclaim_confirm`): it claims at
    most ``count`` entries, the number its confirm page counted."""
    data = action_data(request, conn, "autoclaim", af.AutoclaimForm, request.POST, key=key, group=group)
    result = services.pending_autoclaim(user=request.user, conn=conn, key=key, group=group, limit=data["count"], **data)
    text = _claim_message(result, consumer=data["consumer"], min_idle_ms=data["min_idle_ms"])
    if result.next:
        text += f" The sweep stopped at its limit of {data['count']}: entries after {result.next} may still be idle."
    return text


def _claim_message(result: Any, *, consumer: bytes, min_idle_ms: int) -> str:
    parts = [f"Claimed {_plural(len(result.claimed), 'entry', 'entries')} to {display_text(consumer)}."]
    if result.skipped:
        parts.append(
            f"Skipped {_plural(len(result.skipped), 'entry', 'entries')} ({_ids_text(result.skipped)}): "
            f"no longer pending, or active within the last {min_idle_ms} ms."
        )
    if result.deleted:
        parts.append(
            f"{_plural(len(result.deleted), 'entry was', 'entries were')} deleted from the stream "
            f"({_ids_text(result.deleted)}) and left the pending list."
        )
    return " ".join(parts)


@action_view(_group_page)
def ack(request: HttpRequest, conn: str, key: bytes, group: bytes) -> str:
    with selection_kept(request, conn, key, group):  # refused (no confirmation): the rows stay ticked
        data = action_data(request, conn, "ack", af.AckConfirmForm, request.POST, key=key, group=group)
        acked = services.pending_ack(user=request.user, conn=conn, key=key, group=group, ids=data["ids"])
    skipped = len(data["ids"]) - acked
    text = f"Acknowledged {_plural(acked, 'entry', 'entries')}; they will not be processed."
    if skipped:
        text += f" {_plural(skipped, 'entry was', 'entries were')} no longer pending."
    return text


# ------------------------------------------------------------------------------------- rewind


@action_view(_group_page)
def rewind_preview(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    """Show what a rewind would redeliver, with the button that does it (to the resolved ID)."""
    data = action_data(request, conn, "rewind.preview", af.RewindForm, request.POST, key=key, group=group)
    plan = services.group_rewind_preview(user=request.user, conn=conn, key=key, group=group, to=data["to"])
    back = _back(request, links.group_url(conn, key, group))
    context = _preview_context(
        conn, key, group=group, group_text=display_text(group), what="rewind", to=data["to"], plan=plan,
        confirm_url=links.group_url(conn, key, group) + "rewind/", back_url=back, next=back,
    )
    return render(request, "streams_app/action_preview.html", context)


@action_view(_group_page)
def rewind(request: HttpRequest, conn: str, key: bytes, group: bytes) -> str:
    data = action_data(request, conn, "rewind", af.RewindForm, request.POST, key=key, group=group)
    plan = services.group_rewind(user=request.user, conn=conn, key=key, group=group, to=data["to"])
    text = (
        f"Group {display_text(group)} now starts after {plan.last_delivered_id} "
        f"(was {plan.current_last_delivered_id}): {_plural(plan.will_redeliver, 'entry', 'entries')} "
        "will be delivered again."
    )
    if not plan.lag_known:
        text += " Entries after that point were deleted, so Redis reports the lag as unknown until the group reads past them."
    return text


# --------------------------------------------------------------------------------------- DLQs


@action_view(_dlq_page)
def dlq_requeue(request: HttpRequest, conn: str, key: bytes) -> str | HttpResponse:
    action = "dlq.requeue_all" if request.POST.get("all") else "dlq.requeue"
    data = action_data(request, conn, action, af.DlqRequeueForm, request.POST, key=key)
    if data["all"]:
        job = services.dlq_requeue_all(user=request.user, conn=conn, key=key, up_to=data["up_to"], batch=data["batch"])
        messages.info(request, f"Requeueing every entry up to {data['up_to']} in the background (job {job.pk}).")
        return HttpResponseRedirect(links.job_url(job.pk))
    result = services.dlq_requeue(user=request.user, conn=conn, key=key, ids=data["ids"])
    text = requeue_message(result)
    requeued_links_keep(request, conn, key, result)
    if result.failed:
        messages.error(
            request,
            f"{_plural(len(result.failed), 'entry', 'entries')} could not be requeued and stay in the DLQ: "
            + "; ".join(f"{f.dlq_id}: {f.reason}" for f in result.failed[:5]),
        )
    return text


#: New entries a requeue's flash names, and links to, before it says "and k more".
REQUEUE_SHOWN = 10
#: Session key of the last requeue's new entries, shown (with links) by the DLQ page it returns to.
REQUEUED_SESSION_KEY = "busconsole.requeued"
#: How long that list is worth showing: it belongs to the redirect right after the requeue.
REQUEUED_FRESH_S = 120


def requeue_message(result: Any) -> str:
    """What a requeue did, with the new IDs per target: "Requeued 3 entries to orders: 1712-0, …"."""
    by_target: dict[str, list[str]] = {}
    for r in result.requeued:
        by_target.setdefault(display_text(r.stream), []).append(r.new_id)
    if len(by_target) == 1:
        [(target, new_ids)] = by_target.items()
        text = f"Requeued {_plural(len(new_ids), 'entry', 'entries')} to {target}: {_ids_text(new_ids, REQUEUE_SHOWN)}."
    elif by_target:
        text = f"Requeued {_plural(len(result.requeued), 'entry', 'entries')}: " + "; ".join(
            f"{len(new_ids)} to {target} ({_ids_text(new_ids, REQUEUE_SHOWN)})" for target, new_ids in by_target.items()
        ) + "."
    else:
        text = "Requeued 0 entries."
    if result.missing:
        text += (
            f" {_plural(len(result.missing), 'entry was', 'entries were')} already gone "
            f"(requeued or deleted by someone else): {_ids_text(result.missing)}."
        )
    return text


def requeued_links_keep(request: HttpRequest, conn: str, key: bytes, result: Any) -> None:
    """Keep the first new entries' links for the DLQ page the requeue returns to (a flash is text)."""
    shown = result.requeued[:REQUEUE_SHOWN]
    request.session[REQUEUED_SESSION_KEY] = {
        "dlq": links.dlq_url(conn, key),
        "at": time.time(),
        "links": [[r.new_id, display_text(r.stream), links.entry_url(conn, r.stream, r.new_id)] for r in shown],
        "more": len(result.requeued) - len(shown),
    }


def requeued_links_take(request: HttpRequest, conn: str, key: bytes) -> dict[str, Any] | None:
    """The links :func:`requeued_links_keep` left for this DLQ's page, once, while fresh."""
    kept = request.session.pop(REQUEUED_SESSION_KEY, None)
    if not isinstance(kept, dict) or kept.get("dlq") != links.dlq_url(conn, key):
        return None
    if time.time() - float(kept.get("at", 0)) > REQUEUED_FRESH_S:
        return None
    return kept


@action_view(_dlq_page)
def dlq_delete(request: HttpRequest, conn: str, key: bytes) -> str:
    data = action_data(request, conn, "dlq.delete", af.DlqDeleteForm, request.POST, key=key)
    deleted = services.dlq_delete(user=request.user, conn=conn, key=key, ids=data["ids"])
    return f"Deleted {_plural(deleted, 'entry', 'entries')} from the DLQ for good."


@action_view(_dlq_page)
def dlq_purge(request: HttpRequest, conn: str, key: bytes) -> str:
    data = action_data(request, conn, "dlq.purge", af.DlqPurgeForm, request.POST, key=key)
    purged = services.dlq_purge(user=request.user, conn=conn, key=key, up_to=data["up_to"], confirm=data["confirm"])
    return f"Purged {_plural(purged, 'entry', 'entries')} (up to {data['up_to']}); later arrivals were kept."


# -------------------------------------------------------------------------------------- replay


@action_view(_stream_page)
def replay_count(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """The dry run: how many entries the range holds, with the button that replays exactly them."""
    data = action_data(request, conn, "replay.count", af.ReplayForm, request.POST, key=key)
    preview = services.stream_replay_count(
        user=request.user, conn=conn, key=key, start=data["start"], end=data["end"], target=data["target"],
        match=data["match"],
    )
    context = _preview_context(
        conn, key, what="replay", preview=preview, target_text=display_text(preview.target),
        match_text="\n".join(f"{display_text(n)}={display_text(v)}" for n, v in preview.match.items()),
        confirm_url=links.stream_url(conn, key) + "replay/", back_url=links.stream_url(conn, key),
    )
    return render(request, "streams_app/action_preview.html", context)


@action_view(_stream_page)
def replay(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    data = action_data(request, conn, "replay", af.ReplayForm, request.POST, key=key)
    job = services.stream_replay(
        user=request.user, conn=conn, key=key, start=data["start"], end=data["end"], target=data["target"],
        match=data["match"], batch=data["batch"],
    )
    bounds = range_text(job.parameters.get("start", data["start"]), job.parameters.get("end", data["end"]))
    messages.info(request, f"Replaying {bounds} in the background (job {job.pk}).")
    return HttpResponseRedirect(links.job_url(job.pk))
