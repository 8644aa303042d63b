"""Single sign-on's settings and policy, without a provider: the BUSCONSOLE_OIDC_* variables (bad values
stop start-up, as busconsole/env.py's do), the groups-to-role mapping, local passwords switched off with
or without a break-glass account, and the production settings with a provider configured (check --deploy
clean, the CSP letting the login and logout posts go to the provider).

Expected roles are written out by hand for each case, from the rule "the highest role any rule gives".
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from streams_app.accounts.oidc_config import (
    OidcSettings,
    groups_from_claims,
    oidc_settings_from_env,
    parse_oidc_roles,
    role_for_groups,
)
from tests.console.conftest import PASSWORD, make_user

ROOT = Path(__file__).resolve().parents[2]
ISSUER = "https://idp.example.com/realms/ops"
BASE = {"BUSCONSOLE_OIDC_ISSUER": ISSUER, "BUSCONSOLE_OIDC_CLIENT_ID": "busconsole"}

# ------------------------------------------------------------------------------------- role mapping

RULES = "admin=ops-admins,operator=ops;oncall,viewer=*"


@pytest.mark.parametrize(
    ("groups", "role"),
    [
        (["ops-admins"], "admin"),
        (["ops"], "operator"),
        (["oncall"], "operator"),
        (["ops", "ops-admins"], "admin"),  # the highest wins, whatever the order
        (["oncall", "marketing"], "operator"),
        (["marketing"], "viewer"),  # viewer=* takes everyone else
        ([], "viewer"),
        (["OPS-ADMINS"], "viewer"),  # exact names: the providers' groups are case-sensitive
        (["ops-admins "], "viewer"),
    ],
)
def test_the_issue_example_maps_groups_to_roles(groups: list[str], role: str) -> None:
    assert role_for_groups(parse_oidc_roles(RULES), groups) == role


@pytest.mark.parametrize(
    ("groups", "role"),
    [(["ops"], "operator"), (["ops-admins"], "admin"), (["marketing"], None), ([], None)],
)
def test_without_a_star_rule_someone_in_no_listed_group_gets_no_role(groups: list[str], role: str | None) -> None:
    assert role_for_groups(parse_oidc_roles("operator=ops,admin=ops-admins"), groups) == role


def test_rules_read_with_spaces_and_case_in_the_role_names() -> None:
    rules = parse_oidc_roles(" Admin = a ; b , operator=c ")
    assert rules == (("admin", frozenset({"a", "b"})), ("operator", frozenset({"c"})))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("boss=ops", "'boss' is not a role"),
        ("admin", "expected role=group;group"),
        ("admin=", "admin= names no group"),
        ("admin=a,admin=b", "the admin role is given twice"),
        (" , ", "maps no group to a role"),
    ],
)
def test_unreadable_role_rules_fail_loudly(raw: str, says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says):
        parse_oidc_roles(raw)


@pytest.mark.parametrize(
    ("claims", "claim", "groups"),
    [
        ({"groups": ["a", "b"]}, "groups", ["a", "b"]),
        ({"groups": "a"}, "groups", ["a"]),  # one group as a string
        ({"groups": ["a", 7, {"x": 1}, None]}, "groups", ["a"]),  # only strings count
        ({}, "groups", []),
        ({"groups": {"a": True}}, "groups", []),
        ({"realm_access": {"roles": ["r1"]}}, "realm_access.roles", ["r1"]),  # Keycloak's nesting
        ({"https://ops.example/groups": ["g"]}, "https://ops.example/groups", ["g"]),  # Auth0's URL names
        ({"realm_access": ["r1"]}, "realm_access.roles", []),
    ],
)
def test_groups_are_read_from_the_configured_claim(claims: dict, claim: str, groups: list[str]) -> None:
    assert groups_from_claims(claims, claim) == groups


# ----------------------------------------------------------------------------------------- settings


def test_only_an_issuer_and_a_client_id_are_needed_and_the_defaults_are_the_documented_ones() -> None:
    config = oidc_settings_from_env(BASE)
    assert config == OidcSettings(
        issuer=ISSUER, client_id="busconsole", client_secret="", scopes=("openid", "email", "profile", "groups"),
        groups_claim="groups", roles=(("viewer", frozenset({"*"})),), name="",
    )
    assert config.display_name == "idp.example.com"
    assert config.origin == "https://idp.example.com"
    assert oidc_settings_from_env({}) is None


def test_every_variable_is_read() -> None:
    config = oidc_settings_from_env({
        **BASE, "BUSCONSOLE_OIDC_CLIENT_SECRET": "s3", "BUSCONSOLE_OIDC_SCOPES": "openid,email  groups",
        "BUSCONSOLE_OIDC_GROUPS_CLAIM": "roles", "BUSCONSOLE_OIDC_ROLES": RULES, "BUSCONSOLE_OIDC_NAME": "Okta",
    })
    assert (config.client_secret, config.scopes, config.groups_claim, config.name) == (
        "s3", ("openid", "email", "groups"), "roles", "Okta",
    )
    assert dict(config.roles) == {"admin": {"ops-admins"}, "operator": {"ops", "oncall"}, "viewer": {"*"}}
    assert config.display_name == "Okta"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"BUSCONSOLE_OIDC_ISSUER": ISSUER}, "BUSCONSOLE_OIDC_CLIENT_ID must be set too"),
        ({**BASE, "BUSCONSOLE_OIDC_ISSUER": "http://idp.example.com"}, "must use https"),
        ({**BASE, "BUSCONSOLE_OIDC_ISSUER": "idp.example.com"}, "must be an https:// URL"),
        ({**BASE, "BUSCONSOLE_OIDC_ISSUER": ISSUER + "?tenant=1"}, "no query or fragment"),
        ({**BASE, "BUSCONSOLE_OIDC_SCOPES": "email profile"}, "must include openid"),
        ({**BASE, "BUSCONSOLE_OIDC_ROLES": "root=ops"}, "'root' is not a role"),
        ({"BUSCONSOLE_OIDC_CLIENT_ID": "busconsole"}, "BUSCONSOLE_OIDC_CLIENT_ID set without BUSCONSOLE_OIDC_ISSUER"),
    ],
)
def test_bad_settings_fail_loudly(env: dict[str, str], says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says):
        oidc_settings_from_env(env)


def test_plain_http_is_allowed_on_this_machine_only() -> None:
    for host in ("127.0.0.1:9000", "localhost:9000", "[::1]:9000"):
        assert oidc_settings_from_env({**BASE, "BUSCONSOLE_OIDC_ISSUER": f"http://{host}"}) is not None


def start_settings_process(
    env: dict[str, str], code: str = "import django; django.setup()"
) -> subprocess.CompletedProcess[str]:
    """Python with the console's settings read from ``env`` (and no SSO or LDAP variable of this process)."""
    clean = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("BUSCONSOLE_OIDC_", "BUSCONSOLE_LDAP_", "BUSCONSOLE_LOCAL_LOGIN"))
    }
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**clean, "DJANGO_SETTINGS_MODULE": "busconsole.settings", **env},
    )


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({**BASE, "BUSCONSOLE_OIDC_ROLES": "admin=ops,admin=x"}, "the admin role is given twice"),
        ({"BUSCONSOLE_LOCAL_LOGIN": "0"}, "BUSCONSOLE_LOCAL_LOGIN=0 needs BUSCONSOLE_OIDC_ISSUER"),
        ({**BASE, "BUSCONSOLE_LOCAL_LOGIN": "maybe"}, "BUSCONSOLE_LOCAL_LOGIN must be 0 or 1"),
    ],
)
def test_the_console_does_not_start_with_bad_settings(env: dict[str, str], says: str) -> None:
    done = start_settings_process(env)
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr and says in done.stderr


@pytest.mark.slow
def test_the_settings_the_console_starts_with() -> None:
    probe = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.BUSCONSOLE_OIDC.issuer, s.BUSCONSOLE_LOCAL_LOGIN, list(s.BUSCONSOLE_BREAK_GLASS_USERS)]))"
    )
    env = {**BASE, "BUSCONSOLE_LOCAL_LOGIN": "0", "BUSCONSOLE_BREAK_GLASS_USERS": "root, ops-root"}
    done = start_settings_process(env, probe)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [ISSUER, False, ["root", "ops-root"]]


def _compose_oidc_env(**given: str) -> dict[str, str]:
    """docker-compose.yml's single sign-on variables as compose fills them: ``${NAME:-default}`` is the
    value given in the shell, else the default."""
    env = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["x-app"]["environment"]
    out = {}
    for name, value in env.items():
        if name.startswith(("BUSCONSOLE_OIDC_", "BUSCONSOLE_LOCAL_LOGIN", "BUSCONSOLE_BREAK_GLASS_USERS")):
            match = re.fullmatch(r"\$\{(\w+):-(.*)\}", str(value))
            assert match, f"{name}: {value!r} is not ${{NAME:-default}}"
            out[name] = given.get(match.group(1), match.group(2))
    return out


@pytest.mark.slow
def test_the_compose_files_sso_variables_start_the_console_unset_and_set() -> None:
    probe = "import django; django.setup(); from django.conf import settings as s; print(s.BUSCONSOLE_OIDC)"
    unset = _compose_oidc_env()
    assert set(unset) >= {f"BUSCONSOLE_OIDC_{n}" for n in ("ISSUER", "CLIENT_ID", "CLIENT_SECRET", "SCOPES", "ROLES")}
    done = start_settings_process(unset, probe)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "None", done.stderr
    given = _compose_oidc_env(
        BUSCONSOLE_OIDC_ISSUER=ISSUER, BUSCONSOLE_OIDC_CLIENT_ID="busconsole", BUSCONSOLE_OIDC_ROLES=RULES,
        BUSCONSOLE_LOCAL_LOGIN="0", BUSCONSOLE_BREAK_GLASS_USERS="admin",
    )
    done = start_settings_process(given, probe)
    assert done.returncode == 0, done.stderr
    assert "issuer='https://idp.example.com/realms/ops'" in done.stdout and "groups_claim='groups'" in done.stdout


@pytest.mark.slow
def test_production_settings_with_a_provider_pass_the_deploy_check_and_let_forms_reach_it() -> None:
    production = {
        **BASE, "DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "console.example.com",
        "BUSCONSOLE_OIDC_CLIENT_SECRET": secrets.token_urlsafe(20), "BUSCONSOLE_LOCAL_LOGIN": "0",
    }
    check = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT, capture_output=True,
        text=True, timeout=120, env={**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", **production},
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.strip() == "System check identified no issues (0 silenced)."
    probe = (
        "import django; django.setup(); from django.test import Client; "
        "r = Client().get('/healthz', secure=True, headers={'host': 'console.example.com'}); "
        "print(r.status_code); print(r['Content-Security-Policy'])"
    )
    done = start_settings_process(production, probe)
    assert done.returncode == 0, done.stderr
    status, csp = done.stdout.strip().splitlines()[-2:]
    policy = dict(d.strip().split(" ", 1) for d in csp.split(";") if d.strip())
    assert status == "200"
    assert policy["form-action"] == "'self' https://idp.example.com"
    assert policy["script-src"] == "'self'"  # nothing else widened


# ---------------------------------------------------------------------- local passwords switched off


@pytest.fixture
def sso_only(settings) -> None:
    settings.BUSCONSOLE_OIDC = OidcSettings(issuer=ISSUER, client_id="busconsole", name="Ops SSO")
    settings.BUSCONSOLE_LOCAL_LOGIN = False
    settings.BUSCONSOLE_BREAK_GLASS_USERS = ()


def test_the_password_form_refuses_every_account_when_local_login_is_off(db, sso_only, admin_user: User) -> None:
    client = Client()
    response = client.post("/login/", {"username": admin_user.username, "password": PASSWORD})
    assert response.status_code == 200
    assert b"Password logins are switched off here: use Sign in with Ops SSO." in response.content
    assert client.get("/").status_code == 302  # not logged in
    admin_page = Client().post("/admin/login/", {"username": admin_user.username, "password": PASSWORD})
    assert b"Password logins are switched off here" in admin_page.content


def test_the_login_page_offers_only_the_provider_when_no_break_glass_account_is_kept(db, sso_only) -> None:
    page = Client().get("/login/").content.decode()
    assert "Sign in with Ops SSO" in page
    assert 'name="password"' not in page


def test_no_path_that_checks_a_password_lets_a_local_account_in(db, sso_only, admin_user: User) -> None:
    assert authenticate(username=admin_user.username, password=PASSWORD) is None
    assert not Client().login(username=admin_user.username, password=PASSWORD)


def test_a_break_glass_account_still_logs_in_with_its_password(db, settings, sso_only, admin_user: User) -> None:
    root = make_user("root", groups=("admin",))
    settings.BUSCONSOLE_BREAK_GLASS_USERS = ("root",)
    page = Client().get("/login/").content.decode()
    assert "Break-glass login" in page and 'name="password"' in page and "Sign in with Ops SSO" in page
    client = Client()
    response = client.post("/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").wsgi_request.user == root
    assert authenticate(username="root", password=PASSWORD) == root
    # everyone else is still refused, the wrong password too
    assert authenticate(username=admin_user.username, password=PASSWORD) is None
    wrong = Client().post("/login/", {"username": "root", "password": "not-it"})
    assert wrong.status_code == 200 and b"Please enter a correct username and password" in wrong.content


def test_with_local_login_on_both_are_offered(db, settings) -> None:
    settings.BUSCONSOLE_OIDC = OidcSettings(issuer=ISSUER, client_id="busconsole")
    page = Client().get("/login/").content.decode()
    assert "Sign in with idp.example.com" in page and 'name="password"' in page and "Break-glass" not in page
