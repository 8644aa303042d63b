"""One real OpenID provider for the single sign-on tests of this directory (started once for all of them),
the console set to sign in with it, and an HTTP client that keeps the provider's cookies as a browser does.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.oidc.provider import OidcProvider, provider_browser
from tests.security.sso.helpers import CALLBACK, LOGIN_PAGE


@pytest.fixture(scope="package")
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
