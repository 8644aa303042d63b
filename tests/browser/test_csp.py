"""Every page of the console under its Content-Security-Policy, in headless Chromium.

The policy forbids inline script, eval and inline styles. A page that still relied on one would not
fail loudly: the browser refuses the handler or the style, reports a violation and carries on. So this
test records every violation (the ``securitypolicyviolation`` event and Chromium's console message),
every page error and htmx's own eval errors, and fails on any. It also audits each page's DOM for
what the policy would refuse only later (an ``onclick`` is compiled on the first click, not at load).

The pages come from the URL resolver, so a new route cannot be forgotten: each is filled with real
objects made here, probed with GET (POST-only routes answer 405 and are skipped; so are the JSON API
and the routes that do not answer HTML), then opened as an admin. The pages reached only by a form
POST (the previews) are opened by submitting their forms, and htmx's partial refreshes and both
websockets (the live tail and the page events) are exercised on the way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
import redis
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from playwright.sync_api import expect

from streams_app.accounts.tokens import token_create
from streams_app.alerts.models import Alert, AlertRule
from streams_app.jobs.models import Job
from streams_app.lake.models import PipelineRun, RetryRollup, ThroughputRollup
from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client
from streams_app.saved.models import SavedView
from tests.browser.conftest import login_through_form
from tests.console.conftest import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STREAM, DLQ, GROUP, CONSUMER = b"orders", b"orders:dlq", b"billing", b"worker-1"

# Routes that are neither pages nor POST-only, with the reason they are not opened in a tab.
NOT_OPENED = {
    "progress-events": "Server-Sent Events: the response never ends, so a GET probe would never finish",
    "oidc-callback": "the OpenID provider's answer: refused (4xx) without one; tests/browser/test_oidc.py opens it",
}
# Query strings a route needs to answer at all.
QUERIES = {
    "entry-raw": "?field=0",
    "autoclaim-confirm": "?consumer=sweeper&min_idle_ms=0&count=10",
    "dlq-requeue-confirm": "?up_to=9999999999999-0",
    "dlq-triage-requeue-confirm": "?group=billing",
    "stream-search": "?q=order",
    "dlq-search": "?q=order",
    "dlq-search-requeue-confirm": "?q=order",
    "stream-search-replay-confirm": "?q=order",
    "group-search-ack-confirm": "?q=order",
}
SKIPPED_PREFIXES = ("api/v1/", "admin/")  # the JSON API; Django's admin has a test of its own below

EXPECTED_DIRECTIVES = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "frame-ancestors": "'none'",
    "form-action": "'self'",
}

RECORDER = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} refused ${e.blockedURI || "inline"} ` +
                           `(${e.sourceFile || location.pathname}:${e.lineNumber}) ${e.sample}`);
});
for (const name of ["htmx:evalDisallowedError", "htmx:syntax:error"]) {
  document.addEventListener(name, (e) => window.__violations.push(`${name} on <${e.target.tagName}>`));
}
"""

# What a strict policy refuses only later, found in the DOM: inline handlers (compiled when their
# event first fires), javascript: URLs, inline scripts and the htmx features that need eval (hx-on,
# trigger filters in [...], js: values). Inline styles need no audit: the browser reports a style=""
# or <style> in the HTML as it parses it, and scripts may set styles through the DOM (el.style),
# which the policy allows and the admin's calendar widget does.
DOM_AUDIT = """
() => {
  const found = [];
  for (const el of document.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase(), value = attr.value.trim().toLowerCase();
      const bare = name.replace(/^data-/, "");
      if (name.startsWith("on") || bare.startsWith("hx-on") || bare === "hx-vars"
          || (bare === "hx-trigger" && value.includes("["))
          || (bare === "hx-vals" && /^(js|javascript):/.test(value))
          || (["href", "src", "action", "formaction"].includes(name) && value.startsWith("javascript:"))) {
        found.push(`<${el.tagName.toLowerCase()} ${attr.name}="${attr.value}">`);
      }
    }
    const type = (el.getAttribute("type") || "").toLowerCase();
    if (el.tagName === "SCRIPT" && !el.hasAttribute("src") && (!type || type.includes("javascript") || type === "module")) {
      found.push("<script> with inline code");
    }
  }
  return found;
}
"""


class Watch:
    """What went wrong on the page since the last look: CSP violations, page errors, eval refusals."""

    def __init__(self, page) -> None:
        self.page = page
        self.console: list[str] = []
        self.errors: list[str] = []
        page.add_init_script(RECORDER)
        page.on("console", lambda m: self.console.append(m.text) if "Content Security Policy" in m.text else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def problems(self, where: str) -> list[str]:
        """Everything reported since the last call, each labelled with ``where``; the DOM audit too."""
        # Violation events are queued tasks: let the page run what it has queued before reading.
        self.page.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")
        found = [f"{where}: {v}" for v in self.page.evaluate("window.__violations || []")]
        found += [f"{where}: DOM has {v}" for v in self.page.evaluate(DOM_AUDIT)]
        found += [f"{where}: console: {m}" for m in self.console] + [f"{where}: page error: {e}" for e in self.errors]
        self.page.evaluate("window.__violations = []")
        self.console.clear()
        self.errors.clear()
        return found


def parse_policy(header: str) -> dict[str, str]:
    return {d.split()[0]: " ".join(d.split()[1:]) for d in (p.strip() for p in header.split(";")) if d}


def walk(patterns: list, prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(route, name)`` of every URL pattern, with the prefixes of the includes above it."""
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p.name or ""


def fill(route: str, name: str, values: dict[str, str]) -> str:
    """The route with each ``<converter:kwarg>`` replaced by the value made for that kwarg.

    ``key`` is the DLQ on dead-letter routes and the stream elsewhere.
    """
    def value(match: re.Match) -> str:
        kwarg = match.group(1)
        if kwarg == "key" and name.startswith("dlq"):
            return values["dlq_key"]
        if kwarg == "entry_id" and name.startswith("dlq"):
            return values["dlq_entry_id"]  # a dead letter's own page names an entry of the DLQ
        if kwarg not in values:
            raise AssertionError(f"route {name!r} ({route}) has <{kwarg}>: give test_csp.py a value for it")
        return values[kwarg]

    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", value, route) + QUERIES.get(name, "")


def make_console_data(r: redis.Redis, admin) -> dict[str, str]:
    """A stream with entries and a group with pending entries, a DLQ, charts with samples, an open
    alert, a running job, a token and report rollups; returns the values the routes' converters take."""
    ids = [r.xadd(STREAM, {"type": "order.created", "data": json.dumps({"n": i})}).decode() for i in range(6)]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, CONSUMER, {STREAM: ">"}, count=3)
    for i in range(2):
        dlq_entry_id = r.xadd(DLQ, {"type": "order.created", "data": "{}", "dlq_original_stream": "orders", "dlq_group": "billing",
                     "dlq_error": f"ValueError: order {i} declined", "dlq_retries": "3"}).decode()
    AlertRule.objects.create(name="billing lags", kind=AlertRule.Kind.GROUP_LAG_ABOVE, threshold=0, for_seconds=0,
                             created_by=admin)
    redis_client.reset()
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(minutes=2), interval_s=10)
    for i in range(3):
        r.xadd(STREAM, {"type": "order.created", "n": str(i)})
        snapshots.snapshot_take(tick=start + timedelta(seconds=10 * i))
    assert Alert.objects.filter(state=Alert.State.OPEN).exists()  # evaluated after the snapshots
    job = Job.objects.create(kind="dlq.requeue_all", connection="default", state=Job.State.RUNNING, done=1, total=2,
                             parameters={"key_text": "orders:dlq"}, created_by=admin)
    Job.objects.create(kind="replay", connection="default", state=Job.State.DONE, done=4, total=4, created_by=admin)
    token, _ = token_create(user=admin, name="dashboards")
    view = SavedView.objects.create(owner=admin, name="billing pending", path="/jobs/", query="state=done", shared=True)
    monday = datetime(2026, 1, 5, 14, tzinfo=UTC)
    stream = {"connection": "default", "stream": STREAM, "stream_text": "orders",
              "stream_hash": hashlib.sha256(STREAM).hexdigest()}
    for hours, entries in ((0, 40), (1, 7), (24, 19)):
        ThroughputRollup.objects.create(**stream, scope="stream", event_type="", resolution="hour",
                                        bucket=monday + timedelta(hours=hours), entries=entries, bytes=entries * 10)
    RetryRollup.objects.create(**stream, retries=3, count=2)
    PipelineRun.objects.create(started_at=monday, finished_at=monday + timedelta(minutes=1), as_of=monday, state="done")
    return {
        "conn": "default", "key": quote(STREAM, safe=""), "family": quote(STREAM, safe=""), "dlq_key": quote(DLQ, safe=""),
        "group": quote(GROUP, safe=""), "consumer": quote(CONSUMER, safe=""), "entry_id": ids[0],
        "dlq_entry_id": dlq_entry_id,
        "job_id": str(job.pk), "rule_id": str(AlertRule.objects.get().pk), "token_id": str(token.pk),
        "view_id": str(view.pk),
    }


def refreshed(page, watch: Watch, where: str, trigger: str, url_part: str) -> None:
    """Run ``trigger`` (JS) and wait for the htmx request it causes: a partial refresh, no violation."""
    with page.expect_response(lambda resp: resp.request.headers.get("hx-request") == "true" and url_part in resp.url):
        page.evaluate(trigger)
    # (expect, not wait_for_function: Playwright evaluates that predicate with eval, which the policy refuses)
    expect(page.locator(".htmx-request, .htmx-settling, .htmx-swapping")).to_have_count(0)
    assert watch.problems(where) == []


def test_every_console_page_runs_under_a_strict_csp(page, asgi_server, admin_user, r: redis.Redis) -> None:
    expect.set_options(timeout=15_000)
    values = make_console_data(r, admin_user)
    watch = Watch(page)

    # Anonymous: the login page is under the policy too.
    response = page.goto("/login/")
    policy = parse_policy(response.headers.get("content-security-policy", ""))
    assert {d: policy.get(d) for d in EXPECTED_DIRECTIVES} == EXPECTED_DIRECTIVES, policy
    assert not re.search(r"unsafe-(inline|eval|hashes)|\*", ";".join(policy.values())), policy
    assert watch.problems("/login/") == []
    login_through_form(page, admin_user, asgi_server)

    routes = [(route, name) for route, name in walk(get_resolver().url_patterns)
              if not route.startswith(SKIPPED_PREFIXES) and name not in NOT_OPENED]
    opened, post_only, not_html = [], [], []
    for route, name in routes:
        url = fill(route, name, values)
        probe = page.request.get(url, max_redirects=0)
        if probe.status == 405:
            post_only.append(name)
            continue
        if not probe.headers.get("content-type", "").startswith("text/html"):
            not_html.append(name)
            continue
        assert probe.status in (200, 302), f"{name}: GET {url} answered {probe.status}"
        assert parse_policy(probe.headers.get("content-security-policy", "")) == policy, f"{name}: {url}"
        response = page.goto(url)
        assert response.ok, f"{name}: {url} answered {response.status}"
        assert watch.problems(f"{name} {url}") == [], f"CSP problems on {url}"
        opened.append(name)
    # The resolver gave what the console has: pages opened, actions skipped, non-HTML answers set aside.
    assert {"overview", "streams", "stream", "entry", "group", "dlq-list", "dlq", "tail", "jobs", "job", "audit",
            "alerts", "alert-rule-new", "alert-rule-edit", "reports", "tokens", "stream-charts", "group-charts",
            "dlq-charts", "charts-overview", "stream-handlers", "group-handlers", "login"} <= set(opened)
    assert {"claim", "ack", "rewind-preview", "trim-preview", "replay-count", "token-revoke", "logout"} <= set(post_only)
    assert {"metrics", "entry-raw", "healthz"} <= set(not_html)

    stream_page = f"/c/default/streams/{values['key']}/"
    group_page = f"{stream_page}groups/{values['group']}/"

    # htmx partial refreshes: an operator action elsewhere, a metric snapshot, auto-refresh, polling.
    page.goto(stream_page)
    expect(page.locator("body")).to_have_attribute("data-metrics-socket", "open")  # the events websocket
    refreshed(page, watch, "stream entries", "document.body.dispatchEvent(new CustomEvent('stream-changed'))",
              stream_page)
    refreshed(page, watch, "stream charts", "document.body.dispatchEvent(new CustomEvent('metrics-snapshot'))",
              "/charts/")
    page.goto(group_page)
    refreshed(page, watch, "group pending", "document.body.dispatchEvent(new CustomEvent('job-progress'))", group_page)
    page.goto("/c/default/streams/")
    refreshed(page, watch, "streams auto-refresh", "document.getElementById('autorefresh').click()",
              "/c/default/streams/")
    page.goto(f"/jobs/{values['job_id']}/")
    with page.expect_response(lambda resp: resp.request.headers.get("hx-request") == "true"):
        pass  # the running job's panel polls by itself
    assert watch.problems("job polling") == []
    page.goto("/reports/")
    expect(page.locator("table.heatmap td rect").first).to_be_attached()
    with page.expect_response(lambda resp: resp.request.headers.get("hx-request") == "true"):
        page.select_option("select[name=stream]", index=1)
        page.locator("#heatmap").evaluate("el => el.closest('section').querySelector('form').requestSubmit()")
    assert watch.problems("reports heatmap") == []

    # A section someone is working in (a box ticked) is left alone; once untouched it refreshes again.
    page.goto(group_page)
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url) if req.headers.get("hx-request") else None)
    page.locator("#pending input[name=ids]").first.check()
    page.evaluate("document.body.dispatchEvent(new CustomEvent('stream-changed'))")
    page.locator("#pending input[name=ids]").first.uncheck()
    page.locator("#pending input[name=ids]").first.blur()
    refreshed(page, watch, "group pending, untouched", "document.body.dispatchEvent(new CustomEvent('stream-changed'))",
              group_page)
    assert len(requests) == 1, requests

    # Confirm buttons ask first (a dismissed dialog sends nothing).
    asked = []
    for url, button in ((f"/c/default/dlq/{values['dlq_key']}/", "button.danger:has-text('Delete selected')"),
                        ("/tokens/", "button:has-text('Revoke')"), ("/alerts/", "button:has-text('Delete')")):
        page.goto(url)
        if url.startswith("/c/"):
            page.locator("tr[data-id] input[name=ids]").first.check()
        dialogs = len(page.dialogs)
        page.locator(button).first.click()
        assert len(page.dialogs) == dialogs + 1, f"{url}: no confirm dialog"
        asked.append(page.dialogs[-1])
        assert page.url.endswith(url), f"{url}: the dismissed confirm still submitted"
        assert watch.problems(f"confirm on {url}") == []
    assert r.xlen(DLQ) == 2

    # The pages only a POST reaches: previews and the dry run, through their forms.
    page.goto(group_page)
    page.fill("input[name=to]", "0")
    page.click("button:has-text('Preview rewind')")
    expect(page.locator("h1")).to_contain_text("Rewind")
    assert watch.problems("rewind preview") == []
    page.goto(group_page)
    page.locator("form.consumer-delete button").first.click()
    page.wait_for_url(re.compile(r"/delete/preview/$"))
    assert watch.problems("consumer delete preview") == []
    page.goto(stream_page)
    page.fill("#replay-form input[name=start]", "-")
    page.click("#replay-form button[type=submit]")
    page.wait_for_url(re.compile(r"/replay/count/$"))
    assert watch.problems("replay dry run") == []
    page.goto(stream_page)
    page.click("#stream-admin summary")
    page.click("#trim-maxlen button[type=submit]")
    page.wait_for_url(re.compile(r"/trim/preview/$"))
    assert watch.problems("trim preview") == []

    # The live tail: its websocket connects under connect-src 'self' and entries arrive.
    page.goto(f"{stream_page}tail/")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    new_id = r.xadd(STREAM, {"type": "order.created", "html": "<img src=x onerror=alert(1)>"}).decode()
    expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(new_id)
    assert watch.problems("live tail") == []
    assert page.dialogs == asked  # the confirm questions, nothing else (no alert() from a payload)


def test_django_admin_pages_run_under_the_csp(page, asgi_server, r: redis.Redis) -> None:
    """The admin (users, groups, tokens, jobs, the audit log) is served under the same policy."""
    from django.contrib import admin

    superuser = make_user("sue-super", is_staff=True, is_superuser=True)
    token_create(user=superuser, name="dashboards")
    Job.objects.create(kind="replay", connection="default", state=Job.State.DONE, done=1, total=1, created_by=superuser)
    watch = Watch(page)
    login_through_form(page, superuser, asgi_server)

    urls = ["/admin/"]
    for model in admin.site._registry:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        urls.append(base)
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            urls.append(f"{base}{first.pk}/change/")
    urls.append("/admin/auth/user/add/")
    for url in urls:
        response = page.goto(url)
        assert response.ok, f"{url} answered {response.status}"
        assert "content-security-policy" in response.headers, url
        assert watch.problems(url) == [], f"CSP problems on {url}"
