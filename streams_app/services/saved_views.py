"""Saved views: save, rename and delete them, on the role-and-audit path of every other action.

Who may do what (the roles come from :data:`~streams_app.services.audit.ACTION_ROLES`):

* any user may save a private view (``view.save``) and rename or delete their own;
* sharing a view with everyone needs the operator role (``view.share``): a shared view shows up on
  every user's overview, so it is a small act of publishing, like the actions operators take;
* a shared view can be deleted by its owner or by an admin (who tidies what everyone sees); only the
  owner renames it. Another user's private view is not found (404): its existence is not revealed.

Views are the console's own records, not Redis state, so read-only mode allows them
(:data:`~streams_app.services.audit.READ_ONLY_ALLOWED`), as it allows personal tokens. Each attempt
leaves exactly one AuditEvent: ``ok``, ``error`` (a refused URL, an unknown view) or ``denied``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import PermissionDenied
from django.http import Http404

from streams_app.accounts.roles import Role, role_of
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.saved.models import NAME_MAX, SavedView
from streams_app.saved.targets import target_parse
from streams_app.services.audit import action_attempt, action_audit

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from streams_app.accounts.roles import UserLike


def saved_view_action(*, shared: bool) -> str:
    """The action a save is audited and authorised as: sharing needs more than keeping it private."""
    return "view.share" if shared else "view.save"


def saved_view_name_clean(name: object) -> str:
    """A view's name: text of 1 to :data:`NAME_MAX` characters, no control characters."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument("Give the view a name.")
    name = name.strip()
    if len(name) > NAME_MAX:
        raise InvalidArgument(f"A view's name is at most {NAME_MAX} characters.")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise InvalidArgument("A view's name must not hold control characters.")
    return name


def saved_view_save(*, user: UserLike | None, name: str, url: str, shared: bool = False) -> SavedView:
    """Save ``url`` (a console page with its query string) as a new view named ``name``.

    The URL is refused with a 400 unless it is a page of this console
    (:func:`streams_app.saved.targets.target_parse`); the refusal is audited like any failed action.
    """
    action = saved_view_action(shared=shared)
    params: dict[str, Any] = {"name": str(name)[:NAME_MAX], "url": str(url)[:500], "shared": shared}
    with action_audit(
        user=user, conn="", action=action, params=params, target=_target(params["name"])
    ) as record:
        clean = saved_view_name_clean(name)
        target = target_parse(url)
        view = SavedView.objects.create(
            owner=cast("User", user),  # action_audit refused anonymous users
            name=clean,
            path=target.path,
            query=target.query,
            shared=shared,
        )
        record.params.update(view_id=view.pk, name=clean, url=view.url)
        record.target = _target(clean)
        record.affected = 1
    return view


def saved_view_rename(*, user: UserLike | None, view_id: int, name: str) -> SavedView:
    """Rename one of the user's own views (shared or not)."""
    view = _changeable(user=user, view_id=view_id, action="view.rename", admin_may=False)
    params: dict[str, Any] = {"view_id": view_id, "old_name": view.name, "name": str(name)[:NAME_MAX]}
    with action_audit(
        user=user, conn="", action="view.rename", params=params, target=_target(view.name)
    ) as record:
        view.name = saved_view_name_clean(name)
        view.save(update_fields=["name", "updated_at"])
        record.params["name"] = view.name
        record.affected = 1
    return view


def saved_view_delete(*, user: UserLike | None, view_id: int) -> SavedView:
    """Delete a view: one's own, or (for admins) any shared view."""
    view = _changeable(user=user, view_id=view_id, action="view.delete", admin_may=True)
    params: dict[str, Any] = {
        "view_id": view_id,
        "name": view.name,
        "url": view.url,
        "shared": view.shared,
        "owner": view.owner.get_username(),
    }
    with action_audit(
        user=user, conn="", action="view.delete", params=params, target=_target(view.name)
    ) as record:
        view.delete()
        record.affected = 1
    return view


def saved_view_may_delete(*, user: UserLike | None, view: SavedView) -> bool:
    """Whether the views page offers the delete button: a courtesy, the delete checks again."""
    return _may_change(user, view, admin_may=True)


def _may_change(user: UserLike | None, view: SavedView, *, admin_may: bool) -> bool:
    if user is None or not user.is_authenticated:
        return False
    if view.owner_id == user.pk:
        return True
    return admin_may and view.shared and role_of(user) >= Role.ADMIN


def _changeable(*, user: UserLike | None, view_id: int, action: str, admin_may: bool) -> SavedView:
    """The view ``user`` asks to change. A view they cannot see is a 404 and one they see but may not
    change a 403; either is the attempt's one audit row (``error`` or ``denied``), written by the gate,
    which checks the action's role first (every signed-in user holds it, and read-only mode allows it).
    When the view may be changed nothing is written yet: the change's own ``action_audit`` does."""
    view = SavedView.objects.visible_to(user).select_related("owner").filter(pk=view_id).first()
    if view is not None and _may_change(user, view, admin_may=admin_may):
        return view
    name = view.name if view is not None else ""
    attempt = action_attempt(
        user=user, conn="", action=action, params={"view_id": view_id, "name": name}, target=_target(name)
    )
    if view is None:
        message = "You have no saved view with that id."
        attempt.error(message)
        raise Http404(message)
    message = (
        "Only its owner or an admin may delete a shared view."
        if admin_may
        else "Only its owner may rename a view."
    )
    attempt.refused(message)
    raise PermissionDenied(message)


def _target(name: str) -> str:
    """How the audit page names the view (its parameters hold the rest)."""
    return f"view {name}" if name else "view"
