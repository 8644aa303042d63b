"""Steps of a single sign-on through the console's views: the login button's post, the whole sign-in, and
who is signed in afterwards.
"""

from __future__ import annotations

import httpx
from django.contrib.auth.models import User
from django.test import Client

from tests.oidc.provider import OidcProvider, path_of

CALLBACK = "http://testserver/oidc/callback/"
LOGIN_PAGE = "http://testserver/login/"


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
