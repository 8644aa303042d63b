"""The ``redis+sentinel://`` URL: what it names, what is refused at start-up, and who accepts it.

Expected values are the URL's own parts, written out by hand; refusals must name the fault.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from busconsole.env import parse_connections
from eventbus.connection import url_problem
from eventbus.sentinel import parse, sentinel_problem


def test_a_sentinel_url_names_the_sentinels_the_service_the_database_and_both_logins() -> None:
    url = "redis+sentinel://app:p%40ss@10.0.0.1:26379,sentinel-b,[::1]:26380/orders-main/3?sentinel_password=s%26s"
    got = parse(url)
    assert got.sentinels == (("10.0.0.1", 26379), ("sentinel-b", 26379), ("::1", 26380))
    assert (got.service, got.db) == ("orders-main", 3)
    assert (got.username, got.password) == ("app", "p@ss")
    assert (got.sentinel_username, got.sentinel_password) == (None, "s&s")
    assert got.tls == {}
    assert got.where == "orders-main via 10.0.0.1:26379,sentinel-b:26379,[::1]:26380"
    assert "p@ss" not in got.where and "app" not in got.where


def test_the_database_defaults_to_0_and_a_password_alone_is_the_default_user() -> None:
    got = parse("redis+sentinel://:secret@127.0.0.1:26379/mymaster")
    assert (got.db, got.username, got.password) == (0, None, "secret")


@pytest.mark.parametrize(("url", "fault"), [
    ("redis+sentinel://127.0.0.1:26379", "names no service"),
    ("redis+sentinel://127.0.0.1:26379/", "names no service"),
    ("redis+sentinel:///mymaster/0", "names no sentinel"),
    ("redis+sentinel://127.0.0.1:notaport/mymaster", "no usable port"),
    ("redis+sentinel://127.0.0.1:26379/mymaster/orders", "a database is a number"),
    ("redis+sentinel://127.0.0.1:26379/mymaster/0/extra", "expected /<service>/<db>"),
    ("redis+sentinel://127.0.0.1:26379/mymaster/0?cluster=yes", "takes only"),
    ("redis+sentinel://127.0.0.1:26379/mymaster/0?ssl_ca_certs=/etc/ca.pem", "rediss"),
])
def test_a_sentinel_url_that_cannot_work_is_refused_with_the_reason(url: str, fault: str) -> None:
    problem = sentinel_problem(url)
    assert problem is not None and fault in problem, problem


def test_the_settings_take_a_sentinel_url_and_refuse_a_broken_one_at_start_up() -> None:
    good = "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster/0"
    assert parse_connections(f"main={good}") == {"main": good}
    # The commas between the sentinels are the URL's own, not the list's.
    both = parse_connections(f"main={good}, spare=redis://127.0.0.1:6379/1, last={good}?sentinel_password=x")
    assert both == {"main": good, "spare": "redis://127.0.0.1:6379/1", "last": f"{good}?sentinel_password=x"}
    with pytest.raises(ImproperlyConfigured, match="main .*names no service"):
        parse_connections("main=redis+sentinel://127.0.0.1:26379")


def test_the_bus_command_line_takes_a_sentinel_url_and_says_what_is_wrong_with_a_broken_one() -> None:
    assert url_problem("redis+sentinel://127.0.0.1:26379/mymaster/2") is None
    assert "names no service" in (url_problem("redis+sentinel://127.0.0.1:26379") or "")
