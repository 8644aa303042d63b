"""Authorization headers that are not the console's, anonymous API posts, and who may enter ``/admin/``.

An auth proxy in front of the console may forward its own ``Authorization: Basic ...``; the session decides
who a page is for, so such a header must change nothing. An anonymous API call is told to authenticate
(401), not that a CSRF token is missing. The Django admin is for console admins (the ``admin`` group or
superusers), whatever their ``is_staff`` flag says; viewers and operators stay out.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.console.conftest import logged_in, make_user
from tests.console.helpers import api, bearer, group_url, stream_url

BASIC = {"HTTP_AUTHORIZATION": "Basic dXNlcjpwYXNzd29yZA=="}


@pytest.mark.parametrize("url", ["/", "/tokens/", "/audit/", "/jobs/"])
def test_a_proxy_basic_header_does_not_break_session_pages(viewer_client: Client, url: str) -> None:
    response = viewer_client.get(url, **BASIC)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")


def test_a_proxy_basic_header_sends_anonymous_users_to_the_login_page(client: Client) -> None:
    response = client.get("/tokens/", **BASIC)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_a_proxy_basic_header_leaves_the_api_to_the_session(viewer_client: Client, client: Client) -> None:
    assert viewer_client.get(api("/connections/"), **BASIC).status_code == 200
    anonymous = client.get(api("/connections/"), **BASIC)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"


def test_a_bad_bearer_token_on_the_api_is_still_a_401(viewer_client: Client) -> None:
    response = viewer_client.get(api("/connections/"), **bearer("bct_" + "A" * 40))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_an_anonymous_api_post_is_a_401_not_a_csrf_failure(db) -> None:
    web = Client(enforce_csrf_checks=True)
    url = api(group_url("orders", "billing") + "ack")
    response = web.post(url, json.dumps({"ids": ["1-0"]}), content_type="application/json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_a_session_api_post_without_csrf_is_still_refused(operator: User) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    url = api(group_url("orders", "billing") + "ack")
    response = web.post(url, json.dumps({"ids": ["1-0"]}), content_type="application/json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "csrf_failed"


def test_an_anonymous_html_post_is_sent_to_log_in(db) -> None:
    web = Client(enforce_csrf_checks=True)
    response = web.post(stream_url("orders") + "trim/", {"maxlen": "1"})
    assert response.status_code in (302, 403)  # never a JSON 401 on a page


# ------------------------------------------------------------------------------------- /admin/


def test_console_admins_who_are_not_staff_manage_users_in_the_admin(admin_user: User) -> None:
    assert not admin_user.is_staff
    web = logged_in(admin_user)
    assert web.get("/admin/").status_code == 200
    assert web.get("/admin/auth/user/").status_code == 200
    web.get("/admin/auth/user/add/")
    created = web.post(
        "/admin/auth/user/add/",
        {"username": "new-hire", "password1": "a-long-pass-phrase-1", "password2": "a-long-pass-phrase-1",
         "usable_password": "true"},
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    assert User.objects.filter(username="new-hire").exists()


def test_superusers_reach_the_admin(db) -> None:
    root = make_user("root-not-staff", is_superuser=True)
    assert logged_in(root).get("/admin/auth/user/").status_code == 200


@pytest.mark.parametrize("groups, staff", [(("viewer",), False), (("operator",), False), (("viewer",), True),
                                           ((), True)])
def test_viewers_and_operators_stay_out_of_the_admin_even_when_staff(db, groups, staff: bool) -> None:
    user = make_user(f"u-{'-'.join(groups) or 'none'}-{staff}", groups=groups, is_staff=staff)
    web = logged_in(user)
    for url in ("/admin/", "/admin/auth/user/", "/admin/auth/user/add/"):
        response = web.get(url, follow=True)
        assert response.status_code == 403, url
    before = User.objects.count()
    web.post("/admin/auth/user/add/", {"username": "sneaky", "password1": "a-long-pass-phrase-1",
                                       "password2": "a-long-pass-phrase-1"})
    assert User.objects.count() == before


def test_inactive_console_admins_stay_out(db) -> None:
    user = make_user("gone-admin", groups=("admin",), is_active=False)
    web = Client()
    web.force_login(user)
    assert web.get("/admin/auth/user/").status_code == 302
