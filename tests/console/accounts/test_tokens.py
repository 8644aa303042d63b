"""Personal API tokens: creation, bearer lookup, the console_token command, the token admin and the tokens page.

A raw token is checked against its shape and its SHA-256 digest computed here; whether a token works is
decided by calling the API with it. The page shows a new token once, never again, lets its owner (and
nobody else) revoke it, and each create or revoke leaves one audit row.
"""

from __future__ import annotations

import hashlib
import io
import re
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from streams_app.accounts.models import ApiToken
from streams_app.accounts.tokens import token_create, user_for_bearer
from streams_app.audit.models import AuditEvent
from tests.console.helpers import bearer, stream_url

TOKEN_SHAPE = re.compile(r"bct_[A-Za-z0-9_-]{40}")


# ---------------------------------------------------------- tokens, bearer lookup, command, admin


def test_token_create_returns_raw_token_once_and_stores_only_its_digest(operator: User) -> None:
    token, raw = token_create(user=operator, name="deploy script")

    assert TOKEN_SHAPE.fullmatch(raw)
    token.refresh_from_db()
    assert token.user == operator
    assert token.name == "deploy script"
    assert token.prefix == raw[:8]
    assert token.digest == hashlib.sha256(raw.encode()).hexdigest()
    assert token.last_used_at is None
    stored = [str(value) for value in ApiToken.objects.values_list().get(pk=token.pk)]
    assert raw not in stored


def test_tokens_are_distinct(operator: User) -> None:
    raws = {token_create(user=operator, name=f"t{i}")[1] for i in range(5)}
    assert len(raws) == 5


def test_bearer_header_finds_the_tokens_owner(operator: User, viewer: User, api_token) -> None:
    mine, theirs = api_token(operator), api_token(viewer)

    assert user_for_bearer(f"Bearer {mine}") == operator
    assert user_for_bearer(f"Bearer {theirs}") == viewer
    # The scheme is case-insensitive (RFC 9110) and surrounding whitespace is tolerated.
    assert user_for_bearer(f"bearer {mine}") == operator
    assert user_for_bearer(f"  BEARER   {mine}  ") == operator


@pytest.mark.parametrize(
    "header",
    [
        "",
        "Bearer",
        "Bearer ",
        "Basic dXNlcjpwYXNz",
        "Token {raw}",
        "{raw}",
        "Bearer {raw} extra",
        "Bearer {raw}x",
        "Bearer {raw_short}",
        "Bearer {raw_upper}",
        "Bearer bct_" + "!" * 40,
    ],
)
def test_malformed_headers_are_refused(operator: User, api_token, header: str) -> None:
    raw = api_token(operator)
    value = header.format(raw=raw, raw_short=raw[:-1], raw_upper=raw.upper())
    assert user_for_bearer(value) is None


def test_unknown_and_revoked_tokens_are_refused(operator: User, api_token) -> None:
    never_issued = "bct_" + "A" * 40
    assert user_for_bearer(f"Bearer {never_issued}") is None

    raw = api_token(operator)
    ApiToken.objects.filter(user=operator).delete()
    assert user_for_bearer(f"Bearer {raw}") is None


def test_tokens_of_inactive_users_are_refused(operator: User, outsider: User, api_token) -> None:
    raw = api_token(operator)
    operator.is_active = False
    operator.save()
    assert user_for_bearer(f"Bearer {raw}") is None
    assert user_for_bearer(f"Bearer {api_token(outsider)}") is None


def test_last_used_at_is_written_at_most_once_a_minute(operator: User) -> None:
    token, raw = token_create(user=operator, name="busy script")

    before = timezone.now()
    user_for_bearer(f"Bearer {raw}")
    token.refresh_from_db()
    assert token.last_used_at is not None and token.last_used_at >= before
    first_use = token.last_used_at

    user_for_bearer(f"Bearer {raw}")
    token.refresh_from_db()
    assert token.last_used_at == first_use

    stale = timezone.now() - timedelta(seconds=61)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    user_for_bearer(f"Bearer {raw}")
    token.refresh_from_db()
    assert token.last_used_at > stale + timedelta(seconds=60)


def test_console_token_command_prints_only_a_working_token(operator: User) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command("console_token", operator.username, "--name", "ci", stdout=out, stderr=err)

    raw = out.getvalue().strip()
    assert out.getvalue() == raw + "\n"  # one line: `TOKEN=$(manage.py console_token ...)` just works
    assert TOKEN_SHAPE.fullmatch(raw)
    assert user_for_bearer(f"Bearer {raw}") == operator
    assert ApiToken.objects.get(user=operator).name == "ci"
    assert raw not in err.getvalue()
    assert "cannot be shown again" in err.getvalue()


def test_console_token_command_names_tokens_cli_by_default(viewer: User) -> None:
    call_command("console_token", viewer.username, stdout=io.StringIO(), stderr=io.StringIO())
    assert ApiToken.objects.get(user=viewer).name == "cli"


def test_console_token_command_refuses_unknown_users(db) -> None:
    with pytest.raises(CommandError, match="No user named 'nobody'"):
        call_command("console_token", "nobody", stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.exists()


def test_console_token_command_refuses_inactive_users(outsider: User) -> None:
    with pytest.raises(CommandError, match="inactive"):
        call_command("console_token", outsider.username, stdout=io.StringIO(), stderr=io.StringIO())
    assert not ApiToken.objects.exists()


def test_token_admin_lists_and_revokes_but_never_shows_the_digest(rf, db) -> None:
    token_admin = admin.site._registry[ApiToken]
    request = rf.get("/")
    request.user = User.objects.create_superuser("root", password="x")

    assert "digest" not in token_admin.get_list_display(request)
    assert "digest" not in token_admin.get_fields(request)
    assert not token_admin.has_add_permission(request)
    assert not token_admin.has_change_permission(request)
    assert token_admin.has_delete_permission(request)


# ------------------------------------------------------------------------------------ tokens page


def _raw_token(body: str) -> str:
    found = TOKEN_SHAPE.findall(body)
    assert len(found) == 1, found
    return found[0]


def test_token_page_creates_shows_once_works_and_revokes(operator: User, operator_client: Client) -> None:
    assert operator_client.get("/tokens/").status_code == 200
    created = operator_client.post("/tokens/", {"name": "deploy script"})
    assert created.status_code == 200
    assert "no-store" in created["Cache-Control"]
    raw = _raw_token(created.content.decode())
    token = ApiToken.objects.get(user=operator)
    assert (token.name, token.prefix) == ("deploy script", raw[:8])

    again = operator_client.get("/tokens/").content.decode()
    assert raw not in again and TOKEN_SHAPE.search(again) is None  # never shown again
    assert "deploy script" in again and f"{raw[:8]}…" in again

    works = Client().get("/api/v1/connections/", **bearer(raw))
    assert works.status_code == 200
    assert "connections" in works.json()
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None
    assert "never" not in operator_client.get("/tokens/").content.decode().split("deploy script", 1)[1].split("</tr>")[0]

    revoked = operator_client.post(f"/tokens/{token.pk}/revoke/", follow=True)
    assert "Revoked the token deploy script" in revoked.content.decode()
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    assert Client().get("/api/v1/connections/", **bearer(raw)).status_code == 401

    rows = list(AuditEvent.objects.order_by("pk").values_list("action", "outcome", "username", "parameters"))
    assert rows == [
        ("token.create", "ok", operator.username,
         {"name": "deploy script", "role": "", "expires_at": None, "token_id": token.pk, "prefix": raw[:8]}),
        ("token.revoke", "ok", operator.username, {"token_id": token.pk, "name": "deploy script", "prefix": raw[:8]}),
    ]


def test_a_user_cannot_see_or_revoke_another_users_token(operator: User, viewer_client: Client, api_token) -> None:
    raw = api_token(operator, "operator's own")
    theirs = ApiToken.objects.get(user=operator)
    assert "operator&#x27;s own" not in viewer_client.get("/tokens/").content.decode()
    assert viewer_client.post(f"/tokens/{theirs.pk}/revoke/").status_code == 404
    assert ApiToken.objects.filter(pk=theirs.pk).exists()
    assert Client().get("/api/v1/connections/", **bearer(raw)).status_code == 200
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("token.revoke", "error")


def test_token_page_needs_login_post_and_csrf(client: Client, viewer: User, db) -> None:
    assert client.get("/tokens/").status_code == 302
    assert client.post("/tokens/", {"name": "x"}).status_code == 302
    web = Client(enforce_csrf_checks=True)
    web.force_login(viewer)
    assert web.post("/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()
    logged_in = Client()
    logged_in.force_login(viewer)
    token = ApiToken.objects.create(user=viewer, name="t", prefix="bct_abcd", digest="0" * 64)
    assert logged_in.get(f"/tokens/{token.pk}/revoke/").status_code == 405
    assert logged_in.post("/tokens/", {"name": ""}).status_code == 400
    assert ApiToken.objects.count() == 1


def test_tokens_work_in_read_only_mode_and_admins_see_the_admin_note(settings, admin_client_, viewer_client) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    assert 'id="admin-note"' in admin_client_.get("/tokens/").content.decode()
    assert 'id="admin-note"' not in viewer_client.get("/tokens/").content.decode()
    created = viewer_client.post("/tokens/", {"name": "read-only scripts"})
    assert created.status_code == 200
    assert Client().get("/api/v1/connections/", **bearer(_raw_token(created.content.decode()))).status_code == 200


def test_nav_links_the_tokens_page(viewer_client, bus) -> None:
    assert 'href="/tokens/"' in viewer_client.get(stream_url("orders")).content.decode()
