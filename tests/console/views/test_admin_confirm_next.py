"""The admin confirm pages (trim, delete entries, delete a consumer) keep ``next``, as rewind and purge do:
the operator who pressed the button on a filtered or paged page returns to that very page, by the confirm
page's Cancel link and after the action. ``next`` must be a path on this site; anything else falls back
to the action's own page.

Each test starts where an operator does: the page with the button, read over HTTP; the form's fields are
taken from its HTML and posted as a browser would, and what Redis holds after is read with redis-py.
"""

from __future__ import annotations

import html
import re

import pytest
import redis
from django.test import Client

from tests.console.helpers import consumer_url, group_url, stream_url


def form_fields(body: str, action: str) -> list[tuple[str, str]]:
    """The hidden inputs of the form posting to ``action`` (the first one), unescaped, but its CSRF token
    (the test client does not check it)."""
    start = body.index(f'action="{action}"')
    form = body[start : body.index("</form>", start)]
    found = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form)
    return [(n, html.unescape(v)) for n, v in found if n != "csrfmiddlewaretoken"]


def cancel_link(body: str) -> str:
    [href] = re.findall(r'<a href="([^"]+)">Cancel</a>', body)[:1]
    return html.unescape(href)


@pytest.fixture
def entries(r: redis.Redis) -> list[str]:
    return [r.xadd("orders", {"n": str(i)}).decode() for i in range(30)]


def test_trim_returns_to_the_page_it_was_asked_from(admin_client_: Client, r: redis.Redis, entries) -> None:
    page = stream_url("orders") + f"?order=asc&after={entries[4]}"
    body = admin_client_.get(page).content.decode()
    fields = dict(form_fields(body, stream_url("orders") + "trim/preview/"))
    assert fields["next"] == page
    preview = admin_client_.post(stream_url("orders") + "trim/preview/", {**fields, "minid": entries[10]})
    confirm = preview.content.decode()
    assert preview.status_code == 200 and cancel_link(confirm) == page
    posted = dict(form_fields(confirm, stream_url("orders") + "trim/"))
    assert posted == {"minid": entries[10], "next": page}
    done = admin_client_.post(stream_url("orders") + "trim/", posted)
    assert done.status_code == 302 and done["Location"] == page
    assert [i.decode() for i, _ in r.xrange("orders")] == entries[10:]


def test_entry_delete_returns_to_the_page_it_was_asked_from(
    admin_client_: Client, r: redis.Redis, entries
) -> None:
    page = stream_url("orders") + f"?before={entries[20]}"
    body = admin_client_.get(page).content.decode()
    fields = form_fields(body, stream_url("orders") + "delete/preview/")
    assert fields == [("next", page)]
    preview = admin_client_.post(
        stream_url("orders") + "delete/preview/", {"next": page, "ids_text": "\n".join(entries[:2])}
    )
    confirm = preview.content.decode()
    assert cancel_link(confirm) == page
    posted = form_fields(confirm, stream_url("orders") + "delete/")
    assert sorted(posted) == sorted([("next", page), ("ids", entries[0]), ("ids", entries[1])])
    data: dict[str, list[str]] = {}
    for name, value in posted:
        data.setdefault(name, []).append(value)
    done = admin_client_.post(stream_url("orders") + "delete/", data)
    assert done.status_code == 302 and done["Location"] == page
    assert r.xlen("orders") == 28 and not r.xrange("orders", entries[0], entries[1])


def test_consumer_delete_returns_to_the_page_it_was_asked_from(
    admin_client_: Client, r: redis.Redis, entries
) -> None:
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=2)
    r.xreadgroup("billing", "worker-2", {"orders": ">"}, count=1)
    page = group_url("orders", "billing") + "?consumer=worker-1"
    body = admin_client_.get(page).content.decode()
    action = consumer_url("orders", "billing", "worker-1") + "delete/preview/"
    fields = dict(form_fields(body, action))
    assert fields == {"next": page}
    confirm = admin_client_.post(action, fields).content.decode()
    assert cancel_link(confirm) == page
    posted = dict(form_fields(confirm, consumer_url("orders", "billing", "worker-1") + "delete/"))
    assert posted == {"next": page}
    done = admin_client_.post(
        consumer_url("orders", "billing", "worker-1") + "delete/", {**posted, "force": "1"}
    )
    assert done.status_code == 302 and done["Location"] == page
    assert [c["name"] for c in r.xinfo_consumers("orders", "billing")] == [b"worker-2"]


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)"])
def test_next_must_be_a_path_on_this_site(admin_client_: Client, r: redis.Redis, entries, target) -> None:
    preview = admin_client_.post(stream_url("orders") + "trim/preview/", {"maxlen": "10", "next": target})
    confirm = preview.content.decode()
    assert cancel_link(confirm) == stream_url("orders") and target not in confirm
    done = admin_client_.post(stream_url("orders") + "trim/", {"maxlen": "10", "next": target})
    assert done.status_code == 302 and done["Location"] == stream_url("orders")
