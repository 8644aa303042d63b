"""The console's route table: every route's documented answer per role, and a walk of the URL resolver.

This is data the route-generated matrices share (roles in ``test_route_matrix.py``, masking in
``test_masking_matrix.py``, the ACL and OpenAPI checks): :data:`ROUTES` has one row per console route,
:func:`all_routes` walks ``busconsole.urls`` (includes and all, the Django admin site marked apart), and
the :func:`world` fixture makes the real objects (a stream with entries, a group with pending entries and
a consumer, a DLQ entry, a job, an alert rule, a token, mirror rows and a snapshot) that :func:`url_of`
fills each route's converters with. A new route without a row fails
``test_route_matrix.py::test_every_route_has_a_row_and_every_row_a_route``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis
from django.apps import apps
from django.contrib.auth.models import User
from django.contrib.contenttypes.models import ContentType
from django.urls import URLPattern, URLResolver, get_resolver
from django.urls.resolvers import RegexPattern
from django.utils import timezone

from streams_app.accounts.tokens import token_create
from streams_app.alerts.models import AlertRule
from streams_app.jobs.models import Job
from streams_app.masking.models import MaskRule
from streams_app.metrics import mirror, snapshots
from streams_app.saved.models import SavedView
from tests.console.conftest import logged_in
from tests.console.helpers import CONN, seg

ROLES = ["anonymous", "outsider", "viewer", "operator", "admin"]
SIGNED_IN = ("viewer", "operator", "admin")

# --------------------------------------------------------------------------- the documented answers


@dataclass(frozen=True)
class Route:
    """What a route answers a signed-in user (anonymous and outsider answers follow from ``public``).

    ``get``: ``read`` (200 to every role), ``admin`` (200 to admins, 403 to others), ``post`` (a POST-only
    address: 405), ``login`` (the login page: signed-in users are sent on), ``admin-login`` (the login
    the Django admin sends people to: admins are sent on, other roles refused), ``token`` (only a bearer
    token opens it: 401 to a session), ``public`` (200 to everyone), ``refused`` (a 4xx to everyone: an
    address that answers only what another party sends there, the OpenID callback).
    ``post``: ``none`` (405), ``any`` (any signed-in role may post), ``operator`` or ``admin`` (the least
    role that may; lower roles get 403), ``owner`` (a job's own user may, whatever their role; on anyone
    else's job an operator may: the matrix posts on a job of nobody's, where a viewer gets 403, and on a
    job of the role's own user, where nobody may get 403), ``login``, ``admin-login``, ``public``.
    ``public``: open to anonymous users too. ``html``: a page under ``/api/`` (anonymous users are sent to
    log in rather than answered 401).
    """

    get: str
    post: str
    query: str = ""
    public: bool = False
    html: bool = False


READ = Route("read", "none")
OPERATOR = Route("post", "operator")
ADMIN = Route("post", "admin")
OWNER = Route("post", "owner")  # one's own job; anyone's for operators and admins

ROUTES: dict[str, Route] = {
    "login/": Route("login", "login", public=True),
    "logout/": Route("post", "any"),
    # single sign-on: the login button's post (404 here: no provider is configured) and the provider's
    # callback, which without the provider's answer is refused to everyone (tests/security/sso/)
    "oidc/login/": Route("post", "public", public=True),
    "oidc/callback/": Route("refused", "none", public=True),
    "healthz": Route("public", "public", public=True),
    "readyz": Route("public", "none", public=True),  # GET and HEAD only
    "admin/login/": Route("admin-login", "admin-login", public=True),
    "": READ,
    "charts/overview/": READ,
    "c/<conn:conn>/streams/": READ,
    "c/<conn:conn>/streams/<seg:key>/": READ,
    "c/<conn:conn>/streams/<seg:key>/charts/": READ,
    "c/<conn:conn>/streams/<seg:key>/handlers/": READ,
    "c/<conn:conn>/streams/<seg:key>/replay/count/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/replay/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/trim/preview/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/trim/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/delete/preview/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/delete/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/": READ,
    "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/raw/": Route("read", "none", query="?field=0"),
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/": READ,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/charts/": READ,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/handlers/": READ,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/confirm/": Route(
        "read", "none", query="?consumer=w&min_idle_ms=0&count=1"
    ),
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/preview/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/preview/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/": ADMIN,
    "c/<conn:conn>/dlq/": READ,
    "c/<conn:conn>/dlq/<seg:key>/": READ,
    "c/<conn:conn>/dlq/<seg:key>/charts/": READ,
    "c/<conn:conn>/dlq/<seg:key>/requeue/": OPERATOR,
    "c/<conn:conn>/dlq/<seg:key>/requeue/confirm/": Route("read", "none", query="?up_to=0-1"),
    "c/<conn:conn>/dlq/<seg:key>/delete/": ADMIN,
    "c/<conn:conn>/dlq/<seg:key>/purge/": ADMIN,
    "c/<conn:conn>/dlq/<seg:key>/entries/<eid:entry_id>/": READ,  # a dead letter's own page
    "c/<conn:conn>/streams/<seg:key>/add/": Route("read", "operator"),  # the "Add entry" form
    # export of a range: a download (its form POSTs), a job, a job's file
    "c/<conn:conn>/streams/<seg:key>/export/": Route("read", "any"),
    "c/<conn:conn>/streams/<seg:key>/export/job/": Route("post", "any"),
    "jobs/<int:job_id>/download/": READ,  # a job without a file: a page that says so
    # the event bus's delayed retries
    "c/<conn:conn>/retries/": READ,
    "c/<conn:conn>/streams/<seg:key>/retries/": READ,
    "c/<conn:conn>/streams/<seg:key>/retries/retry/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/retries/dead-letter/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/retries/delete/": ADMIN,
    "c/<conn:conn>/streams/<seg:key>/retries/all/preview/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/tail/": READ,
    # the incident timeline of a connection and of a stream, and its "add an annotation" form
    "c/<conn:conn>/timeline/": READ,
    "c/<conn:conn>/timeline/annotate/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/timeline/": READ,
    "c/<conn:conn>/streams/<seg:key>/timeline/annotate/": OPERATOR,
    "c/<conn:conn>/progress/<seg:key>/events/": READ,
    "jobs/": READ,
    "jobs/<int:job_id>/": READ,
    "jobs/<int:job_id>/cancel/": OWNER,
    "jobs/<int:job_id>/resume/": OPERATOR,
    "audit/": READ,
    "alerts/": READ,
    "alerts/rules/new/": Route("admin", "admin"),
    "alerts/rules/<int:rule_id>/": Route("admin", "admin"),
    "alerts/rules/<int:rule_id>/delete/": ADMIN,
    "reports/": READ,
    "reports/run/": OPERATOR,
    "tokens/": Route("read", "any"),
    "tokens/<int:token_id>/revoke/": Route("post", "any"),
    "metrics": Route("token", "none", public=True),
    # payload search: a step of a search on the stream and DLQ pages, and the API
    "c/<conn:conn>/streams/<seg:key>/search/": Route("read", "none", query="?q=order"),
    "c/<conn:conn>/dlq/<seg:key>/search/": Route("read", "none", query="?q=order"),
    "c/<conn:conn>/dlq/<seg:key>/search/requeue/confirm/": Route("read", "none", query="?q=order"),
    "c/<conn:conn>/dlq/<seg:key>/search/requeue/": OPERATOR,
    # search results feeding bulk actions: replay on the stream page, ack on the group page
    "c/<conn:conn>/streams/<seg:key>/search/replay/confirm/": Route("read", "none", query="?q=order"),
    "c/<conn:conn>/streams/<seg:key>/search/replay/": OPERATOR,
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/confirm/": Route("read", "none", query="?q=order"),
    "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/": OPERATOR,
    # a DLQ triage count's "requeue these": its confirm page and the job's start; the counts in the API
    "c/<conn:conn>/dlq/<seg:key>/triage/requeue/confirm/": Route("read", "none", query="?group=workers"),
    "c/<conn:conn>/dlq/<seg:key>/triage/requeue/": OPERATOR,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/": READ,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/requeue": OPERATOR,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/search/requeue": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/search/": Route("read", "none", query="?q=data.n%20%3E%200"),
    # the journey of one event: a page and its JSON, which every role may read
    "c/<conn:conn>/journey/": Route("read", "none", query="?q=payload&stream=orders"),
    "api/v1/c/<conn:conn>/journey/": Route("read", "none", query="?q=payload&stream=orders"),
    # saved views: any signed-in user lists and saves; owners rename and delete
    "views/": Route("read", "any"),
    "views/<int:view_id>/rename/": Route("post", "any"),
    "views/<int:view_id>/delete/": Route("post", "any"),
    "api/v1/views/": Route("read", "any"),
    "api/v1/views/<int:view_id>/delete": Route("post", "any"),
    # the JSON API
    "api/v1/connections/": READ,
    "api/v1/c/<conn:conn>/streams/": READ,
    # stream families: the rows of one bounded pass, and a family's members (the world's family: "orders")
    "c/<conn:conn>/families/": READ,
    "c/<conn:conn>/families/<seg:family>/": READ,
    "api/v1/c/<conn:conn>/families/": READ,
    "api/v1/c/<conn:conn>/families/<seg:family>/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/entries/": Route("read", "operator"),  # GET reads, POST adds one
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/replay": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/export": Route("read", "any"),  # GET streams, POST starts a job
    "api/v1/c/<conn:conn>/streams/<seg:key>/trim": ADMIN,
    "api/v1/c/<conn:conn>/streams/<seg:key>/delete": ADMIN,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/pending/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete": ADMIN,
    "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete": ADMIN,
    "api/v1/c/<conn:conn>/dlq/": READ,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/": READ,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/requeue": OPERATOR,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/delete": ADMIN,
    "api/v1/c/<conn:conn>/dlq/<seg:key>/purge": ADMIN,
    "api/v1/c/<conn:conn>/retries/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/retries/": READ,
    "api/v1/c/<conn:conn>/streams/<seg:key>/retries/retry": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/retries/dead-letter": OPERATOR,
    "api/v1/c/<conn:conn>/streams/<seg:key>/retries/delete": ADMIN,
    "api/v1/jobs/": READ,
    "api/v1/jobs/<int:job_id>": READ,
    "api/v1/jobs/<int:job_id>/": READ,
    "api/v1/jobs/<int:job_id>/cancel": OWNER,
    "api/v1/jobs/<int:job_id>/resume": OPERATOR,
    "api/v1/audit/": READ,
    "api/v1/annotations": Route("read", "operator"),  # GET lists, POST writes one
    "api/v1/openapi.json": READ,
    "api/v1/docs/": Route("read", "none", html=True),
}
# An API address spelled without a trailing slash (an action, a job, the export) answers the same with one.
ROUTES.update(
    {route + "/": row for route, row in list(ROUTES.items()) if route.startswith("api/v1/") and route[-1] != "/"
     and not route.endswith(".json")}
)

#: The routes the project's own pages and API add but which answer with Django's own machinery and
#: whose answers the admin-site rule below describes.
ADMIN_NAMESPACE = "admin"

# ------------------------------------------------------------------------------------ the routes


@dataclass(frozen=True)
class Found:
    route: str  # as Django joins it in ResolverMatch.route
    pattern: URLPattern
    admin_site: bool


def _join(prefix: str, pattern: object) -> str:
    """Django's own joining of nested routes (ResolverMatch.route): a regex's leading ``^`` is dropped."""
    text = str(pattern)
    return prefix + (text[1:] if text.startswith("^") else text)


def walk(patterns: list, prefix: str = "", admin_site: bool = False) -> Iterator[Found]:
    for item in patterns:
        if isinstance(item, URLResolver):
            inside = admin_site or item.namespace == ADMIN_NAMESPACE
            yield from walk(item.url_patterns, _join(prefix, item.pattern), inside)
        else:
            yield Found(_join(prefix, item.pattern), item, admin_site)


def count_patterns(patterns: list) -> int:
    """The resolver's leaf patterns, counted without :func:`walk`."""
    return sum(count_patterns(p.url_patterns) if isinstance(p, URLResolver) else 1 for p in patterns)


def all_routes() -> list[Found]:
    return list(walk(get_resolver().url_patterns))


# ------------------------------------------------------------------------------ the test's world


@dataclass
class World:
    values: dict[str, str]
    users: dict[str, User | None]
    tokens: dict[str, str]
    own_jobs: dict[str, str]  # per signed-in role, a job its user started (the ``owner`` routes)


@pytest.fixture
def world(r: redis.Redis, viewer: User, operator: User, admin_user: User, outsider: User) -> World:
    for n in range(5):
        r.xadd("orders", {"n": str(n), "payload": json.dumps({"n": n})})
    entry_id = r.xrange("orders", count=1)[0][0].decode()
    r.xgroup_create("orders", "workers", id="0")
    r.xreadgroup("workers", "c1", {"orders": ">"}, count=3)  # three pending entries, consumer c1
    dlq_entry_id = r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom", "n": "9"}).decode()
    job = Job.objects.create(kind="replay", connection=CONN, parameters={"key": b"orders".hex(), "key_text": "orders"})
    rule = AlertRule.objects.create(name="lag", kind=AlertRule.Kind.GROUP_LAG_ABOVE, threshold=5)
    token = token_create(user=admin_user, name="matrix")[0]
    saved_view = SavedView.objects.create(owner=viewer, name="matrix", path="/jobs/")  # others: 404
    MaskRule.objects.create(stream_glob="orders", field_path="secret")  # its admin pages
    # an audit row, mirror rows and a snapshot run, so that every admin page has an object to show
    logged_in(operator).post(
        f"/api/v1/c/{CONN}/streams/orders/groups/workers/ack", {"ids": ["0-1"]}, content_type="application/json"
    )
    mirror.mirror_sync(conn=CONN)
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now()))
    values = {
        "conn": CONN, "key": "orders", "family": "orders", "group": "workers", "consumer": "c1", "entry_id": entry_id,
        "dlq_entry_id": dlq_entry_id,
        "job_id": str(job.pk), "rule_id": str(rule.pk), "token_id": str(token.pk), "view_id": str(saved_view.pk),
        # the admin site's regex routes
        "app_label": "auth", "url": "no-such-page/",
        "content_type_id": str(ContentType.objects.get_for_model(User).pk), "id": str(viewer.pk),
    }
    users = {"anonymous": None, "outsider": outsider, "viewer": viewer, "operator": operator, "admin": admin_user}
    tokens = {role: token_create(user=user, name=f"scrape-{role}")[1] for role, user in users.items()
              if role in SIGNED_IN}
    own_jobs = {
        role: str(Job.objects.create(kind="export", connection=CONN, created_by=users[role],
                                     parameters={"key": b"orders".hex(), "key_text": "orders"}).pk)
        for role in SIGNED_IN
    }
    return World(values, users, tokens, own_jobs)


def _object_id(route: str) -> str:
    """A real object of the model an admin route is about (``admin/<app>/<model>/...``)."""
    app_label, model_name = route.split("/")[1:3]
    model = apps.get_model(app_label, model_name)
    pk = model._default_manager.order_by("pk").values_list("pk", flat=True).first()
    assert pk is not None, f"the test's world has no {app_label}.{model_name} for {route}"
    return str(pk)


def _fill_regex(text: str, values: dict[str, str]) -> str:
    """Replace each ``(?P<name>...)`` group (nested parentheses included) by its value."""
    out, i = [], 0
    while (start := text.find("(?P<", i)) != -1:
        name = text[start + 4 : text.index(">", start)]
        depth, end = 0, start
        for end in range(start, len(text)):  # bounded by the text
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                break
        out += [text[i:start], values[name]]
        i = end + 1
    out.append(text[i:])
    return "".join(out).removeprefix("^").removesuffix("$")


def url_of(found: Found, world: World) -> str:
    """The route with its converters (or regex groups) filled with the world's objects."""
    values = dict(world.values)
    if found.route.startswith("admin/r/"):  # the admin's "view on site" of a user
        values["object_id"] = str(world.users["viewer"].pk)
    elif "<path:object_id>" in found.route:
        values["object_id"] = _object_id(found.route)
    if "/dlq/" in found.route:
        values["key"] = "orders:dlq"
        values["entry_id"] = values["dlq_entry_id"]  # a dead letter's page names an entry of the DLQ
    if isinstance(found.pattern.pattern, RegexPattern):
        return "/" + _fill_regex(found.route, values)
    return "/" + _fill_converters(found.route, values)


def _fill_converters(route: str, values: dict[str, str]) -> str:
    """Replace each ``<converter:name>`` (those of enclosing ``include()`` too) by its value; ``seg``
    values are percent-encoded as the console's links encode them."""
    while (start := route.find("<")) != -1:  # each pass removes one placeholder
        end = route.index(">", start)
        tag = route[start + 1 : end]
        raw = values[tag.split(":")[-1]]
        route = route[:start] + (seg(raw) if tag.startswith("seg:") else raw) + route[end + 1 :]
    return route
