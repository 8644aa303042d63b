"""Standing users for console tests, one per role, in the manner of healthchecks' ``hc/test.py``.

Every view test can then check each role: ``viewer_client`` reads, ``operator_client`` acts,
``admin_client_`` (also pytest-django's ``admin_client``, which logs in the ``admin_user`` defined
here) does the destructive things, ``client`` is anonymous, and ``outsider`` is an inactive account
that must get nowhere. All share the password ``PASSWORD``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
import redis
from django.conf import settings as django_settings
from django.contrib.auth.models import Group, User
from django.test import Client

from streams_app.accounts.tokens import token_create
from streams_app.redis_ops import client as redis_client
from tests.servers import RedisClusterServers

PASSWORD = "console-test-password-7"


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    """Hash passwords with MD5 in these tests: Django's default hasher costs ~0.3 s per login."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fresh_console_state(settings) -> Iterator[None]:
    """Every console test starts writable, with only the built-in DLQ conventions and no cached clients.

    ``redis_ops.client`` caches a client per connection name; a test that points a connection at
    another server (or stops one) must not leave that client to the tests after it.
    """
    settings.BUSCONSOLE_READ_ONLY = False
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    redis_client.reset()
    yield
    redis_client.reset()


@pytest.fixture
def on_cluster(settings, cluster) -> Iterator[str]:
    """Point the console's ``default`` connection at the real Redis Cluster (detected, not declared).

    Pages, the API, actions and jobs then run exactly as on standalone; the connection name is yielded.
    """
    settings.BUS_REDIS_URLS = {"default": cluster.url()}
    redis_client.reset()
    yield "default"
    redis_client.reset()


@pytest.fixture
def own_cluster(settings) -> Iterator[RedisClusterServers]:
    """A 3-primary cluster of this test's own, which it may kill a node of; the console pointed at it."""
    servers = RedisClusterServers().start()
    settings.BUS_REDIS_URLS = {"default": servers.url()}
    redis_client.reset()
    try:
        yield servers
    finally:
        redis_client.reset()
        servers.cleanup()


@pytest.fixture(autouse=True)
def _clean_login_throttle() -> Iterator[None]:
    """Drop failed-login counters before and after each test.

    They live in the console's Redis (db 1), which is shared by the whole session and not flushed
    between tests (the broker and channel layer live there too), and every test client logs in from
    127.0.0.1: a test that fails logins must not lock the address out for the tests that follow.
    """
    client = redis.Redis.from_url(django_settings.REDIS_URL)

    def clean() -> None:
        keys = list(client.scan_iter(match="*console:login-fail:*", count=1000))
        if keys:
            client.delete(*keys)

    clean()
    yield
    clean()
    client.close()


def make_user(username: str, *, groups: tuple[str, ...] = (), is_active: bool = True, **extra) -> User:
    """A user with ``PASSWORD`` in the given role groups.

    Migration 0002 creates the groups, but a ``transactional_db`` test (live server, websockets)
    flushes every table when it ends, the migration's rows included; get_or_create keeps the
    standing users right in the tests that run after one.
    """
    user = User.objects.create_user(username=username, password=PASSWORD, is_active=is_active, **extra)
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups])
    return user


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer(db) -> User:
    return make_user("vera-viewer", groups=("viewer",))


@pytest.fixture
def operator(db) -> User:
    return make_user("otto-operator", groups=("operator",))


@pytest.fixture
def admin_user(db) -> User:
    """A console admin by group membership (not a superuser, not staff): what the role checks see.

    Overrides pytest-django's fixture of the same name, so its ``admin_client`` is this user too.
    """
    return make_user("ada-admin", groups=("admin",))


@pytest.fixture
def outsider(db) -> User:
    """An inactive account: cannot log in, its API tokens are refused, its role is NONE."""
    return make_user("olaf-outsider", groups=("operator",), is_active=False)


@pytest.fixture
def viewer_client(viewer: User) -> Client:
    return logged_in(viewer)


@pytest.fixture
def operator_client(operator: User) -> Client:
    return logged_in(operator)


@pytest.fixture
def admin_client_(admin_user: User) -> Client:
    return logged_in(admin_user)


@pytest.fixture
def api_token(db) -> Callable[..., str]:
    """``api_token(user, name="test") -> raw token``, for ``Authorization: Bearer <token>``."""

    def create(user: User, name: str = "test") -> str:
        return token_create(user=user, name=name)[1]

    return create
