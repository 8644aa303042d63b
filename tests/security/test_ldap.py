"""LDAP logins against a real directory: Debian's slapd, started on a free port by tests/slapd/, searched by
a service account as a deployment's would be. People log in through the console's own login form (the
throttle, the messages); their groups are changed in the directory between logins.

Checked: the role from the groups at every login (down as well as up; none deactivates and says why), a
demoted user's open tail closing at their next login, a wrong password, a directory that cannot be
reached (said so, not counted as a guess), no takeover of a local account of the same name, passwords of
local accounts switched off while the directory's still work, the ``login.ldap`` audit rows, and the
settings. Expected roles come from
the ROLES string below, read by eye.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from streams_app.accounts.ldap_config import LdapSettings, ldap_settings_from_env
from streams_app.accounts.oidc_config import parse_oidc_roles
from streams_app.audit.models import AuditEvent
from tests.console.conftest import PASSWORD as LOCAL_PASSWORD
from tests.security.test_oidc_settings import start_settings_process as start_process
from tests.security.test_sockets import run, tail_closes_after
from tests.servers import free_port
from tests.slapd.server import GROUPS, PASSWORD, PEOPLE, SERVICE_DN, SERVICE_PASSWORD, SlapdServer

ROLES = "admin=ops-admins,operator=ops;oncall,viewer=readers"
BACKENDS = [
    "streams_app.accounts.role_backend.ConsoleModelBackend",
    "streams_app.accounts.ldap_backend.ConsoleLDAPBackend",
    "streams_app.accounts.backends.ConsoleAdminPermissions",
]


@pytest.fixture(scope="module")
def directory() -> Iterator[SlapdServer]:
    server = SlapdServer().start()
    yield server
    server.cleanup()


def config_for(directory: SlapdServer, **changes) -> LdapSettings:
    values = {
        "uri": directory.uri, "user_base": PEOPLE, "group_base": GROUPS, "bind_dn": SERVICE_DN,
        "bind_password": SERVICE_PASSWORD, "roles": parse_oidc_roles(ROLES, "BUSCONSOLE_LDAP_ROLES"),
    }
    return LdapSettings(**{**values, **changes})


@pytest.fixture
def ldap_login(settings, directory: SlapdServer) -> SlapdServer:
    """The console logging people in with ``directory`` (what BUSCONSOLE_LDAP_URI and the rest make)."""
    settings.BUSCONSOLE_LDAP = config_for(directory)
    settings.AUTHENTICATION_BACKENDS = BACKENDS
    return directory


_people: set[str] = set()


def person(directory: SlapdServer, uid: str, groups: list[str]) -> str:
    if uid not in _people:
        directory.add_person(uid)
        _people.add(uid)
    directory.set_groups(uid, groups)
    return uid


def log_in(client: Client, username: str, password: str = PASSWORD):
    return client.post("/login/", {"username": username, "password": password})


def role_groups(username: str) -> list[str]:
    return sorted(User.objects.get(username=username).groups.values_list("name", flat=True))


def signed_in_as(client: Client) -> str | None:
    response = client.get("/")
    return None if response.status_code == 302 else response.wsgi_request.user.get_username()


def test_a_directory_user_logs_in_with_the_role_their_groups_give(db, ldap_login: SlapdServer) -> None:
    person(ldap_login, "alice", ["ops", "staff"])
    client = Client()
    response = log_in(client, "alice")
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in_as(client) == "alice"
    assert role_groups("alice") == ["operator"]
    user = User.objects.get(username="alice")
    assert (user.email, user.first_name, user.has_usable_password()) == ("alice@example.test", "Alice", False)


def test_the_role_is_set_again_at_every_login(db, ldap_login: SlapdServer) -> None:
    person(ldap_login, "bob", ["ops-admins", "ops"])
    admin = Client()
    log_in(admin, "bob")
    assert role_groups("bob") == ["admin"]
    assert admin.get("/alerts/rules/new/").status_code == 200
    person(ldap_login, "bob", ["oncall"])  # out of the admin group in the directory
    log_in(Client(), "bob")
    assert role_groups("bob") == ["operator"]
    assert admin.get("/alerts/rules/new/").status_code == 403  # the older session is demoted too
    person(ldap_login, "bob", ["readers"])
    log_in(Client(), "bob")
    assert role_groups("bob") == ["viewer"]


def test_an_open_tail_closes_when_a_new_login_takes_the_role_away(asgi_server, ldap_login, r: redis.Redis) -> None:
    r.xadd(b"orders", {"n": "1"})
    person(ldap_login, "olga", ["ops-admins"])
    first = Client()
    log_in(first, "olga")
    cookies = {settings.SESSION_COOKIE_NAME: first.cookies[settings.SESSION_COOKIE_NAME].value}
    person(ldap_login, "olga", ["readers"])
    assert run(tail_closes_after(asgi_server, cookies, b"orders", lambda: log_in(Client(), "olga"))) == 4403
    assert role_groups("olga") == ["viewer"]


def test_groups_that_give_no_role_refuse_the_login_say_why_and_deactivate(db, ldap_login: SlapdServer) -> None:
    person(ldap_login, "dave", ["ops"])
    first = Client()
    log_in(first, "dave")
    person(ldap_login, "dave", ["marketing"])
    client = Client()
    response = log_in(client, "dave")
    assert response.status_code == 200
    assert b"none of your groups (marketing) gives a role on this console" in response.content
    assert signed_in_as(client) is None
    assert signed_in_as(first) is None  # deactivated: the older session ends too
    assert not User.objects.get(username="dave").is_active
    person(ldap_login, "dave", ["readers"])
    again = Client()
    log_in(again, "dave")
    assert signed_in_as(again) == "dave" and role_groups("dave") == ["viewer"]


def test_a_wrong_password_is_the_usual_refusal(db, ldap_login: SlapdServer) -> None:
    person(ldap_login, "erin", ["ops"])
    client = Client()
    response = log_in(client, "erin", "not-her-password")
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert signed_in_as(client) is None
    assert not User.objects.filter(username="erin").exists()


def test_a_directory_that_cannot_be_reached_is_said_so_and_not_counted(db, settings, ldap_login) -> None:
    settings.BUSCONSOLE_LDAP = config_for(ldap_login, uri=f"ldap://127.0.0.1:{free_port()}")
    settings.BUSCONSOLE_LOGIN_MAX_FAILURES = 2
    for _ in range(4):  # more than the throttle allows: none of them is held against the account
        response = log_in(Client(), "alice")
        assert response.status_code == 200
        assert b"The directory could not check your password (Can&#x27;t contact LDAP server)" in response.content


def test_a_local_account_of_the_same_name_is_never_opened_by_the_directory(db, ldap_login: SlapdServer) -> None:
    local = User.objects.create_user("frank", password=LOCAL_PASSWORD)
    person(ldap_login, "frank", ["ops-admins"])
    response = log_in(Client(), "frank")  # the directory's password
    assert b"Please enter a correct username and password" in response.content
    assert role_groups("frank") == []
    client = Client()
    log_in(client, "frank", LOCAL_PASSWORD)  # the local password still opens the local account
    assert signed_in_as(client) == "frank" and User.objects.get(username="frank").pk == local.pk


def test_with_local_passwords_off_the_directorys_still_work(db, settings, ldap_login, admin_user) -> None:
    settings.BUSCONSOLE_LOCAL_LOGIN = False
    settings.BUSCONSOLE_BREAK_GLASS_USERS = ()
    assert b'name="password"' in Client().get("/login/").content
    person(ldap_login, "gina", ["readers"])
    client = Client()
    log_in(client, "gina")
    assert signed_in_as(client) == "gina"
    local = Client()
    log_in(local, admin_user.username, LOCAL_PASSWORD)
    assert signed_in_as(local) is None


def test_every_directory_login_leaves_an_audit_row_with_the_role_it_gave(db, ldap_login, admin_user) -> None:
    person(ldap_login, "hank", ["ops-admins", "staff"])
    log_in(Client(), "hank")
    person(ldap_login, "hank", ["oncall"])
    log_in(Client(), "hank")
    person(ldap_login, "hank", ["marketing"])
    log_in(Client(), "hank")  # the right password; no group gives a role
    log_in(Client(), "hank", "not-his-password")  # no row: the directory decided nothing
    log_in(Client(), admin_user.username, LOCAL_PASSWORD)  # a local login: no directory row
    rows = [
        (e.username, e.outcome, e.error, e.parameters["role"], e.parameters["previous_role"], e.parameters["groups"])
        for e in AuditEvent.objects.filter(action="login.ldap").order_by("id")
    ]
    assert rows == [
        ("hank", "ok", "", "admin", None, ["ops-admins", "staff"]),
        ("hank", "ok", "", "operator", "admin", ["oncall"]),
        ("hank", "denied", "no group maps to a role", None, "operator", ["marketing"]),
    ]


# ------------------------------------------------------------------------------------------ settings

BASE = {"BUSCONSOLE_LDAP_URI": "ldaps://ldap.example.com", "BUSCONSOLE_LDAP_USER_BASE": "ou=people,dc=example,dc=com",
        "BUSCONSOLE_LDAP_GROUP_BASE": "ou=groups,dc=example,dc=com"}


def test_ldap_settings_and_their_defaults() -> None:
    assert ldap_settings_from_env({}) is None
    config = ldap_settings_from_env({**BASE, "BUSCONSOLE_LDAP_ROLES": ROLES, "BUSCONSOLE_LDAP_START_TLS": "1"})
    assert (config.user_filter, config.group_type, config.start_tls, config.bind_dn) == (
        "(uid=%(user)s)", "groupOfNames", True, "")
    assert dict(config.roles) == {"admin": {"ops-admins"}, "operator": {"ops", "oncall"}, "viewer": {"readers"}}
    assert dict(ldap_settings_from_env(BASE).roles) == {"viewer": {"*"}}


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({**BASE, "BUSCONSOLE_LDAP_URI": "https://ldap.example.com"}, "must be ldap:// or ldaps://"),
        ({"BUSCONSOLE_LDAP_URI": "ldap://x"}, "_USER_BASE and _GROUP_BASE must be too"),
        ({**BASE, "BUSCONSOLE_LDAP_USER_FILTER": "(uid=*)"}, "must be an LDAP filter with %\\(user\\)s"),
        ({**BASE, "BUSCONSOLE_LDAP_GROUP_TYPE": "nestedGroups"}, "must be one of"),
        ({**BASE, "BUSCONSOLE_LDAP_ROLES": "boss=x"}, "BUSCONSOLE_LDAP_ROLES: 'boss' is not a role"),
        ({**BASE, "BUSCONSOLE_LDAP_START_TLS": "yes"}, "must be 0 or 1"),
        ({**BASE, "BUSCONSOLE_LDAP_CA_FILE": "/nonexistent/ca.pem"}, "no file at"),
        ({"BUSCONSOLE_LDAP_BIND_DN": "cn=x"}, "BUSCONSOLE_LDAP_BIND_DN set without BUSCONSOLE_LDAP_URI"),
    ],
)
def test_bad_ldap_settings_fail_loudly(env: dict[str, str], says: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=says):
        ldap_settings_from_env(env)


def test_the_console_starts_with_a_directory_and_not_with_a_bad_one() -> None:
    probe = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.BUSCONSOLE_LDAP.uri, 'streams_app.accounts.ldap_backend.ConsoleLDAPBackend' in s.AUTHENTICATION_BACKENDS)"
    )
    done = start_process({**BASE, "BUSCONSOLE_LOCAL_LOGIN": "0"}, probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ldaps://ldap.example.com True"
    bad = start_process({**BASE, "BUSCONSOLE_LDAP_GROUP_TYPE": "memberOf"})
    assert bad.returncode != 0 and "BUSCONSOLE_LDAP_GROUP_TYPE must be one of" in bad.stderr
