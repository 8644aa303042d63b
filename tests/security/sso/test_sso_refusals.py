"""Single sign-on against a real OpenID provider (node's oidc-provider, tests/oidc/), driven through the
console's own views with Django's test client and through the provider with an HTTP client that keeps its
cookies as a browser does (this directory's conftest.py). Chromium walks the same flows in
tests/browser/test_oidc.py.

Each forged or broken ID token is refused with its reason and no session; so are a client secret the
provider does not know, a callback used twice or from another browser, the provider's answers that are
not a sign-in, an unreachable provider (a 503 that says so) and a discovery document naming another
issuer; without an issuer the sign-on routes say it is not configured.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.oidc.provider import NAME, OidcProvider, path_of
from tests.security.sso.helpers import signed_in_as, sso_login, start

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
