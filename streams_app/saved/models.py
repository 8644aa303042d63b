"""The :class:`SavedView` model: one user's named link to a console page, private or shared."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

#: The longest path and query string a view keeps (a stream page with a search is well under this).
PATH_MAX = 2000
QUERY_MAX = 4000
NAME_MAX = 100


class SavedViewQuerySet(models.QuerySet["SavedView"]):
    def visible_to(self, user: UserLike | None) -> SavedViewQuerySet:
        """The views ``user`` may see and open: their own and every shared one (none for anonymous)."""
        if user is None or not user.is_authenticated:
            return self.none()
        return self.filter(models.Q(owner_id=user.pk) | models.Q(shared=True))


class SavedView(models.Model):
    """A page of the console (``path``) with its query string (``query``, without the ``?``).

    ``path`` is checked to be a console page when the view is saved
    (:func:`streams_app.saved.targets.target_parse`), so the link a view shows can never lead to
    another site. A private view (``shared`` false) is seen by its owner only; a shared one by every
    user of the console, and sharing needs the operator role.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=NAME_MAX)
    path = models.CharField(max_length=PATH_MAX, help_text="A console page's path, percent-encoded.")
    query = models.CharField(max_length=QUERY_MAX, blank=True, help_text="Its query string, without '?'.")
    shared = models.BooleanField(default=False, help_text="Visible to every user, not only the owner.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = SavedViewQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at", "-pk"]
        indexes = [
            models.Index(fields=["owner", "-updated_at"], name="savedview_owner_recent"),
            models.Index(fields=["shared", "-updated_at"], name="savedview_shared_recent"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def url(self) -> str:
        """The link that opens the view: the same page with the same query string."""
        return f"{self.path}?{self.query}" if self.query else self.path
