"""Single sign-on against a real OpenID provider (node's oidc-provider, tests/oidc/), driven through the
console's own views with Django's test client and through the provider with an HTTP client that keeps its
cookies as a browser does (this directory's conftest.py). Chromium walks the same flows in
tests/browser/test_oidc.py.

The audit rows of a provider's user carry its issuer and subject (a local account's name no provider),
and logging out ends the provider's session too (a local logout goes to the login page).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from django.contrib.auth.models import User
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.oidc.provider import CLIENT_ID, OidcProvider
from tests.security.sso.helpers import LOGIN_PAGE, signed_in_as, sso_login, start


def test_audit_rows_carry_the_providers_issuer_and_subject(db, sso: OidcProvider, browser) -> None:
    sso.set_user("judy", ["ops"])
    client = Client()
    sso_login(client, sso, "judy", browser)
    login = AuditEvent.objects.get(action="login.oidc")
    assert (login.outcome, login.username, login.oidc_issuer, login.oidc_subject) == ("ok", "judy", sso.issuer, "judy")
    assert login.parameters["role"] == "operator" and login.parameters["groups"] == ["ops"]
    # an action of the signed-in user: a personal API token, audited like every mutation
    assert client.post("/tokens/", {"name": "deploy"}).status_code == 200
    row = AuditEvent.objects.get(action="token.create")
    assert (row.username, row.oidc_issuer, row.oidc_subject) == ("judy", sso.issuer, "judy")
    # and where the trail is read: the JSON API and the audit page (the provider's names on hover)
    events = client.get("/api/v1/audit/").json()["events"]
    assert {(e["action"], e["oidc_issuer"], e["oidc_subject"]) for e in events} == {
        ("login.oidc", sso.issuer, "judy"), ("token.create", sso.issuer, "judy"),
    }
    page = client.get("/audit/").content.decode()
    assert f'title="judy at {sso.issuer}"' in page


def test_a_local_accounts_audit_rows_name_no_provider(db, viewer: User) -> None:
    client = Client()
    client.force_login(viewer)
    assert client.post("/tokens/", {"name": "deploy"}).status_code == 200
    row = AuditEvent.objects.get(action="token.create")
    assert (row.username, row.oidc_issuer, row.oidc_subject) == (viewer.username, "", "")
    (event,) = client.get("/api/v1/audit/").json()["events"]
    assert (event["oidc_issuer"], event["oidc_subject"]) == (None, None)


# -------------------------------------------------------------------------------------------- logout


def test_logout_ends_the_providers_session_too(db, sso: OidcProvider, browser) -> None:
    sso.set_user("kate", ["readers"])
    client = Client()
    sso_login(client, sso, "kate", browser)
    assert not sso.asks_for_password(start(Client()), browser=browser)  # the provider remembers kate
    response = client.post("/logout/")
    assert response.status_code == 302
    end = response["Location"]
    assert end.startswith(sso.issuer + "/session/end?")
    query = parse_qs(urlsplit(end).query)
    assert query["post_logout_redirect_uri"] == [LOGIN_PAGE] and query["client_id"] == [CLIENT_ID]
    assert query["id_token_hint"][0].count(".") == 2
    assert signed_in_as(client) is None
    back = sso.end_session(end, browser=browser)
    assert back.startswith(LOGIN_PAGE)
    assert sso.asks_for_password(start(Client()), browser=browser)  # a new login asks for the password


def test_a_local_logout_goes_to_the_login_page(db, sso: OidcProvider, viewer: User) -> None:
    client = Client()
    client.force_login(viewer)
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
