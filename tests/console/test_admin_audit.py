"""What a console admin changes in the Django admin (``/admin/``) goes through the audit gate.

Masking rules (added, changed, deleted one by one or with the changelist's bulk action) and personal API
tokens revoked there each leave one audit row, as the same change made elsewhere does; the rows are read
back from the database, and the objects' state from the database too.
"""

from __future__ import annotations

from django.contrib.auth.models import User
from django.test import Client

from streams_app.accounts.models import ApiToken
from streams_app.accounts.tokens import token_create
from streams_app.audit.models import AuditEvent
from streams_app.masking.models import MaskRule

RULES = "/admin/streams_app/maskrule/"
TOKENS = "/admin/streams_app/apitoken/"


def _rule_fields(rule: MaskRule) -> dict[str, object]:
    return {"stream_glob": rule.stream_glob, "field_path": rule.field_path, "action": rule.action, "enabled": rule.enabled}


def _bulk_delete(client: Client, changelist: str, pks: list[int]) -> None:
    response = client.post(
        changelist, {"action": "delete_selected", "_selected_action": [str(pk) for pk in pks], "post": "yes"}
    )
    assert response.status_code == 302, response.content[:500]


def test_a_rule_changed_or_deleted_in_the_admin_leaves_one_row_each(admin_client_: Client) -> None:
    rule = MaskRule.objects.create(stream_glob="orders", field_path="email", action="mask")
    response = admin_client_.post(
        f"{RULES}{rule.pk}/change/",
        {"stream_glob": "orders", "field_path": "email", "action": "hash", "enabled": "on", "note": ""},
    )
    assert response.status_code == 302, response.content[:500]
    rule.refresh_from_db()
    assert rule.action == "hash"
    changed = AuditEvent.objects.get(action="mask_rule.change")
    assert (changed.username, changed.outcome, changed.affected) == ("ada-admin", "ok", 1)
    assert changed.parameters == _rule_fields(rule) and changed.target_display == f"mask rule {rule.pk}"

    fields, pk = _rule_fields(rule), rule.pk
    assert admin_client_.post(f"{RULES}{pk}/delete/", {"post": "yes"}).status_code == 302
    assert not MaskRule.objects.filter(pk=pk).exists()
    deleted = AuditEvent.objects.get(action="mask_rule.delete")
    assert (deleted.outcome, deleted.parameters, deleted.target_display) == ("ok", fields, f"mask rule {pk}")


def test_the_bulk_delete_of_rules_leaves_one_row_per_rule(admin_client_: Client) -> None:
    rules = [MaskRule.objects.create(stream_glob=f"s{n}", field_path="email") for n in range(3)]
    _bulk_delete(admin_client_, RULES, [rule.pk for rule in rules])
    assert not MaskRule.objects.exists()
    rows = AuditEvent.objects.filter(action="mask_rule.delete").order_by("pk")
    assert [(row.target_display, row.parameters["stream_glob"]) for row in rows] == [
        (f"mask rule {rule.pk}", rule.stream_glob) for rule in rules
    ]


def test_a_token_revoked_in_the_admin_leaves_a_row(admin_client_: Client, viewer: User) -> None:
    one = token_create(user=viewer, name="ci")[0]
    two = token_create(user=viewer, name="cron")[0]
    assert admin_client_.post(f"{TOKENS}{one.pk}/delete/", {"post": "yes"}).status_code == 302
    _bulk_delete(admin_client_, TOKENS, [two.pk])
    assert not ApiToken.objects.exists()
    rows = AuditEvent.objects.filter(action="token.revoke.any").order_by("pk")
    assert [(r.username, r.outcome, r.affected, r.parameters) for r in rows] == [
        ("ada-admin", "ok", 1, {"token_id": t.pk, "name": t.name, "prefix": t.prefix, "owner": "vera-viewer"})
        for t in (one, two)
    ]
