"""Personal API tokens: every user lists, creates and revokes their own (docs/api.md#authentication).

A new token is shown once, in the answer to the POST that created it (never stored in clear, not even
in the session, and the page is not cached); afterwards only its prefix is ever shown. A token may be
given an expiry and a role ceiling up to the user's own role (a viewer-strength token for a dashboard).
Creating and revoking are audited (``token.create``, ``token.revoke``) through :mod:`streams_app.services`.
These pages answer sessions only: the middleware never lets a token in here, so a leaked token cannot
mint its own replacement. Other users' tokens are managed by console admins in the Django admin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods, require_POST

from streams_app import services
from streams_app.accounts.models import ApiToken
from streams_app.accounts.roles import ROLE_GROUPS, Role, role_of
from streams_app.accounts.tokens import TOKEN_MAX_DAYS, token_expiry

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


class TokenForm(forms.Form):
    """A token's name, optional life in days, and optional role ceiling (only roles up to the user's)."""

    name = forms.CharField(
        max_length=ApiToken._meta.get_field("name").max_length, strip=True,
        help_text="What the token is for, e.g. 'deploy script'.",
    )
    expires_days = forms.IntegerField(
        required=False, min_value=1, max_value=TOKEN_MAX_DAYS,
        help_text="Days until the token stops working; empty for never.",
    )
    role = forms.ChoiceField(required=False, help_text="The highest role the token acts with.")

    def __init__(self, *args: Any, user: UserLike | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        mine = role_of(user)
        cast(forms.ChoiceField, self.fields["role"]).choices = [("", f"my role ({mine})")] + [
            (label, label) for label, role in ROLE_GROUPS.items() if role <= mine
        ]


def _page(request: HttpRequest, *, form: TokenForm, raw: str | None = None, created: ApiToken | None = None,
          status: int = 200) -> HttpResponse:
    context = {
        "form": form,
        "tokens": ApiToken.objects.filter(user_id=request.user.pk).order_by("-created_at", "-pk"),  # type: ignore[misc]  # an anonymous pk (None) matches no token
        "raw_token": raw,
        "created": created,
        "is_admin": role_of(request.user) >= Role.ADMIN,
        "now": timezone.now(),
    }
    response = render(request, "streams_app/tokens.html", context, status=status)
    if raw:
        add_never_cache_headers(response)  # the one page holding the raw token: not in any cache
    return response


@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    """GET: the user's tokens and the form. POST: create one and show it, this once."""
    if request.method == "GET":
        return _page(request, form=TokenForm(user=request.user))
    form = TokenForm(request.POST, user=request.user)
    if not form.is_valid():
        return _page(request, form=form, status=400)
    token, raw = services.token_issue(
        user=request.user, name=form.cleaned_data["name"],
        expires_at=token_expiry(form.cleaned_data["expires_days"]), role_ceiling=form.cleaned_data["role"],
    )
    return _page(request, form=TokenForm(user=request.user), raw=raw, created=token)


@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the user's own tokens; anyone else's is a 404."""
    token = services.token_revoke(user=request.user, token_id=token_id)
    messages.success(request, f"Revoked the token {token.name} ({token.prefix}…): it no longer works.")
    return HttpResponseRedirect(reverse("tokens"))
