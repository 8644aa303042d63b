"""What a console admin changes in the Django admin (``/admin/``) goes through the audit gate.

Masking rules (added, changed, deleted one by one or with the changelist's bulk action), accounts and their
role groups (a role changed, a password set, an account or group added or deleted) and personal API
tokens revoked there each leave one audit row, as the same change made elsewhere does; the rows are read
back from the database, and the objects' state from the database too.
"""

from __future__ import annotations

from django.contrib.auth.models import Group, User
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


USERS = "/admin/auth/user/"
GROUPS = "/admin/auth/group/"


def _user_form(user: User, **changes: object) -> dict[str, object]:
    """The admin's change form of ``user`` as a browser would post it back, with ``changes``."""
    joined = user.date_joined
    data: dict[str, object] = {
        "username": user.username, "first_name": "", "last_name": "", "email": "",
        "is_active": "on", "groups": [str(pk) for pk in user.groups.values_list("pk", flat=True)],
        "user_permissions": [], "date_joined_0": joined.strftime("%Y-%m-%d"), "date_joined_1": joined.strftime("%H:%M:%S"),
        "last_login_0": "", "last_login_1": "",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_a_role_changed_in_the_admin_leaves_one_row_with_the_role_before_and_after(
    admin_client_: Client, viewer: User
) -> None:
    operators = Group.objects.get(name="operator")
    response = admin_client_.post(f"{USERS}{viewer.pk}/change/", _user_form(viewer, groups=[str(operators.pk)]))
    assert response.status_code == 302, response.content[:800]
    assert list(User.objects.get(pk=viewer.pk).groups.values_list("name", flat=True)) == ["operator"]
    row = AuditEvent.objects.get(action="user.change")
    assert (row.username, row.outcome, row.affected, row.target_display) == ("ada-admin", "ok", 1, "user vera-viewer")
    before, after = row.parameters["before"], row.parameters["after"]
    assert (before["role"], before["groups"]) == ("viewer", ["viewer"])
    assert (after["role"], after["groups"], after["is_superuser"]) == ("operator", ["operator"], False)


def test_an_account_added_and_deleted_in_the_admin_leaves_a_row_each(admin_client_: Client) -> None:
    response = admin_client_.post(f"{USERS}add/", {
        "username": "newcomer", "password1": "a long pass phrase 42", "password2": "a long pass phrase 42",
        "usable_password": "true",
    })
    assert response.status_code == 302, response.content[:800]
    added = AuditEvent.objects.get(action="user.add")
    assert (added.outcome, added.parameters["username"], added.parameters["after"]["role"]) == ("ok", "newcomer", "viewer")
    pk = User.objects.get(username="newcomer").pk
    assert admin_client_.post(f"{USERS}{pk}/delete/", {"post": "yes"}).status_code == 302
    assert not User.objects.filter(pk=pk).exists()
    deleted = AuditEvent.objects.get(action="user.delete")
    assert (deleted.outcome, deleted.parameters["username"], deleted.target_display) == ("ok", "newcomer", "user newcomer")


def test_a_password_set_in_the_admin_leaves_a_row_and_a_refused_form_an_error_row(
    admin_client_: Client, viewer: User
) -> None:
    url = f"{USERS}{viewer.pk}/password/"
    refused = admin_client_.post(url, {"password1": "one long phrase 77", "password2": "another phrase 77",
                                       "usable_password": "true"})
    assert refused.status_code == 200
    assert not User.objects.get(pk=viewer.pk).check_password("one long phrase 77")
    saved = admin_client_.post(url, {"password1": "one long phrase 77", "password2": "one long phrase 77",
                                     "usable_password": "true"})
    assert saved.status_code == 302, saved.content[:800]
    assert User.objects.get(pk=viewer.pk).check_password("one long phrase 77")
    rows = AuditEvent.objects.filter(action="user.password").order_by("pk")
    assert [(r.outcome, r.parameters, r.affected) for r in rows] == [
        ("error", {"username": "vera-viewer"}, 0), ("ok", {"username": "vera-viewer"}, 1)
    ]
    assert not any("phrase" in str(r.parameters) + r.error for r in rows)  # never the password


def test_a_role_group_renamed_in_the_admin_leaves_a_row(admin_client_: Client) -> None:
    group = Group.objects.create(name="auditors")
    response = admin_client_.post(f"{GROUPS}{group.pk}/change/", {"name": "auditors-2", "permissions": []})
    assert response.status_code == 302, response.content[:800]
    row = AuditEvent.objects.get(action="user_group.change")
    assert (row.outcome, row.parameters["before"]["name"], row.parameters["after"]["name"]) == (
        "ok", "auditors", "auditors-2"
    )
    assert row.parameters["after"]["role_group"] is False
