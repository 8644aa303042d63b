"""Django admin for the console's records.

The audit trail and jobs are evidence and machinery: the admin shows them but cannot add, change or
delete them (even superusers), so "never editable" holds here too. Tokens can be listed and revoked
(deleted) but not created here, since the raw token must be shown once to its owner
(``manage.py console_token``); their digest is never displayed.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from streams_app.models import ApiToken, AuditEvent, Job


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
    list_display = ("name", "user", "prefix", "created_at", "last_used_at")
    list_filter = ("user",)
    search_fields = ("name", "prefix", "user__username")
    fields = ("user", "name", "prefix", "created_at", "last_used_at")
    readonly_fields = fields
    list_select_related = ("user",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
