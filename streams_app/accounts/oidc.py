"""Single sign-on with an OpenID provider: the authorization code flow with PKCE, the ID token's checks,
and RP-initiated logout (docs/api.md#authentication).

The protocol is Authlib's (``authlib.integrations.django_client``), chosen over the other two well-kept
Django options for what decides here:

- PKCE is one client option (``code_challenge_method="S256"``), the verifier kept with the state in the
  session; a nonce is made for every ``openid`` login and checked by the ID token's validation;
- the ID token is checked by its JOSE layer (joserfc, same maintainer): signature against the keys of
  the provider's JWKS (fetched again once on an unknown key id, so key rotation works), issuer, expiry,
  nonce, ``azp`` and ``at_hash``; the audience as a claims option (below);
- discovery from ``<issuer>/.well-known/openid-configuration``, and ``logout_redirect`` for the
  ``end_session_endpoint`` of RP-initiated logout;
- it is released every few weeks and ships nothing but the protocol.

mozilla-django-oidc has no discovery (each endpoint is a setting) and no check of the ID token's
audience or expiry of its own; django-allauth brings its own accounts, signup and e-mail flows, models and
templates, much more than one button on the login page needs.

What this module adds to Authlib, each a check the specifications ask of a client that Authlib leaves to
it: the discovery document must name the configured issuer (OpenID Connect Discovery 4.3) and so must
the authorization response's ``iss`` (RFC 9207, against mix-up attacks: required when the provider says
it sends one);
the audience must hold the client id (Authlib alone would accept another audience with a matching
``azp``); the token response must carry an ID token (Authlib returns without one); ``none`` is never an
accepted signature algorithm, whatever the discovery document lists. Every failure is an
:class:`OidcError` whose message is for the person signing in, with the HTTP status the page answers.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import requests
from authlib.integrations.base_client import MismatchingStateError, OAuthError
from authlib.integrations.django_client import OAuth
from joserfc import errors as jose_errors

from streams_app.accounts.oidc_config import OidcSettings, groups_from_claims

if TYPE_CHECKING:
    from authlib.integrations.django_client import DjangoOAuth2App
    from django.http import HttpRequest, HttpResponse

log = logging.getLogger(__name__)

#: Seconds of clock difference tolerated on the ID token's times (exp, iat, nbf) against the provider's.
CLOCK_LEEWAY_S = 60
#: Seconds any one request to the provider may take: a provider that hangs must not hold a web worker.
PROVIDER_TIMEOUT_S = 10
#: How long the discovery document is kept before it is read again (endpoints and keys can move).
METADATA_TTL_S = 3600

_CLAIM_REASONS = {
    "iss": "it was issued by another issuer",
    "aud": "it was issued to another client (audience)",
    "azp": "it was issued to another client (azp)",
    "nonce": "it answers another sign-in (nonce mismatch)",
    "at_hash": "it does not belong to the access token that came with it (at_hash)",
    "iat": "it says it was issued in the future",
    "nbf": "it is not valid yet",
}


class OidcError(Exception):
    """A sign-in that cannot complete: ``message`` is shown on the login page, answered with ``status``."""

    def __init__(self, message: str, *, status: int = 403) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class OidcLogin:
    """Who the provider signed in, from an ID token that passed every check (claims merged with userinfo)."""

    issuer: str
    subject: str
    claims: dict[str, Any]
    groups: tuple[str, ...]
    id_token: str


@functools.lru_cache(maxsize=8)
def oidc_client(config: OidcSettings) -> DjangoOAuth2App:
    """The Authlib client for ``config``, made on first use (never at import) and kept with its metadata."""
    client_kwargs = {
        "scope": " ".join(config.scopes),
        "code_challenge_method": "S256",
        "token_endpoint_auth_method": "client_secret_basic" if config.client_secret else "none",
        "default_timeout": PROVIDER_TIMEOUT_S,
    }
    return OAuth().register(
        name="oidc",
        client_id=config.client_id,
        client_secret=config.client_secret or None,
        server_metadata_url=config.issuer.rstrip("/") + "/.well-known/openid-configuration",
        client_kwargs=client_kwargs,
    )


def _metadata(app: DjangoOAuth2App, config: OidcSettings) -> dict[str, Any]:
    """The provider's discovery document, checked, read again once it is METADATA_TTL_S old."""
    loaded = app.server_metadata.get("_loaded_at")
    if loaded is not None and time.time() - loaded > METADATA_TTL_S:
        app.server_metadata.clear()
    try:
        metadata = app.load_server_metadata()
    except (requests.RequestException, ValueError) as exc:
        app.server_metadata.clear()
        log.warning("OpenID discovery at %s failed: %s", config.issuer, exc)
        raise OidcError(
            f"{config.display_name} cannot be reached to sign you in ({type(exc).__name__}); try again shortly.",
            status=503,
        ) from None
    if (named := metadata.get("issuer")) != config.issuer:
        app.server_metadata.clear()  # the same dict as ``metadata``: asked again next time
        log.error("OpenID discovery at %s names the issuer %r", config.issuer, named)
        raise OidcError(
            f"{config.display_name} describes itself as {named!r}, not the configured "
            f"{config.issuer!r}: sign-in is refused until BUSCONSOLE_OIDC_ISSUER matches it exactly.",
            status=503,
        )
    algorithms = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
    metadata["id_token_signing_alg_values_supported"] = [a for a in algorithms if a.lower() != "none"]
    return metadata


def oidc_authorize_redirect(request: HttpRequest, config: OidcSettings, *, redirect_uri: str) -> HttpResponse:
    """The redirect to the provider's authorization endpoint; state, nonce and PKCE verifier in the session."""
    app = oidc_client(config)
    _metadata(app, config)
    try:
        return app.authorize_redirect(request, redirect_uri)
    except (requests.RequestException, ValueError, RuntimeError) as exc:
        raise OidcError(f"{config.display_name} cannot be reached to sign you in ({exc}).", status=503) from None


def oidc_login_complete(request: HttpRequest, config: OidcSettings) -> OidcLogin:
    """Check the provider's answer at the callback and redeem its code: who signed in, or OidcError."""
    app = oidc_client(config)
    metadata = _metadata(app, config)
    name = config.display_name
    params = request.GET
    if params.get("error"):
        reason = params.get("error_description") or params["error"]
        raise OidcError(f"{name} did not sign you in: {reason}.", status=403)
    if not params.get("code") or not params.get("state"):
        raise OidcError(
            f"This address is where {name} sends you back after signing in, and it came without its answer: "
            "start again from the login page.",
            status=400,
        )
    if "iss" in params and params["iss"] != config.issuer:
        raise OidcError(f"This answer comes from {params['iss']!r}, not from {name}: it is refused.", status=400)
    if "iss" not in params and metadata.get("authorization_response_iss_parameter_supported"):
        # RFC 9207 2.4: a provider that names itself in its answers must be found named in this one.
        raise OidcError(f"This answer does not say it comes from {name}: it is refused.", status=400)
    claims_options = {
        "iss": {"essential": True, "value": config.issuer},
        "aud": {"essential": True, "value": config.client_id},
    }
    try:
        token = app.authorize_access_token(request, claims_options=claims_options, leeway=CLOCK_LEEWAY_S)
    except MismatchingStateError:
        raise OidcError(
            "This sign-in was not started in this browser, or was already used or is too old: start again.",
            status=400,
        ) from None
    except OAuthError as exc:
        raise OidcError(f"{name} refused to complete the sign-in: {exc.description or exc.error}.") from None
    except jose_errors.JoseError as exc:
        log.warning("an ID token from %s was refused: %r", config.issuer, exc)
        raise OidcError(f"{name}'s ID token was refused: {_token_refusal(exc)}. You are not signed in.") from None
    except (requests.RequestException, ValueError) as exc:
        raise OidcError(f"{name} could not be asked to complete the sign-in ({type(exc).__name__}).", status=503) from None
    claims = token.get("userinfo")
    if not claims or not token.get("id_token"):
        raise OidcError(f"{name} answered without an ID token: you are not signed in.")
    claims = dict(claims)
    if config.groups_claim not in claims and metadata.get("userinfo_endpoint"):
        claims = _with_userinfo(app, token, claims, name)
    return OidcLogin(
        issuer=claims["iss"], subject=str(claims["sub"]), claims=claims,
        groups=tuple(groups_from_claims(claims, config.groups_claim)), id_token=token["id_token"],
    )


def _with_userinfo(app: DjangoOAuth2App, token: dict[str, Any], claims: dict[str, Any], name: str) -> dict[str, Any]:
    """The ID token's claims completed by the userinfo endpoint's (providers put groups in one or the
    other). The token's identity claims win, and an answer about another subject is refused (OpenID
    Connect Core 5.3.2)."""
    try:
        info = app.userinfo(token=token)
    except (requests.RequestException, ValueError, OAuthError) as exc:
        raise OidcError(f"{name}'s user information could not be read ({type(exc).__name__}).", status=503) from None
    if str(info.get("sub")) != str(claims["sub"]):
        raise OidcError(f"{name}'s user information is about someone else than its ID token: refused.")
    return {**info, **claims}


def _token_refusal(exc: jose_errors.JoseError) -> str:
    if isinstance(exc, jose_errors.ExpiredTokenError):
        return "it has expired"
    if isinstance(exc, jose_errors.BadSignatureError):
        return "its signature does not match the provider's published keys"
    if isinstance(exc, jose_errors.MissingClaimError):
        return f"it lacks the {exc.claim} claim"
    if isinstance(exc, jose_errors.ClaimError):
        return _CLAIM_REASONS.get(exc.claim, f"its {exc.claim} claim is invalid")
    if isinstance(exc, jose_errors.UnsupportedAlgorithmError | jose_errors.MissingAlgorithmError):
        return "it is signed with an algorithm the provider does not publish"
    return f"it cannot be verified ({exc.error})"


def oidc_logout_url(config: OidcSettings, *, id_token: str, post_logout_redirect_uri: str) -> str | None:
    """Where to send a browser that logged out so that its session at the provider ends too (RP-initiated
    logout), or None when the provider offers no ``end_session_endpoint`` or cannot be reached: the
    console's own session is over either way.

    No state is kept for the way back: the console's session is already gone, and the page it returns
    to is the login page, which needs none.
    """
    app = oidc_client(config)
    try:
        metadata = _metadata(app, config)
    except OidcError:
        return None
    if not metadata.get("end_session_endpoint"):
        return None
    return app.create_logout_url(
        post_logout_redirect_uri=post_logout_redirect_uri, id_token_hint=id_token or None, client_id=config.client_id,
    )["url"]
