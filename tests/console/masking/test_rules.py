"""Masking rules: the setting is refused at start-up when malformed (a clear message naming the rule),
and the admin page's rules are validated, audited and applied."""

from __future__ import annotations

import json

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from busconsole.env import parse_mask_rules, parse_unmasked_roles
from streams_app.audit.models import AuditEvent
from streams_app.masking.models import MaskRule
from tests.console.helpers import stream_api


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{", "BUSCONSOLE_MASK_RULES is not valid JSON"),
        ('{"field": "a"}', "must be a JSON list"),
        ('[{"field": "a..b"}]', "BUSCONSOLE_MASK_RULES[0].field: 'a..b' has an empty segment"),
        ('[{"field": "a", "action": "blur"}]', "BUSCONSOLE_MASK_RULES[0].action: 'blur' must be one of"),
        ('[{"field": "a"}, {"stream": "", "field": "b"}]', "BUSCONSOLE_MASK_RULES[1].stream must be"),
        ('[{"field": "a", "glob": "x"}]', "unknown key(s) 'glob'"),
        ('[{"stream": "x"}]', "BUSCONSOLE_MASK_RULES[0].field: the field path is empty"),
        ('[{"field": "data.em*"}]', "'*' must be a whole segment"),
    ],
)
def test_bad_rules_stop_start_up(raw: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured) as exc:
        parse_mask_rules(raw)
    assert message in str(exc.value)


def test_good_rules_are_normalised() -> None:
    assert parse_mask_rules('[{"field": " data.customer.email "}]') == (
        {"stream": "*", "field": "data.customer.email", "action": "mask"},
    )
    assert parse_mask_rules("") == ()


def test_unknown_roles_stop_start_up() -> None:
    with pytest.raises(ImproperlyConfigured, match="'admins' is not a role"):
        parse_unmasked_roles(["admins"])
    assert parse_unmasked_roles([]) == ()


def test_the_admin_page_adds_a_rule_that_applies_at_once(admin_client_: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"email": "alice@example.com"})
    bad = admin_client_.post(
        "/admin/streams_app/maskrule/add/", {"stream_glob": "orders", "field_path": "a..b", "action": "mask"}
    )
    assert bad.status_code == 200 and b"empty segment" in bad.content and not MaskRule.objects.exists()
    response = admin_client_.post(
        "/admin/streams_app/maskrule/add/",
        {"stream_glob": "orders", "field_path": "email", "action": "mask", "enabled": "on", "note": ""},
    )
    assert response.status_code == 302, response.content[:500]
    assert b"alice@example.com" not in admin_client_.get(stream_api("orders", "entries/")).content
    row = AuditEvent.objects.get(action="mask_rule.add")
    assert row.username == "ada-admin" and row.parameters["field_path"] == "email"


def test_a_disabled_rule_does_not_apply(db, viewer_client: Client, r: redis.Redis) -> None:
    MaskRule.objects.create(stream_glob="orders", field_path="email", enabled=False)
    r.xadd("orders", {"email": "alice@example.com"})
    assert b"alice@example.com" in viewer_client.get(stream_api("orders", "entries/")).content


def test_viewers_cannot_open_the_admin_page(viewer_client: Client) -> None:
    assert viewer_client.get("/admin/streams_app/maskrule/").status_code in (302, 403)


def test_settings_rules_are_json_too() -> None:
    assert (
        json.loads(json.dumps(parse_mask_rules('[{"field": "x", "action": "hash"}]')))[0]["action"] == "hash"
    )
