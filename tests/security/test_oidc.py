"""Single sign-on against a real OpenID provider (node's oidc-provider, tests/oidc/), driven through the
console's own views with Django's test client and through the provider with an HTTP client that keeps its
cookies as a browser does. Chromium walks the same flows in tests/browser/test_oidc.py.

What is checked: the authorization request (PKCE S256, nonce, state, scopes: the provider refuses a login
without PKCE), the account made at the first login with the role its groups map to, the role set again at
every login (down as well as up; no role at all deactivates), each forged or broken ID token refused with
its reason and no session, the provider's answers that are not a sign-in, the audit rows' issuer and
subject, and logout ending the provider's session. Expected roles come from the ROLES string written in
tests/oidc/provider.py, read by eye, not from the mapping code.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from streams_app.accounts.models import OidcIdentity
from streams_app.accounts.oidc import OidcLogin
from streams_app.accounts.oidc_users import oidc_user_sync
from streams_app.audit.models import AuditEvent
from tests.oidc.provider import CLIENT_ID, NAME, OidcProvider, path_of, provider_browser
from tests.security.test_sockets import run, tail_closes_after

CALLBACK = "http://testserver/oidc/callback/"
LOGIN_PAGE = "http://testserver/login/"


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    server = OidcProvider(redirect_uris=[CALLBACK], post_logout_redirect_uris=[LOGIN_PAGE]).start()
    yield server
    server.stop()


@pytest.fixture
def sso(settings, provider: OidcProvider) -> OidcProvider:
    """The console signing in with ``provider``; every ID token valid until the test says otherwise."""
    provider.set_id_token("valid")
    settings.BUSCONSOLE_OIDC = provider.settings()
    return provider


@pytest.fixture
def browser() -> Iterator[httpx.Client]:
    with provider_browser() as client:
        yield client


def start(client: Client, next_url: str = "") -> str:
    response = client.post("/oidc/login/", {"next": next_url} if next_url else {})
    assert response.status_code == 302, response.content[:500]
    return response["Location"]


def sso_login(client: Client, provider: OidcProvider, login: str, browser: httpx.Client, next_url: str = ""):
    """The whole sign-in: the console's button, the provider's login, the console's callback."""
    back = provider.sign_in(start(client, next_url), login, browser=browser)
    assert back.startswith(CALLBACK), back
    return client.get(path_of(back))


def role_groups(username: str) -> list[str]:
    return sorted(User.objects.get(username=username).groups.values_list("name", flat=True))


def signed_in_as(client: Client) -> str | None:
    """Who the overview says is signed in (None: sent to the login page)."""
    response = client.get("/")
    if response.status_code == 302:
        return None
    assert response.status_code == 200
    return response.wsgi_request.user.get_username()


# ------------------------------------------------------------------------------ the request and a login


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


# --------------------------------------------------------------------------- ID tokens that are refused

REFUSALS = {
    "tampered": "its signature does not match the provider's published keys",
    "other_key": "its signature does not match the provider's published keys",
    "expired": "it has expired",
    "wrong_audience": "it was issued to another client",
    "wrong_issuer": "it was issued by another issuer",
    "wrong_nonce": "it answers another sign-in (nonce mismatch)",
    "alg_none": "it is signed with an algorithm the provider does not publish",
}


@pytest.mark.parametrize("mode", sorted(REFUSALS))
def test_a_forged_or_broken_id_token_is_refused_with_its_reason(db, sso: OidcProvider, browser, mode: str) -> None:
    sso.set_user("mallory", ["ops-admins"])
    sso.set_id_token(mode)
    client = Client()
    response = sso_login(client, sso, "mallory", browser)
    assert response.status_code == 403
    text = response.content.decode()
    assert f"{NAME}&#x27;s ID token was refused: {REFUSALS[mode]}".replace("'", "&#x27;") in text
    assert "Sign in with Test IdP" in text  # the login page again, to try once more
    assert signed_in_as(client) is None
    assert not User.objects.filter(username__startswith="mallory").exists()
    assert not AuditEvent.objects.filter(action="login.oidc").exists()


def test_a_client_secret_the_provider_does_not_know_is_refused_with_its_answer(db, settings, sso, browser) -> None:
    settings.BUSCONSOLE_OIDC = sso.settings(client_secret="not-the-secret")
    sso.set_user("nick", ["readers"])
    client = Client()
    response = sso_login(client, sso, "nick", browser)
    assert response.status_code == 403
    assert b"Test IdP refused to complete the sign-in: client authentication failed" in response.content
    assert signed_in_as(client) is None


def test_a_callback_is_used_once(db, sso: OidcProvider, browser) -> None:
    sso.set_user("henry", ["readers"])
    client = Client()
    back = sso.sign_in(start(client), "henry", browser=browser)
    assert client.get(path_of(back)).status_code == 302
    client.logout()
    replay = client.get(path_of(back))
    assert replay.status_code == 400
    assert b"was not started in this browser, or was already used" in replay.content


def test_a_callback_from_another_browser_is_refused(db, sso: OidcProvider, browser) -> None:
    """Login CSRF: a code the attacker obtained, sent to the victim's browser, whose session never started it."""
    sso.set_user("ivan", ["ops-admins"])
    back = sso.sign_in(start(Client()), "ivan", browser=browser)
    victim = Client()
    response = victim.get(path_of(back))
    assert response.status_code == 400
    assert signed_in_as(victim) is None


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("", 400, b"came without its answer"),
        ("?error=access_denied&error_description=User+cancelled", 403, b"did not sign you in: User cancelled."),
        ("?code=x&state=y&iss=https%3A%2F%2Fother.example", 400, b"not from Test IdP: it is refused"),
        ("?code=x&state=unknown&iss=ISSUER", 400, b"was not started in this browser"),
        # the provider says it names itself in every answer (RFC 9207): one without its name is refused
        ("?code=x&state=unknown", 400, b"does not say it comes from Test IdP: it is refused"),
    ],
)
def test_callbacks_that_are_not_a_sign_in(db, sso: OidcProvider, query: str, status: int, says: bytes) -> None:
    response = Client().get("/oidc/callback/" + query.replace("ISSUER", sso.issuer))
    assert response.status_code == status
    assert says in response.content


def test_a_provider_that_cannot_be_reached_is_a_503_that_says_so(db, settings, provider: OidcProvider) -> None:
    from tests.servers import free_port

    settings.BUSCONSOLE_OIDC = provider.settings(issuer=f"http://127.0.0.1:{free_port()}")
    response = Client().post("/oidc/login/")
    assert response.status_code == 503
    assert b"Test IdP cannot be reached to sign you in" in response.content


def test_a_discovery_document_naming_another_issuer_is_refused(db, settings, provider: OidcProvider) -> None:
    """Same server, asked under another name: its document says 127.0.0.1, the setting says localhost."""
    settings.BUSCONSOLE_OIDC = provider.settings(issuer=f"http://localhost:{provider.port}")
    response = Client().post("/oidc/login/")
    assert response.status_code == 503
    said = f"describes itself as &#x27;{provider.issuer}&#x27;, not the configured &#x27;http://localhost:{provider.port}&#x27;"
    assert said.encode() in response.content
    assert b"sign-in is refused until BUSCONSOLE_OIDC_ISSUER matches it exactly" in response.content


def test_without_an_issuer_the_sso_routes_say_it_is_not_configured(db, settings) -> None:
    settings.BUSCONSOLE_OIDC = None
    assert Client().post("/oidc/login/").status_code == 404
    response = Client().get("/oidc/callback/?code=x&state=y")
    assert response.status_code == 404 and b"Single sign-on is not configured" in response.content
    assert b"Sign in with" not in Client().get("/login/").content


# ---------------------------------------------------------------------------------------- audit rows


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
