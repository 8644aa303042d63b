"""Alert webhooks: an alert's open and resolved transitions POSTed as JSON to its rule's URL.

:func:`alerts_notify_on_commit` enqueues the Celery task ``alert_notify`` (in :mod:`streams_app.tasks`,
by its name :data:`ALERT_NOTIFY_TASK`, since that module imports this one) once the transaction that
changed the alerts commits; the task calls :func:`alert_deliver` and
retries with exponential backoff (:func:`notify_backoff`) up to ``WEBHOOK_MAX_ATTEMPTS`` tries.
Each try is one short POST (``WEBHOOK_TIMEOUT_S``, redirects not followed: a webhook that
redirects is misconfigured, and following it would send the alert somewhere the admin did not name).
Before each try the host is resolved once and every address checked (:mod:`streams_app.alerts.egress`:
no loopback, private, link-local or metadata address unless ``BUSCONSOLE_WEBHOOK_ALLOW`` lists it);
the POST then goes to a checked address with the URL's own Host header and TLS server name, so the
name is never looked up a second time. A refused URL is not retried: the answer would be the same.
Webhook URLs are set by admins and often carry a secret in their path (Slack, Teams...), so they are
shown and audited by scheme and host only (:func:`webhook_display`); the delivery error, which tells
how a host answered, is shown to admins only.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from busconsole.celery import app as celery_app
from busconsole.locks import lock_held
from streams_app.alerts import egress
from streams_app.alerts.models import Alert

log = logging.getLogger(__name__)

#: The Celery task that delivers one alert (``streams_app.tasks.alert_notify`` declares itself under it).
ALERT_NOTIFY_TASK = "streams_app.tasks.alert_notify"
WEBHOOK_TIMEOUT_S = 5.0
#: Deliveries are tried this many times in all (the first try and its retries).
WEBHOOK_MAX_ATTEMPTS = 6
#: Checked addresses of one name tried in turn when a connection fails (nothing was sent yet).
WEBHOOK_MAX_ADDRESSES = 3
USER_AGENT = "busconsole-alerts/1"
_BACKOFF_BASE_S = 5
_BACKOFF_MAX_S = 300


def alerts_notify_on_commit(alert_ids: list[int]) -> None:
    """Enqueue one delivery per alert after the current transaction commits.

    By name, as :func:`streams_app.jobs.runner.job_enqueue` does: the registered task's own
    ``apply_async`` in every Django process, so eager mode and routes apply as to ``.delay``.
    """
    for alert_id in alert_ids:

        def notify(i: int = alert_id) -> None:
            celery_app.signature(ALERT_NOTIFY_TASK, args=(i,)).delay()

        transaction.on_commit(notify, robust=True)


def notify_backoff(retries: int) -> int:
    """Seconds before retry number ``retries + 1``: 5, 10, 20, 40... capped at five minutes."""
    return min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2**retries)


def alert_payload(alert: Alert) -> dict[str, Any]:
    """The JSON a webhook receives: the alert, its rule and its target (a stream, group, consumer or family), as text."""
    rule = alert.rule
    family = rule.watches_family  # a family rule's target is the family's glob, not a stream
    return {
        "event": f"alert.{alert.state}",
        "alert": {
            "id": alert.pk,
            "state": alert.state,
            "connection": alert.connection,
            "stream": None if family else alert.target_text,
            "family": alert.target_text if family else None,
            "group": alert.target_group or None,
            "consumer": alert.target_consumer or None,
            "value": alert.last_value,
            "message": alert.message,
            "since": alert.since.isoformat() if alert.since else None,
            "opened_at": alert.opened_at.isoformat(),
            "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
        },
        "rule": {
            "id": rule.pk,
            "name": rule.name,
            "kind": rule.kind,
            "threshold": rule.threshold,
            "for_seconds": rule.for_seconds,
        },
    }


def alert_deliver(*, alert_id: int) -> str:
    """POST the alert's current state to its rule's webhook once: ``sent``, ``skipped``, ``failed`` (worth
    a retry) or ``refused`` (the URL or its addresses are not allowed: final).

    Idempotent: the state last delivered is kept in ``notified_state``, so a repeated task (a retry, a
    task for the open transition arriving after the alert already resolved) sends nothing twice. A
    per-alert lock keeps two workers from posting the same transition at once.
    """
    with lock_held(name=f"alert-notify:{alert_id}", ttl_ms=int((WEBHOOK_TIMEOUT_S + 30) * 1000)) as acquired:
        if not acquired:
            return "failed"  # someone else is delivering it now: try again later
        return _post_once(alert_id)


def _post_once(alert_id: int) -> str:
    alert = Alert.objects.select_related("rule").filter(pk=alert_id).first()
    if alert is None or not alert.rule.webhook_url or alert.notified_state == alert.state:
        return "skipped"
    state = alert.state
    Alert.objects.filter(pk=alert_id).update(notify_attempts=alert.notify_attempts + 1)
    url = alert.rule.webhook_url
    outcome, error = "failed", ""
    try:
        response = _post_pinned(url, alert_payload(alert))
        if not response.is_success:
            error = f"HTTP {response.status_code} from {webhook_display(url)}"
    except egress.WebhookRefused as exc:
        outcome, error = "refused", f"Refused: {exc}"
    except egress.WebhookLookupFailed:
        error = f"DNS lookup failed for {webhook_display(url)}"
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__} posting to {webhook_display(url)}"
    if error:
        Alert.objects.filter(pk=alert_id).update(notify_error=error[:500])
        log.warning("alert %s webhook %s: %s", alert_id, outcome, error)
        return outcome
    Alert.objects.filter(pk=alert_id).update(notified_at=timezone.now(), notified_state=state, notify_error="")
    return "sent"


def _post_pinned(url: str, payload: dict[str, Any]) -> httpx.Response:
    """POST ``payload`` to ``url`` at an address checked by :func:`egress.addresses_checked`.

    The request goes to the checked IP address with the URL's Host header and, for https, its name as
    TLS server name (httpx's ``sni_hostname`` extension), so the certificate is still verified against
    the name. An explicit transport keeps proxies from the environment out: a proxy would resolve the
    name itself, past the check.
    """
    problem = egress.url_problem(url)
    if problem:
        raise egress.WebhookRefused(problem)
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL:
        raise egress.WebhookRefused("The webhook URL is malformed.") from None
    if target.userinfo or target.scheme not in egress.SCHEMES:  # httpx's reading of the URL is the one used
        raise egress.WebhookRefused("The webhook URL must be http(s) without a user name or password.")
    host = target.raw_host.decode("ascii")
    port = target.port or (443 if target.scheme == "https" else 80)
    addresses = egress.addresses_checked(host, port, settings.BUSCONSOLE_WEBHOOK_ALLOW)
    headers = {"User-Agent": USER_AGENT, "Host": target.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    last_error: httpx.TransportError | None = None
    with httpx.Client(transport=httpx.HTTPTransport(), timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False) as http:
        for address in addresses[:WEBHOOK_MAX_ADDRESSES]:
            try:
                return http.post(target.copy_with(host=str(address)), json=payload, headers=headers, extensions=extensions)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = exc  # nothing was sent: the next checked address may answer
    assert last_error is not None  # addresses_checked returns at least one address
    raise last_error


def webhook_display(url: str) -> str:
    """A webhook URL safe to show: scheme and host only (paths and queries often carry the secret)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a port out of range or a broken address, stored before the form refused them
        return "(malformed URL)"
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{port}/…" if parts.path not in ("", "/") or parts.query else f"{parts.scheme}://{host}{port}/"
