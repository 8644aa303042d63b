"""What the DLQ triage tests share: a DLQ of dead letters with known errors, groups and origins
(:func:`dead_letters`), the test's own count of them from a raw XRANGE (:func:`expected`), and readers of
the page's rows and the API's counts.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html import unescape

import redis
from django.test import Client

from pipeline.signatures import NO_ERROR, normalize_error
from tests.console.helpers import api, seg

DLQ = "{orders}:dlq"
ERRORS = [
    ("ValueError: order 17 not found", "billing", "orders"),
    ("ValueError: order 23 not found", "billing", "orders"),
    ("ValueError: order 5 not found", "shipping", "orders"),
    ("TimeoutError: upstream 'pay-api' after 30.5s", "billing", "orders.v2"),
    ("TimeoutError: upstream 'ledger' after 2s", "shipping", "orders.v2"),
    ("KeyError: 'sku'", "billing", "orders"),
]
#: Signatures written by hand (not by normalize_error): the spec function is checked against them.
HAND = {
    "ValueError: order <num> not found": 3,
    "TimeoutError: upstream <str> after <num>s": 2,
    "KeyError: <str>": 1,
    NO_ERROR: 2,  # the seed module's dead letters record no error
}


def dead_letters(r: redis.Redis, key: str = DLQ) -> None:
    """Our bus's dead letters (``dlq_*`` fields) and two of the seed module's (the message and ``_retries``),
    in one ``{orders}:dlq``, as after an upgrade from the seed module to the bus."""
    for n, (error, group, origin) in enumerate(ERRORS):
        r.xadd(key, {"type": "order.created", "data": json.dumps({"order_id": n}), "dlq_original_stream": origin,
                     "dlq_original_id": f"1-{n}", "dlq_group": group, "dlq_retries": "3", "dlq_error": error})  # fmt: skip
    for n in range(2):
        r.xadd(key, {"type": "order.paid", "data": json.dumps({"order_id": 100 + n}), "_retries": "3"})


def field_text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def expected(raw: list) -> dict[str, Counter]:
    """Counts by signature, group and origin from raw XRANGE entries, read here by each convention."""
    counts: dict[str, Counter] = {"signatures": Counter(), "groups": Counter(), "origins": Counter()}
    for _id, fields in raw:
        if b"dlq_original_stream" in fields:  # our bus
            error, group, origin = fields.get(b"dlq_error"), fields.get(b"dlq_group"), fields[b"dlq_original_stream"]
        else:  # the seed module: the key names the stream, nothing records the error or the group
            error, group, origin = None, None, b"orders"
        counts["signatures"][normalize_error(field_text(error))] += 1
        counts["groups"][field_text(group)] += 1
        counts["origins"][field_text(origin)] += 1
    return counts


def ids_where(raw: list, test) -> list[str]:
    return [i.decode() for i, f in raw if test(f)]


def triage_api(client: Client, key: str = DLQ, **params) -> dict:
    response = client.get(api(f"/c/default/dlq/{seg(key)}/triage/"), params)
    assert response.status_code == 200, response.content
    return response.json()


def api_counts(reply: dict) -> dict[str, Counter]:
    return {part: Counter({b["value"]: b["count"] for b in reply[part]}) for part in ("signatures", "groups", "origins")}


ROW = re.compile(r'<tr data-triage="(\w+)" data-label="([^"]*)" data-count="(\d+)" data-list="([^"]*)" data-requeue="([^"]*)"')


def page_rows(body: str) -> list[tuple[str, str, int, str, str]]:
    """(part, label, count, list URL, requeue URL) of each count on the page."""
    return [(part, unescape(label), int(n), unescape(lst), unescape(rq)) for part, label, n, lst, rq in ROW.findall(body)]
