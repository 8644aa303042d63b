"""Single sign-on against a real OpenID provider (node's oidc-provider, tests/oidc/), driven through the
console's own views with Django's test client and through the provider with an HTTP client that keeps its
cookies as a browser does (this directory's conftest.py). Chromium walks the same flows in
tests/browser/test_oidc.py.

The authorization request (PKCE S256, nonce, state, scopes: the provider refuses a login without
PKCE), the account made at the first login with the role its groups map to, the role set again at every
login (down as well as up; no role at all deactivates), one account for two first logins at once, and
groups read from the ID token. Expected roles come from the ROLES string written in tests/oidc/provider.py,
read by eye, not from the mapping code.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from streams_app.accounts.models import OidcIdentity
from streams_app.accounts.oidc import OidcLogin
from streams_app.accounts.oidc_users import oidc_user_sync
from streams_app.audit.models import AuditEvent
from tests.oidc.provider import CLIENT_ID, OidcProvider, provider_browser
from tests.security.sso.helpers import CALLBACK, LOGIN_PAGE, role_groups, signed_in_as, sso_login, start
from tests.security.test_sockets import run, tail_closes_after


def test_the_authorization_request_uses_pkce_a_nonce_and_the_configured_scopes(db, sso: OidcProvider) -> None:
    url = start(Client())
    assert url.startswith(sso.issuer + "/auth?")  # the authorization endpoint, found by discovery
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query["response_type"] == "code"
    assert query["client_id"] == CLIENT_ID
    assert query["redirect_uri"] == CALLBACK
    assert query["scope"].split() == ["openid", "email", "profile", "groups"]
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43  # base64url of a SHA-256 digest
    assert len(query["state"]) >= 20 and len(query["nonce"]) >= 20


def test_a_first_login_makes_an_account_with_the_role_its_groups_give(db, sso: OidcProvider, browser) -> None:
    sso.set_user("alice", ["ops", "staff"])
    client = Client()
    response = sso_login(client, sso, "alice", browser, next_url="/jobs/")
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    assert signed_in_as(client) == "alice"
    assert role_groups("alice") == ["operator"]  # ops -> operator
    user = User.objects.get(username="alice")
    assert user.email == "alice@example.test" and not user.has_usable_password()
    identity = OidcIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject, identity.groups) == (sso.issuer, "alice", ["ops", "staff"])


def test_a_next_address_off_the_console_is_not_followed(db, sso: OidcProvider, browser) -> None:
    sso.set_user("nadia", ["readers"])
    response = sso_login(Client(), sso, "nadia", browser, next_url="https://evil.example/")
    assert response.status_code == 302 and response["Location"] == "/"


def test_the_role_is_set_again_at_every_login(db, sso: OidcProvider, browser) -> None:
    sso.set_user("bob", ["ops-admins", "ops"])
    admin = Client()
    sso_login(admin, sso, "bob", browser)
    assert role_groups("bob") == ["admin"]  # the highest rule wins
    assert admin.get("/alerts/rules/new/").status_code == 200  # an admin's page
    sso.set_user("bob", ["oncall"])  # removed from the admin group at the provider
    client = Client()
    response = sso_login(client, sso, "bob", browser)  # the provider's session: no password asked
    assert response.status_code == 302
    assert role_groups("bob") == ["operator"]
    assert client.get("/alerts/rules/new/").status_code == 403
    assert admin.get("/alerts/rules/new/").status_code == 403  # the older session is demoted too
    sso.set_user("bob", ["readers"])
    sso_login(Client(), sso, "bob", browser)
    assert role_groups("bob") == ["viewer"]
    sso.set_user("bob", ["ops-admins"])
    sso_login(Client(), sso, "bob", browser)
    assert role_groups("bob") == ["admin"]


@pytest.mark.slow
def test_an_open_tail_closes_when_a_new_login_takes_the_role_away(asgi_server, sso: OidcProvider, browser, r) -> None:
    """The sockets of a user demoted by the provider close at the next login (4403: the page reconnects
    under the new role), as they do when an admin changes the user's groups (tests/security/test_sockets.py)."""
    r.xadd(b"orders", {"n": "1"})
    sso.set_user("olga", ["ops-admins"])
    first = Client()
    sso_login(first, sso, "olga", browser)
    cookies = {settings.SESSION_COOKIE_NAME: first.cookies[settings.SESSION_COOKIE_NAME].value}
    sso.set_user("olga", ["readers"])

    def login_again() -> None:
        sso_login(Client(), sso, "olga", browser)

    assert run(tail_closes_after(asgi_server, cookies, b"orders", login_again)) == 4403
    assert role_groups("olga") == ["viewer"]


def test_the_providers_groups_are_the_only_source_of_an_sso_accounts_role(db, sso: OidcProvider, browser) -> None:
    sso.set_user("carol", ["readers"])
    sso_login(Client(), sso, "carol", browser)
    User.objects.filter(username="carol").update(is_superuser=True, is_staff=True)  # granted by hand
    sso_login(Client(), sso, "carol", browser)
    user = User.objects.get(username="carol")
    assert (user.is_superuser, user.is_staff, role_groups("carol")) == (False, False, ["viewer"])


def test_groups_that_map_to_no_role_refuse_the_login_and_deactivate_the_account(db, sso: OidcProvider, browser) -> None:
    sso.set_user("dave", ["ops"])
    first = Client()
    sso_login(first, sso, "dave", browser)
    assert signed_in_as(first) == "dave"
    sso.set_user("dave", ["marketing"])
    client = Client()
    response = sso_login(client, sso, "dave", browser)
    assert response.status_code == 403
    assert b"none of your groups (marketing) gives a role on this console" in response.content
    assert signed_in_as(client) is None
    assert not User.objects.get(username="dave").is_active
    assert signed_in_as(first) is None  # the session opened before ends too
    sso.set_user("dave", ["readers"])
    again = Client()
    sso_login(again, sso, "dave", browser)
    assert signed_in_as(again) == "dave" and role_groups("dave") == ["viewer"]


def test_no_account_is_made_for_someone_without_a_role(db, sso: OidcProvider, browser) -> None:
    sso.set_user("erin", ["marketing"])
    response = sso_login(Client(), sso, "erin", browser)
    assert response.status_code == 403
    assert not User.objects.filter(username__startswith="erin").exists()
    row = AuditEvent.objects.get(action="login.oidc")
    assert (row.outcome, row.username, row.oidc_issuer, row.oidc_subject) == ("denied", "", sso.issuer, "erin")


def test_a_provider_user_never_takes_over_a_local_account_of_the_same_name(db, sso: OidcProvider, browser) -> None:
    local = User.objects.create_user("frank", password="local-password-9")
    sso.set_user("frank", ["ops-admins"])
    client = Client()
    sso_login(client, sso, "frank", browser)
    identity = OidcIdentity.objects.get(subject="frank")
    assert identity.user_id != local.pk
    assert identity.user.username.startswith("frank-")
    assert signed_in_as(client) == identity.user.username
    assert role_groups("frank") == []


def test_two_first_logins_at_once_make_one_account(transactional_db, provider: OidcProvider) -> None:
    """Two tabs signing in for the first time together: one account, one identity, both logins on it.
    (SQLite serializes the two; on PostgreSQL, make test-postgres, the second breaks the unique constraint
    and tries again.)"""
    login = OidcLogin(issuer=provider.issuer, subject="twin", claims={"preferred_username": "twin"},
                      groups=("ops",), id_token="")
    barrier, results, errors = threading.Barrier(2), [], []

    def sign_in() -> None:
        try:
            barrier.wait()
            results.append(oidc_user_sync(login=login, config=provider.settings()).user.pk)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_in) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert len(results) == 2 and results[0] == results[1]
    assert OidcIdentity.objects.filter(subject="twin").count() == 1
    assert User.objects.filter(username__startswith="twin").count() == 1


def test_groups_read_from_the_id_token_when_the_provider_puts_them_there(db, settings) -> None:
    """Some providers (Okta, Azure AD) put groups in the ID token, not the userinfo answer."""
    server = OidcProvider(redirect_uris=[CALLBACK], post_logout_redirect_uris=[LOGIN_PAGE], claims_in_id_token=True)
    server.start()
    try:
        settings.BUSCONSOLE_OIDC = server.settings()
        server.set_user("gina", ["ops-admins"])
        with provider_browser() as browser:
            sso_login(Client(), server, "gina", browser)
        assert role_groups("gina") == ["admin"]
    finally:
        server.stop()
