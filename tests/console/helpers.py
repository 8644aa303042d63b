"""Helpers shared by the console's view tests: the one key-encoding helper (``seg``), the addresses of
pages and API calls, and a JSON post with an API token. Polling lives in ``tests.polling``.

The URLs are spelled out rather than reversed: the tests pin the addresses that bookmarks, links in
alerts and scripts use, so a renamed route that moves one must fail here.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from django.test import Client

CONN = "default"


def seg(key: str | bytes) -> str:
    """One path segment for a key or name: every byte but the unreserved ones escaped, ``/`` included."""
    return quote(key.encode() if isinstance(key, str) else key, safe="")


def stream_url(key: str | bytes, rest: str = "") -> str:
    """The page of a stream, or of ``rest`` under it (``groups/<g>/``, ``tail/``)."""
    return f"/c/{CONN}/streams/{seg(key)}/{rest}"


def group_url(key: str, group: str) -> str:
    return f"{stream_url(key)}groups/{seg(group)}/"


def consumer_url(key: str, group: str, consumer: str) -> str:
    return f"{group_url(key, group)}consumers/{seg(consumer)}/"


def dlq_url(key: str | bytes) -> str:
    return f"/c/{CONN}/dlq/{seg(key)}/"


def api(path: str) -> str:
    return "/api/v1" + path


def stream_api(key: str | bytes, rest: str = "") -> str:
    """The API address of a stream, or of ``rest`` under it (``entries/``, ``groups/<g>/pending/``)."""
    return api(f"/c/{CONN}/streams/{seg(key)}/{rest}")


def bearer(token: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def post_json(url: str, body: dict, token: str, *, web: Client | None = None):
    """POST ``body`` as JSON with an API token, from a fresh anonymous client unless ``web`` is given."""
    return (web or Client()).post(url, json.dumps(body), content_type="application/json", **bearer(token))
