"""The masking matrix's data: canary values under masking rules, a row per console route saying whether its
page shows entry bytes (:data:`ROWS`), the route matrix's world with the canaries written in
(:func:`world`, which needs the route matrix's own ``world`` fixture as ``route_world`` beside it), and
the checks of a response: what leaked, whether the masked form shows, how many reveals were audited.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace

import msgpack
import pytest
import redis
from django.contrib.auth.models import User
from django.utils import timezone

from busconsole.env import parse_mask_rules
from streams_app.audit.models import AuditEvent
from streams_app.lake.models import ErrorSignatureRollup
from streams_app.redis_ops.retries import retry_set
from tests.console.helpers import CONN
from tests.console.masking.test_masked_paths import expected_hash
from tests.security.routes import ROUTES, World
from tests.security.routes import world as route_world  # noqa: F401 - the fixture

SSN = "canary-ssn-7c1e9d"  # data.ssn of orders: masked
CARD = "canary-card-52a8"  # the whole card field of orders: hashed
ERROR = "canary-error-31f0"  # dlq_error of orders:dlq: masked
CANARIES = (SSN, CARD, ERROR)
MASK = "••••"

RULES = [
    {"stream": "orders", "field": "data.ssn", "action": "mask"},
    {"stream": "orders", "field": "card", "action": "hash"},
    {"stream": "orders:dlq", "field": "dlq_error", "action": "mask"},
    {"stream": "progress:*", "field": "data.ssn", "action": "mask"},
]


@dataclass(frozen=True)
class Row:
    """``shows``: the page shows entry bytes (so the masked form must be there); ``query``: what the
    GET carries to reach them."""

    shows: bool = False
    query: str = ""


NONE = Row()
SHOWS = Row(shows=True)

#: A route about no stream shows no entry bytes, unless it is listed below (as /reports/ is).
ROWS: dict[str, Row] = dict.fromkeys((route for route in ROUTES if "<seg:key>" not in route), NONE)
#: A route about a stream says whether it shows the stream's entries: a new one must be added here.
ROWS.update(
    dict.fromkeys(
        [
            "c/<conn:conn>/streams/<seg:key>/charts/",
            "c/<conn:conn>/streams/<seg:key>/handlers/",
            "c/<conn:conn>/streams/<seg:key>/replay/count/",
            "c/<conn:conn>/streams/<seg:key>/replay/",
            "c/<conn:conn>/streams/<seg:key>/trim/preview/",
            "c/<conn:conn>/streams/<seg:key>/trim/",
            "c/<conn:conn>/streams/<seg:key>/delete/preview/",
            "c/<conn:conn>/streams/<seg:key>/delete/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/charts/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/handlers/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/confirm/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/preview/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/preview/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/",
            "c/<conn:conn>/dlq/<seg:key>/charts/",
            "c/<conn:conn>/dlq/<seg:key>/requeue/",
            "c/<conn:conn>/dlq/<seg:key>/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/delete/",
            "c/<conn:conn>/dlq/<seg:key>/purge/",
            "c/<conn:conn>/streams/<seg:key>/export/job/",
            "c/<conn:conn>/streams/<seg:key>/retries/retry/",
            "c/<conn:conn>/streams/<seg:key>/retries/dead-letter/",
            "c/<conn:conn>/streams/<seg:key>/retries/delete/",
            "c/<conn:conn>/streams/<seg:key>/retries/all/preview/",
            "c/<conn:conn>/streams/<seg:key>/tail/",
            # the incident timeline: snapshots, alerts, actions (no parameters) and annotations, no entry
            "c/<conn:conn>/streams/<seg:key>/timeline/",
            "c/<conn:conn>/streams/<seg:key>/timeline/annotate/",
            "c/<conn:conn>/dlq/<seg:key>/search/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/search/requeue/",
            "c/<conn:conn>/streams/<seg:key>/search/replay/confirm/",
            "c/<conn:conn>/streams/<seg:key>/search/replay/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/confirm/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/replay",
            "api/v1/c/<conn:conn>/streams/<seg:key>/trim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/delete",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/requeue",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/purge",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/retry",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/dead-letter",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/search/requeue",
            # a triage count's "requeue these": the confirm page names the filter and a count, no entry
            "c/<conn:conn>/dlq/<seg:key>/triage/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/triage/requeue/",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/requeue",
        ],
        NONE,
    )
)
ROWS.update(
    {
        "c/<conn:conn>/streams/<seg:key>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/raw/": Row(True, "?field=1"),  # data
        # a pending row previews its message: its type and the start of its payload, masked
        "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/": SHOWS,
        "c/<conn:conn>/dlq/<seg:key>/": SHOWS,
        "c/<conn:conn>/dlq/<seg:key>/entries/<eid:entry_id>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/add/": SHOWS,  # prefilled from the newest entry
        "c/<conn:conn>/streams/<seg:key>/export/": Row(True, "?format=ndjson"),
        "c/<conn:conn>/streams/<seg:key>/retries/": SHOWS,
        "reports/": SHOWS,  # a report's error signature and example
        "c/<conn:conn>/progress/<seg:key>/events/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/search/": Row(True, "?q=t1"),  # a search step: matches shown
        "c/<conn:conn>/dlq/<seg:key>/search/": Row(True, "?q=t1"),
        "api/v1/c/<conn:conn>/streams/<seg:key>/entries/": SHOWS,
        "api/v1/c/<conn:conn>/dlq/<seg:key>/": SHOWS,  # each dead letter's payload and its preview
        "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/pending/": SHOWS,  # each row's preview
        "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/": SHOWS,  # the error signatures, from masked errors
        "api/v1/c/<conn:conn>/streams/<seg:key>/retries/": SHOWS,
        "api/v1/c/<conn:conn>/streams/<seg:key>/export": Row(True, "?format=ndjson"),
        "api/v1/c/<conn:conn>/streams/<seg:key>/search/": Row(True, "?q=t1"),
        # the journey of the event the search finds: its entries' fields, its dead letter's error, masked
        "c/<conn:conn>/journey/": Row(True, "?q=t1&stream=orders"),
        "api/v1/c/<conn:conn>/journey/": Row(True, "?q=t1&stream=orders"),
    }
)
ROWS.update({route + "/": row for route, row in list(ROWS.items()) if route + "/" in ROUTES and route[-1] != "/"})


@pytest.fixture
def world(route_world: World, settings, r: redis.Redis) -> World:  # noqa: F811
    """The route matrix's world, with canaries under rules in the streams its routes name."""
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(RULES))
    settings.BUSCONSOLE_UNMASKED_ROLES = ["admin"]
    ids = [
        r.xadd("orders", {"type": f"t{n}", "data": json.dumps({"ssn": SSN, "n": n}), "card": CARD}).decode()
        for n in range(1, 4)
    ]
    # a payload encoded twice: the rule's path cannot be walked, so the whole field is masked
    r.xadd("orders", {"type": "t9", "data": json.dumps(json.dumps({"ssn": SSN})), "card": CARD})
    r.xreadgroup("workers", "c1", {"orders": ">"}, count=100)  # the canary entries pending too
    dead = r.xadd(
        "orders:dlq",
        {
            "type": "t1",
            "data": json.dumps({"ssn": SSN}),  # masked by the rule of its origin, orders
            "card": CARD,
            "dlq_original_stream": "orders",
            "dlq_original_id": ids[0],
            "dlq_group": "workers",
            "dlq_error": f"ValueError: {ERROR}",
        },
    ).decode()
    member = msgpack.packb([b"type", b"t1", b"data", json.dumps({"ssn": SSN}).encode(), b"card", CARD.encode(),
                            b"id", b"ev-1", b"_retries", b"1", b"_group", b"workers"])  # fmt: skip
    r.zadd(retry_set(b"orders").key, {member: 4_102_444_800_000})  # due in 2100
    # its failure, as the worker records it: the retries page shows this error as the DLQ's would be
    r.xadd("{orders}:metrics", {"event": "failed", "stream": "orders", "group": "workers", "type": "t1",
                                "event_id": "ev-1", "entry_id": ids[0], "error": f"ValueError: {ERROR}",
                                "count": "1"})  # fmt: skip
    # a report made by a run before the rule existed: /reports/ masks it by today's rules
    ErrorSignatureRollup.objects.create(
        connection=CONN, stream=b"orders", stream_hash="a" * 64, stream_text="orders", dlq=b"orders:dlq",
        dlq_hash="b" * 64, dlq_text="orders:dlq", signature=f"ValueError: {ERROR}", search=ERROR, count=1,
        first_seen=timezone.now(), last_seen=timezone.now(), example_error=f"ValueError: {ERROR}",
        example_entry_id=dead, rank=1,
    )  # fmt: skip
    # the progress SSE of orders replays up to a terminal event, then ends
    r.xadd("orders", {"event": "done", "data": json.dumps({"ssn": SSN, "n": 0}), "card": CARD})
    return replace(route_world, values={**route_world.values, "entry_id": ids[0], "dlq_entry_id": dead})


# --------------------------------------------------------------------------------------------- checks


def body_of(response) -> bytes:
    if not response.streaming:
        return response.content
    if response.is_async:  # the SSE endpoint's async iterator, read to its end (the terminal event)

        async def read() -> bytes:
            return b"".join([part async for part in response.streaming_content])

        return asyncio.run(read())
    return b"".join(response.streaming_content)


def text_of(response) -> str:
    """The body as text, with JSON's escapes of non-ASCII undone (``\\u2022``)."""
    body = body_of(response)
    text = body.decode("utf-8", "replace")
    return text + "\n" + text.encode().decode("unicode_escape", "replace") if "\\u" in text else text


def leaked(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


def shows_masked(text: str) -> bool:
    return MASK in text or expected_hash(CARD) in text


def reveals(user: User) -> int:
    return AuditEvent.objects.filter(action="payload.reveal", username=user.get_username()).count()
