"""API tokens open ``/api/v1/`` and ``/metrics``, nothing else, and carry what automation needs.

A token is a credential for scripts: it must not reach the Django admin, mint more tokens on ``/tokens/``
or post any HTML form (those need a session and its CSRF token), or revoking a leaked token would not shut
its holder out. A token may expire, and may be capped below its owner's role (a read-only token for a
dashboard); ``last_used_at`` shows on ``/tokens/``. Expected values come from Redis (XPENDING), from the
database rows, or from dates computed here.
"""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
import redis
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from streams_app.accounts.models import ApiToken
from streams_app.audit.models import AuditEvent
from tests.console.conftest import make_user
from tests.console.helpers import api, bearer, group_url, post_json, stream_url
from tests.console.services.helpers import orders_bus

TOKEN_SHAPE = re.compile(r"bct_[A-Za-z0-9_-]{40}")


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


@pytest.fixture
def root(db) -> User:
    return make_user("root-staff", is_staff=True, is_superuser=True)


# ------------------------------------------------------------------------- where a token works


def test_a_token_cannot_create_users_in_the_admin(root: User, api_token) -> None:
    token = api_token(root)
    response = Client().post(
        "/admin/auth/user/add/",
        {"username": "minted", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1",
         "usable_password": "true"},
        **bearer(token),
    )
    assert response.status_code in (302, 401, 403)
    assert not User.objects.filter(username="minted").exists()
    assert Client().get("/admin/auth/user/", **bearer(token)).status_code in (302, 401, 403)


def test_a_token_cannot_mint_or_revoke_tokens(operator: User, api_token) -> None:
    token = api_token(operator, "leaked")
    leaked = ApiToken.objects.get(user=operator)
    assert Client().post("/tokens/", {"name": "backdoor"}, **bearer(token)).status_code in (302, 401, 403)
    assert Client().post(f"/tokens/{leaked.pk}/revoke/", **bearer(token)).status_code in (302, 401, 403)
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["leaked"]
    assert not AuditEvent.objects.exists()


def test_a_token_does_not_open_html_pages_or_forms(operator: User, api_token, bus) -> None:
    token = api_token(operator)
    assert Client().get("/", **bearer(token)).status_code == 302  # to the login page, like anyone anonymous
    pending_before = bus.r.xpending("orders", "billing")["pending"]
    posted = Client().post(group_url("orders", "billing") + "ack/", {"ids": [bus.ids[0]]}, **bearer(token))
    assert posted.status_code in (302, 401, 403)
    assert bus.r.xpending("orders", "billing")["pending"] == pending_before


def test_a_token_works_on_the_api_and_metrics(viewer: User, api_token) -> None:
    token = api_token(viewer)
    assert Client().get(api("/connections/"), **bearer(token)).status_code == 200
    assert Client().get("/metrics", **bearer(token)).status_code == 200


# ------------------------------------------------------------------------------ role ceiling


def _ack(bus, token: str):
    return post_json(api(group_url("orders", "billing") + "ack"), {"ids": [bus.ids[0]]}, token)


def test_a_viewer_ceiling_makes_an_operators_token_read_only(operator: User, bus) -> None:
    out = io.StringIO()
    call_command("console_token", operator.username, "--role", "viewer", stdout=out, stderr=io.StringIO())
    capped = out.getvalue().strip()
    assert Client().get(stream_api_entries(), **bearer(capped)).status_code == 200
    refused = _ack(bus, capped)
    assert refused.status_code == 403
    assert "viewer" in refused.json()["error"]["message"]
    assert bus.r.xpending("orders", "billing")["pending"] == 4


def stream_api_entries() -> str:
    return api(stream_url("orders") + "entries/")


def test_a_ceiling_never_raises_a_role(viewer: User, bus) -> None:
    out = io.StringIO()
    call_command("console_token", viewer.username, "--role", "admin", stdout=out, stderr=io.StringIO())
    assert _ack(bus, out.getvalue().strip()).status_code == 403
    assert bus.r.xpending("orders", "billing")["pending"] == 4


def test_a_token_without_ceiling_acts_with_its_owners_role(operator: User, api_token, bus) -> None:
    assert _ack(bus, api_token(operator)).status_code == 200
    assert bus.r.xpending("orders", "billing")["pending"] == 3


# ------------------------------------------------------------------------------------ expiry


def test_an_expired_token_gets_a_clear_401(viewer: User) -> None:
    out = io.StringIO()
    call_command("console_token", viewer.username, "--expires-days", "1", stdout=out, stderr=io.StringIO())
    raw = out.getvalue().strip()
    assert Client().get(api("/connections/"), **bearer(raw)).status_code == 200
    ApiToken.objects.filter(user=viewer).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = Client().get(api("/connections/"), **bearer(raw))
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "token_expired"
    assert "expired" in error["message"] and "/tokens/" in error["message"]
    assert Client().get("/metrics", **bearer(raw)).status_code == 401


def test_console_token_options(operator: User) -> None:
    before = timezone.now()
    out = io.StringIO()
    call_command("console_token", operator.username, "--name", "grafana", "--expires-days", "30", "--role", "viewer",
                 stdout=out, stderr=io.StringIO())
    assert TOKEN_SHAPE.fullmatch(out.getvalue().strip())
    token = ApiToken.objects.get(user=operator)
    assert token.role_ceiling == "viewer"
    assert before + timedelta(days=30) <= token.expires_at <= timezone.now() + timedelta(days=30)
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.username) == ("token.create", "ok", operator.username)
    assert event.parameters["role"] == "viewer" and event.parameters["name"] == "grafana"


@pytest.mark.parametrize("args", [["--expires-days", "0"], ["--expires-days", "-3"], ["--role", "root"]])
def test_console_token_refuses_bad_options(operator: User, args: list[str]) -> None:
    with pytest.raises((CommandError, SystemExit)):
        call_command("console_token", operator.username, *args, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.exists()


# ------------------------------------------------------------------------------- the tokens page


def test_the_tokens_page_sets_expiry_and_ceiling_and_shows_last_use(operator: User, operator_client: Client) -> None:
    before = timezone.now()
    created = operator_client.post("/tokens/", {"name": "dashboard", "expires_days": "7", "role": "viewer"})
    assert created.status_code == 200
    raw = TOKEN_SHAPE.findall(created.content.decode())[0]
    token = ApiToken.objects.get(user=operator)
    assert token.role_ceiling == "viewer"
    assert before + timedelta(days=7) <= token.expires_at <= timezone.now() + timedelta(days=7)

    assert Client().get(api("/connections/"), **bearer(raw)).status_code == 200
    token.refresh_from_db()
    row = operator_client.get("/tokens/").content.decode().split(f'data-token="{token.pk}"', 1)[1].split("</tr>")[0]
    assert timezone.localtime(token.last_used_at).strftime("%Y-%m-%d %H:%M") in row
    assert timezone.localtime(token.expires_at).strftime("%Y-%m-%d %H:%M") in row
    assert "viewer" in row

    event = AuditEvent.objects.get(action="token.create")
    assert event.parameters["role"] == "viewer" and event.parameters["expires_at"] == token.expires_at.isoformat()


def test_the_tokens_page_refuses_a_ceiling_above_the_users_role(operator_client: Client) -> None:
    refused = operator_client.post("/tokens/", {"name": "too much", "role": "admin"})
    assert refused.status_code == 400
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("days", ["0", "-1", "100000", "soon"])
def test_the_tokens_page_refuses_bad_expiry(operator_client: Client, days: str) -> None:
    assert operator_client.post("/tokens/", {"name": "x", "expires_days": days}).status_code == 400
    assert not ApiToken.objects.exists()


def test_tokens_without_options_never_expire_and_follow_their_owner(viewer_client: Client, viewer: User) -> None:
    assert viewer_client.post("/tokens/", {"name": "plain"}).status_code == 200
    token = ApiToken.objects.get(user=viewer)
    assert token.expires_at is None and token.role_ceiling == ""
    assert json.loads(json.dumps(AuditEvent.objects.get().parameters))["expires_at"] is None
