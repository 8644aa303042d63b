"""Django admin for the console's records (entered by console admins: :mod:`streams_app.admin_site`).

The audit trail and jobs are evidence and machinery: the admin shows them but cannot add, change or
delete them (even superusers), so "never editable" holds here too. Tokens can be listed and revoked
(deleted) but not created here, since the raw token must be shown once to its owner
(``manage.py console_token``); their digest is never displayed.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.http import HttpRequest, HttpResponse

from streams_app import services
from streams_app.accounts.models import ApiToken
from streams_app.accounts.roles import ROLE_GROUPS, role_of
from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from streams_app.masking.models import MaskRule
from streams_app.metrics.models import ConsumerMirror, GroupMirror, SnapshotRun, StreamMirror


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(_ReadOnlyAdmin):
    list_display = (
        "at",
        "username",
        "connection",
        "action",
        "target_display",
        "target_group",
        "outcome",
        "affected",
        "duration_ms",
    )
    list_filter = ("action", "outcome", "connection")
    search_fields = ("username", "target_display", "target_group")
    date_hierarchy = "at"
    # The raw key bytes (target_stream) are left out: target_display is their readable form.
    fields = (
        "at",
        "who",
        "username",
        "connection",
        "action",
        "target_display",
        "target_group",
        "target_ids",
        "parameters",
        "outcome",
        "error",
        "affected",
        "duration_ms",
    )
    readonly_fields = fields
    list_select_related = ("who",)


@admin.register(Job)
class JobAdmin(_ReadOnlyAdmin):
    list_display = (
        "id",
        "kind",
        "connection",
        "state",
        "done",
        "total",
        "created_by",
        "created_at",
        "finished_at",
    )
    list_filter = ("state", "kind", "connection")
    fields = (
        "kind",
        "connection",
        "state",
        "done",
        "total",
        "error",
        "parameters",
        "progress",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
        "updated_at",
    )
    readonly_fields = fields
    list_select_related = ("created_by",)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "role_ceiling", "created_at", "last_used_at", "expires_at")
    list_filter = ("user", "role_ceiling")
    search_fields = ("name", "prefix", "user__username")
    fields = ("user", "name", "prefix", "role_ceiling", "created_at", "last_used_at", "expires_at")
    readonly_fields = fields
    list_select_related = ("user",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        """A token revoked here (anyone's) goes through the gate as its owner's revoke on /tokens/ does."""
        params = {"token_id": obj.pk, "name": obj.name, "prefix": obj.prefix, "owner": obj.user.get_username()}
        with services.action_audit(user=request.user, conn="", action="token.revoke.any", params=params) as record:
            super().delete_model(request, obj)
            record.affected = 1

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        """The admin's bulk delete: each token one attempt and one row."""
        for obj in queryset.select_related("user"):
            self.delete_model(request, obj)


# ------------------------------------------------------------------ metrics mirror
# The mirror is Redis's state as last seen: editing it would only be overwritten (or lie), so it is
# read-only like the audit trail. Raw key and name bytes are shown through their display text.


@admin.register(StreamMirror)
class StreamMirrorAdmin(_ReadOnlyAdmin):
    list_display = ("key_text", "connection", "length", "groups_count", "pending", "lag", "is_dlq", "last_id",
                    "synced_at", "deleted_at")
    list_filter = ("connection", "is_dlq", "dlq_convention", ("deleted_at", admin.EmptyFieldListFilter))
    search_fields = ("key_text",)
    fields = ("connection", "key_text", "key_hash", "length", "first_id", "last_id", "last_generated_id",
              "entries_added", "groups_count", "pending", "lag", "is_dlq", "dlq_convention", "dlq_sources",
              "first_seen", "last_seen", "synced_at", "deleted_at")
    readonly_fields = fields
    show_full_result_count = False  # COUNT(*) over a big mirror on every list page is wasted work


@admin.register(GroupMirror)
class GroupMirrorAdmin(_ReadOnlyAdmin):
    list_display = ("name_text", "stream", "consumers", "pending", "lag", "oldest_pending_idle_ms", "last_seen",
                    "deleted_at")
    list_filter = ("stream__connection", ("deleted_at", admin.EmptyFieldListFilter))
    search_fields = ("name_text", "stream__key_text")
    fields = ("stream", "name_text", "consumers", "pending", "last_delivered_id", "entries_read", "lag",
              "oldest_pending_id", "oldest_pending_idle_ms", "first_seen", "last_seen", "deleted_at")
    readonly_fields = fields
    list_select_related = ("stream",)
    show_full_result_count = False


@admin.register(ConsumerMirror)
class ConsumerMirrorAdmin(_ReadOnlyAdmin):
    list_display = ("name_text", "group", "pending", "idle_ms", "inactive_ms", "last_seen", "deleted_at")
    list_filter = (("deleted_at", admin.EmptyFieldListFilter),)
    search_fields = ("name_text", "group__name_text", "group__stream__key_text")
    fields = ("group", "name_text", "pending", "idle_ms", "inactive_ms", "first_seen", "last_seen", "deleted_at")
    readonly_fields = fields
    list_select_related = ("group",)
    show_full_result_count = False


@admin.register(SnapshotRun)
class SnapshotRunAdmin(_ReadOnlyAdmin):
    list_display = ("tick", "duration_ms", "redis_ms", "streams", "groups", "finished_at")
    fields = ("tick", "started_at", "finished_at", "duration_ms", "redis_ms", "streams", "groups", "errors")
    readonly_fields = fields
    date_hierarchy = "tick"


# ------------------------------------------------------------------ masking rules
# Rules that hide payload values (streams_app/masking); the settings' rules are listed nowhere here, since
# the environment owns them. Saving or deleting a rule changes what every user sees: each leaves an audit row.


@admin.register(MaskRule)
class MaskRuleAdmin(admin.ModelAdmin):
    list_display = ("stream_glob", "field_path", "action", "enabled", "note", "updated_at")
    list_filter = ("action", "enabled")
    search_fields = ("stream_glob", "field_path", "note")

    def save_model(self, request: HttpRequest, obj: MaskRule, form: Any, change: bool) -> None:
        action = "mask_rule.change" if change else "mask_rule.add"
        with services.action_audit(user=request.user, conn="", action=action) as record:
            super().save_model(request, obj, form, change)
            _mask_rule_record(record, obj)

    def delete_model(self, request: HttpRequest, obj: MaskRule) -> None:
        with services.action_audit(user=request.user, conn="", action="mask_rule.delete") as record:
            _mask_rule_record(record, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        """The admin's bulk delete: each rule one attempt and one row, as a delete of one is."""
        for obj in queryset:
            self.delete_model(request, obj)


def _mask_rule_record(record: services.ActionRecord, obj: MaskRule) -> None:
    record.params = {
        "stream_glob": obj.stream_glob, "field_path": obj.field_path, "action": obj.action, "enabled": obj.enabled
    }
    record.target, record.affected = f"mask rule {obj.pk}", 1


# ------------------------------------------------------------------ users and groups
# Who may do what is set here (a user's role groups, superuser, active) and so is the meaning of a role
# group: each change goes through the gate like any other configuration change, one row per save or
# delete, naming the role before and after. Passwords are recorded as changed, never their hashes.

#: At most this many group or permission names in one row's parameters (a role group holds none).
NAMES_KEPT = 50


class _AuditedSaves(admin.ModelAdmin):
    """Each add, change and delete of the admin's form through the audit gate, with the object as it was
    and as it is. The object's relations (a user's groups, a group's permissions) are saved after the
    object (``save_related``), so the row is written there; the admin's form runs in one transaction, so
    a refused or failed row leaves nothing half-saved."""

    #: ``<prefix>.add``, ``.change`` and ``.delete`` in ``ACTION_ROLES``
    audit_prefix = ""

    def audit_state(self, obj: Any) -> dict[str, Any]:
        """What a row says of ``obj``, read from the database (not from the unsaved form)."""
        raise NotImplementedError

    def audit_name(self, obj: Any) -> str:
        raise NotImplementedError

    def _identity(self, obj: Any) -> dict[str, Any]:
        return {}

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        request._audit_before = self.audit_state(obj) if change and obj.pk else None  # type: ignore[attr-defined]  # one request's note
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        obj = form.instance
        action = f"{self.audit_prefix}.{'change' if change else 'add'}"
        with services.action_audit(user=request.user, conn="", action=action) as record:
            super().save_related(request, form, formsets, change)
            before = {"before": getattr(request, "_audit_before", None)} if change else {}
            record.params = {**self._identity(obj), **before, "after": self.audit_state(obj)}
            record.target, record.affected = self.audit_name(obj), 1

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        params = {**self._identity(obj), "before": self.audit_state(obj)}
        with services.action_audit(user=request.user, conn="", action=f"{self.audit_prefix}.delete",
                                   target=self.audit_name(obj), params=params) as record:
            super().delete_model(request, obj)
            record.affected = 1

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        """The admin's bulk delete: each object one attempt and one row."""
        for obj in queryset:
            self.delete_model(request, obj)


admin.site.unregister(User)
admin.site.unregister(Group)


@admin.register(User)
class ConsoleUserAdmin(_AuditedSaves, UserAdmin):
    """Django's user admin through the gate (``user.*``): the role, groups and flags before and after,
    and a password set here as ``user.password`` without the password."""

    audit_prefix = "user"

    def audit_state(self, obj: User) -> dict[str, Any]:
        fresh = User.objects.get(pk=obj.pk)  # the role from the database, not one cached on ``obj``
        groups = sorted(fresh.groups.values_list("name", flat=True)[:NAMES_KEPT])
        return {"role": role_of(fresh).name.lower(), "groups": groups, "is_superuser": fresh.is_superuser,
                "is_active": fresh.is_active, "is_staff": fresh.is_staff}

    def audit_name(self, obj: User) -> str:
        return f"user {obj.get_username()}"

    def _identity(self, obj: User) -> dict[str, Any]:
        return {"username": obj.get_username()}

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:
        if request.method != "POST":
            return super().user_change_password(request, id, form_url)
        user = self.get_object(request, id)
        name = user.get_username() if user is not None else f"#{id}"
        attempt = services.action_attempt(user=request.user, conn="", action="user.password",
                                          params={"username": name}, target=f"user {name}")
        with attempt.guarded() as record:
            response = super().user_change_password(request, id, form_url)
        if response.status_code == 302:  # saved; an invalid form answers 200 with its errors
            record.affected = 1
            attempt.ok()
        else:
            attempt.error("The password form was not valid; the password is unchanged.")
        return response


@admin.register(Group)
class ConsoleGroupAdmin(_AuditedSaves, GroupAdmin):
    """Django's group admin through the gate (``user_group.*``): renaming or deleting a role group
    changes who may do what."""

    audit_prefix = "user_group"

    def audit_state(self, obj: Group) -> dict[str, Any]:
        fresh = Group.objects.get(pk=obj.pk)
        perms = sorted(fresh.permissions.values_list("codename", flat=True)[:NAMES_KEPT])
        return {"name": fresh.name, "role_group": fresh.name in ROLE_GROUPS, "permissions": perms}

    def audit_name(self, obj: Group) -> str:
        return f"group {obj.name}"
