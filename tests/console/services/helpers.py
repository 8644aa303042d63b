"""The bus the action tests act on, what a refused action must leave unchanged, and the table of actions.

``orders_bus`` writes the same small bus for every action test: ``orders`` (10 entries) with group
``billing``, where worker-1 owns 4 pending entries idle for 100 s and idle-1 owns none, and a 3-entry
eventbus DLQ ``orders:dlq``. ``snapshot`` reads back from Redis everything an action could change.
``OPERATIONS`` (claim, ack, rewind, DLQ, replay) and ``ADMIN_ACTIONS`` (delete a consumer or group,
trim, delete entries) say how each action is posted from a page and through the API, which role it
needs and what a success answers; the role matrix, read-only and request-guard tests all read them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import redis

from tests.console.helpers import api, consumer_url, dlq_url, group_url, stream_url

ROLES = ["viewer", "operator", "admin_user"]


def eventbus_dead_letter(i: int, original_id: str, *, stream: str = "orders") -> dict[str, str]:
    return {
        "type": "order.created",
        "data": json.dumps({"order_id": 100 + i}),
        "id": f"evt-{i}",
        "_retries": "5",
        "dlq_original_stream": stream,
        "dlq_original_id": original_id,
        "dlq_group": "billing",
        "dlq_error": f"ValueError: card {i} declined",
        "dlq_traceback": "Traceback (most recent call last):\n  ...\nValueError",
        "dlq_retries": "5",
        "dlq_failed_at": "1700000000100",
    }


def orders_bus(r: redis.Redis) -> SimpleNamespace:
    """``orders`` with group ``billing`` (4 entries pending on worker-1, idle 100 s; idle-1 owns none) and a 3-entry DLQ."""
    ids = [r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": i})}).decode() for i in range(10)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
    r.xclaim("orders", "billing", "worker-1", 0, ids[:4], idle=100_000, justid=True)
    r.execute_command("XGROUP", "CREATECONSUMER", "orders", "billing", "idle-1")
    dlq_ids = [r.xadd("orders:dlq", eventbus_dead_letter(i, ids[i])).decode() for i in range(3)]
    return SimpleNamespace(r=r, ids=ids, dlq_ids=dlq_ids)


def consumers(r: redis.Redis, key: str = "orders", group: str = "billing") -> dict[str, int]:
    """{consumer: pending} as XINFO CONSUMERS says."""
    return {c["name"].decode(): c["pending"] for c in r.xinfo_consumers(key, group)}


def snapshot(r: redis.Redis) -> tuple:
    """What a refused action must leave unchanged: entries, DLQ depth, groups, their consumers and PEL."""
    groups = [(g["name"], g["last-delivered-id"], g["pending"], g["consumers"]) for g in r.xinfo_groups("orders")]
    per_group = {g[0]: consumers(r, "orders", g[0].decode()) for g in groups}
    pending = r.xpending_range("orders", "billing", "-", "+", 100)
    return (
        r.xlen("orders"),
        [e[0] for e in r.xrange("orders")],
        r.xlen("orders:dlq") if r.exists("orders:dlq") else 0,
        groups,
        per_group,
        [(p["message_id"], p["consumer"]) for p in pending],
    )


@dataclass(frozen=True)
class Action:
    name: str  # the audit action
    html: Callable[[SimpleNamespace], tuple[str, dict]]
    api: Callable[[SimpleNamespace], tuple[str, dict]] | None
    needs: str = "operator"  # the least role allowed to run it: "operator" or "admin"
    stream: str = "orders"  # the target stream its audit row names
    html_ok: int = 302
    api_ok: int = 200

    def allowed(self, role: str) -> bool:
        """Whether the standing user ``role`` (a fixture name in ``ROLES``) may run it."""
        return role == "admin_user" or (role == "operator" and self.needs == "operator")


OPERATIONS = [
    Action(
        "claim",
        lambda b: (group_url("orders", "billing") + "claim/", {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
        lambda b: (api(group_url("orders", "billing") + "claim"), {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
    ),
    Action(
        "autoclaim",
        lambda b: (group_url("orders", "billing") + "autoclaim/", {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
        lambda b: (api(group_url("orders", "billing") + "autoclaim"), {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
    ),
    Action(
        "ack",
        lambda b: (group_url("orders", "billing") + "ack/", {"ids": [b.ids[1]], "confirm": "1"}),
        lambda b: (api(group_url("orders", "billing") + "ack"), {"ids": [b.ids[1]]}),
    ),
    Action(
        "rewind.preview",
        lambda b: (group_url("orders", "billing") + "rewind/preview/", {"to": "0"}),
        lambda b: (api(group_url("orders", "billing") + "rewind"), {"to": "0", "dry_run": True}),
        html_ok=200,
    ),
    Action(
        "rewind",
        lambda b: (group_url("orders", "billing") + "rewind/", {"to": b.ids[5]}),
        lambda b: (api(group_url("orders", "billing") + "rewind"), {"to": b.ids[5]}),
    ),
    Action(
        "dlq.requeue",
        lambda b: (dlq_url("orders:dlq") + "requeue/", {"ids": [b.dlq_ids[0]]}),
        lambda b: (api(dlq_url("orders:dlq") + "requeue"), {"ids": [b.dlq_ids[0]]}),
        stream="orders:dlq",
    ),
    Action(
        "dlq.requeue_all",
        lambda b: (dlq_url("orders:dlq") + "requeue/", {"all": "1", "up_to": b.dlq_ids[-1]}),
        lambda b: (api(dlq_url("orders:dlq") + "requeue"), {"all": True, "up_to": b.dlq_ids[-1]}),
        stream="orders:dlq",
        api_ok=202,
    ),
    Action(
        "dlq.delete",
        lambda b: (dlq_url("orders:dlq") + "delete/", {"ids": [b.dlq_ids[1]]}),
        lambda b: (api(dlq_url("orders:dlq") + "delete"), {"ids": [b.dlq_ids[1]]}),
        needs="admin",
        stream="orders:dlq",
    ),
    Action(
        "dlq.purge",
        lambda b: (dlq_url("orders:dlq") + "purge/", {"up_to": b.dlq_ids[-1], "confirm": "orders:dlq"}),
        lambda b: (api(dlq_url("orders:dlq") + "purge"), {"up_to": b.dlq_ids[-1], "confirm": "orders:dlq"}),
        needs="admin",
        stream="orders:dlq",
    ),
    Action(
        "replay.count",
        lambda b: (stream_url("orders") + "replay/count/", {"start": "-", "end": "+"}),
        lambda b: (api(stream_url("orders") + "replay"), {"start": "-", "end": "+", "dry_run": True}),
        html_ok=200,
    ),
    Action(
        "replay",
        lambda b: (stream_url("orders") + "replay/", {"start": b.ids[0], "end": b.ids[2]}),
        lambda b: (api(stream_url("orders") + "replay"), {"start": b.ids[0], "end": b.ids[2]}),
        api_ok=202,
    ),
]

ADMIN_ACTIONS = [
    Action(
        "consumer.delete.preview",
        lambda b: (consumer_url("orders", "billing", "worker-1") + "delete/preview/", {}),
        None,
        needs="admin",
        html_ok=200,
    ),
    Action(
        "consumer.delete",
        lambda b: (consumer_url("orders", "billing", "worker-1") + "delete/", {"force": "1"}),
        lambda b: (api(consumer_url("orders", "billing", "worker-1") + "delete"), {"force": True}),
        needs="admin",
    ),
    Action(
        "group.delete",
        lambda b: (group_url("orders", "billing") + "delete/", {"confirm": "billing"}),
        lambda b: (api(group_url("orders", "billing") + "delete"), {"confirm": "billing"}),
        needs="admin",
    ),
    Action(
        "stream.trim.preview",
        lambda b: (stream_url("orders") + "trim/preview/", {"maxlen": "5"}),
        lambda b: (api(stream_url("orders") + "trim"), {"maxlen": 5, "dry_run": True}),
        needs="admin",
        html_ok=200,
    ),
    Action(
        "stream.trim",
        lambda b: (stream_url("orders") + "trim/", {"minid": b.ids[3]}),
        lambda b: (api(stream_url("orders") + "trim"), {"minid": b.ids[3]}),
        needs="admin",
    ),
    Action(
        "stream.delete.preview",
        lambda b: (stream_url("orders") + "delete/preview/", {"ids_text": b.ids[0]}),
        lambda b: (api(stream_url("orders") + "delete"), {"ids": [b.ids[0]], "dry_run": True}),
        needs="admin",
        html_ok=200,
    ),
    Action(
        "stream.delete",
        lambda b: (stream_url("orders") + "delete/", {"ids": [b.ids[0], b.ids[1]]}),
        lambda b: (api(stream_url("orders") + "delete"), {"ids": [b.ids[0], b.ids[1]]}),
        needs="admin",
    ),
]
API_ADMIN_ACTIONS = [a for a in ADMIN_ACTIONS if a.api is not None]


def action_id(action: Action) -> str:
    return action.name
