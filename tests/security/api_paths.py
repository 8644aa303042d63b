"""The JSON API's routes as the URL resolver has them (:func:`api_patterns`), each filled with plain
values (:func:`filled`), so a new body-taking or action route is covered without a new row in a test;
and :func:`post_raw`, a JSON body posted as written (a key twice, say) with a bearer token.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from tests.console.helpers import bearer

CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
VALUES = {"conn": "default", "seg": "orders", "int": "1"}


def api_patterns() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list, prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for item in patterns:
            route = prefix + str(item.pattern)
            if isinstance(item, URLResolver):
                yield from walk(item.url_patterns, route)
            elif route.startswith("api/v1/"):
                yield route, item

    yield from walk(get_resolver().url_patterns, "")


def filled(route: str) -> str:
    return "/" + CONVERTER.sub(lambda m: VALUES[m.group(1) or "str"], route)


def post_raw(url: str, raw: str, token: str):
    return Client().post(url, raw, content_type="application/json", **bearer(token))
