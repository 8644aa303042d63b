"""Single sign-on in headless Chromium against a real OpenID provider (node's oidc-provider, tests/oidc/)
on a free port: the login page's button, the provider's own login form, and back; the role from the
provider's groups; a group change taking effect at the next login, with the open tail of the older session
closing and reconnecting under the new role; a forged or expired ID token refused on the page; logout
ending the provider's session too, so that the next sign-in asks for the password again.

The console's CSP is production's with a provider configured: form-action lets the login and logout
posts redirect to the provider's origin (busconsole/settings.py does the same from BUSCONSOLE_OIDC_ISSUER;
tests/security/test_oidc_settings.py checks that header). Without it Chromium stops both posts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
import redis
from django.contrib.auth.models import User
from playwright.sync_api import expect

from tests.oidc.provider import NAME, PASSWORD, OidcProvider
from tests.polling import wait_for

pytestmark = pytest.mark.browser


@pytest.fixture
def provider(asgi_server) -> Iterator[OidcProvider]:
    server = OidcProvider(
        redirect_uris=[f"{asgi_server.url}/oidc/callback/"], post_logout_redirect_uris=[f"{asgi_server.url}/login/"]
    ).start()
    yield server
    server.stop()


@pytest.fixture
def sso(settings, provider: OidcProvider) -> OidcProvider:
    settings.BUSCONSOLE_OIDC = provider.settings()
    policy = copy.deepcopy(settings.CONTENT_SECURITY_POLICY)
    policy["DIRECTIVES"]["form-action"] = ["'self'", provider.issuer]
    settings.CONTENT_SECURITY_POLICY = policy
    return provider


def sign_in(page, provider: OidcProvider, login: str, *, password: str = PASSWORD) -> None:
    """The login page's button, then the provider's form: as a person signs in."""
    page.goto("/login/")
    page.get_by_role("button", name=f"Sign in with {NAME}").click()
    page.wait_for_url(f"{provider.issuer}/interaction/**")
    page.fill("input[name=username]", login)
    page.fill("input[name=password]", password)
    page.get_by_role("button", name="Sign in").click()


def test_signing_in_gives_the_role_the_groups_map_to(page, asgi_server, sso: OidcProvider) -> None:
    sso.set_user("alice", ["ops-admins"])
    sign_in(page, sso, "alice")
    page.wait_for_url(f"{asgi_server.url}/")
    expect(page.locator(".who-name")).to_have_text("alice")
    expect(page.locator(".who .role")).to_have_text("admin")
    page.goto("/alerts/rules/new/")  # an admin's page
    expect(page.locator("h1")).to_contain_text("rule")


def test_a_group_change_takes_effect_at_the_next_login_and_closes_the_older_sessions_tail(
    browser, page, asgi_server, sso: OidcProvider, r: redis.Redis
) -> None:
    r.xadd(b"orders", {"n": "1"})
    sso.set_user("bob", ["ops-admins"])
    sign_in(page, sso, "bob")
    page.wait_for_url(f"{asgi_server.url}/")
    expect(page.locator(".who .role")).to_have_text("admin")
    sockets = []
    page.on("websocket", lambda ws: sockets.append(ws) if "/tail" in ws.url else None)
    page.goto("/c/default/streams/orders/tail/")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    assert len(sockets) == 1 and not sockets[0].is_closed()

    sso.set_user("bob", ["oncall"])  # out of the admin group at the provider
    other = browser.new_context(base_url=asgi_server.url)
    try:
        second = other.new_page()
        sign_in(second, sso, "bob")  # a new browser: the provider asks for the password
        second.wait_for_url(f"{asgi_server.url}/")
        expect(second.locator(".who .role")).to_have_text("operator")
    finally:
        other.close()
    assert list(User.objects.get(username="bob").groups.values_list("name", flat=True)) == ["operator"]

    def reconnected() -> bool:  # page.evaluate lets Playwright hand over the page's websocket events
        return page.evaluate("1") == 1 and sockets[0].is_closed() and len(sockets) >= 2

    # the first browser's tail closed (4403: its role changed) and the page reconnected under the new role
    wait_for(reconnected, what="the older session's tail to close and reconnect")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    assert not sockets[-1].is_closed()
    page.goto("/")
    expect(page.locator(".who .role")).to_have_text("operator")


@pytest.mark.parametrize(
    ("mode", "reason"),
    [("expired", "it has expired"), ("tampered", "its signature does not match the provider's published keys")],
)
def test_a_forged_or_expired_id_token_is_refused_on_the_page(page, asgi_server, sso: OidcProvider, mode, reason) -> None:
    sso.set_user("mallory", ["ops-admins"])
    sso.set_id_token(mode)
    answers = []
    page.on("response", lambda response: answers.append(response.status) if "/oidc/callback/" in response.url else None)
    sign_in(page, sso, "mallory")
    page.wait_for_url(f"{asgi_server.url}/oidc/callback/**")
    expect(page.locator("#sso-error")).to_have_text(f"{NAME}'s ID token was refused: {reason}. You are not signed in.")
    assert answers == [403]
    page.goto("/")
    page.wait_for_url(f"{asgi_server.url}/login/?next=/")  # no session


def test_logout_ends_the_providers_session_and_the_next_sign_in_asks_for_the_password(
    page, asgi_server, sso: OidcProvider
) -> None:
    sso.set_user("kate", ["readers"])
    sign_in(page, sso, "kate")
    page.wait_for_url(f"{asgi_server.url}/")
    expect(page.locator(".who .role")).to_have_text("viewer")
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(f"{sso.issuer}/session/end**")  # the provider asks to confirm
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{asgi_server.url}/login/**")
    expect(page.get_by_role("button", name=f"Sign in with {NAME}")).to_be_visible()
    page.get_by_role("button", name=f"Sign in with {NAME}").click()
    page.wait_for_url(f"{sso.issuer}/interaction/**")
    expect(page.locator("input[name=password]")).to_be_visible()  # the password again
