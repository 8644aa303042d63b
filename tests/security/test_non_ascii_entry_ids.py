"""Entry IDs take ASCII digits only. Other Unicode decimal digits (Arabic-Indic, fullwidth, Bengali), which
Python's ``int()`` would accept, are a 400 naming the parameter: the API's ``after``, ``before`` and
``at``, the pending list and the stream page. ASCII IDs still page.

Real redis-server; expected IDs come from its XADD replies.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from tests.console.helpers import stream_api, stream_url

NON_ASCII_IDS = ["١-0", "1-١", "１２-0", "٣", "12-３", "৭-1"]


@pytest.mark.parametrize("value", NON_ASCII_IDS)
@pytest.mark.parametrize("param", ["after", "before"])
def test_api_refuses_non_ascii_digits_in_entry_ids(viewer_client: Client, r: redis.Redis, value: str,
                                                   param: str) -> None:
    r.xadd("s", {"a": "1"})
    response = viewer_client.get(stream_api("s", "entries/"), {param: value})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "bad_request"
    assert param in error["message"]


@pytest.mark.parametrize("value", NON_ASCII_IDS)
def test_api_refuses_non_ascii_digits_in_at(viewer_client: Client, r: redis.Redis, value: str) -> None:
    r.xadd("s", {"a": "1"})
    response = viewer_client.get(stream_api("s", "entries/"), {"at": value})
    assert response.status_code == 400, response.content
    assert "at" in response.json()["error"]["message"]


def test_pending_and_pages_refuse_non_ascii_digits(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xgroup_create("s", "g", id="0")
    pending = viewer_client.get(stream_api("s", "groups/g/pending/"), {"after": "١-0"})
    assert pending.status_code == 400
    assert "after" in pending.json()["error"]["message"]
    page = viewer_client.get(stream_url("s"), {"after": "١-0"})
    assert page.status_code == 400
    assert "after" in page.content.decode()


def test_ascii_ids_still_work(viewer_client: Client, r: redis.Redis) -> None:
    first = r.xadd("s", {"a": "1"}).decode()
    second = r.xadd("s", {"a": "2"}).decode()
    response = viewer_client.get(stream_api("s", "entries/"), {"after": first, "order": "asc"})
    assert [e["id"] for e in response.json()["entries"]] == [second]
