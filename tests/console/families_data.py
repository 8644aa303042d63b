"""A keyspace of a few thousand keys in several shapes, for the stream-family tests, and the expected
grouping written here, independently of ``eventbus.families``: configured globs are matched by Redis
itself (``SCAN MATCH``), shapes by plain ``bytes.split`` and :mod:`uuid`.

Shapes: ``progress:<n>`` (one to three entries, most with a TTL, as the seed's progress streams),
``task:<n>:events`` (some with a group and pending entries) and their bus DLQs ``{task:<n>:events}:dlq``,
``job:<uuid>``, ``tenant:<name>:<n>`` and ``audit:<n>`` under configured families, and keys that are
families of their own (``orders`` with its DLQ ``{orders}:dlq``, ``orders:created``, ``progress:a:b``,
a key with glob bytes in it); plus keys of other types the pass must not count.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass

import redis

from eventbus.text import id_order

#: BUSCONSOLE_STREAM_FAMILIES for these tests: "tenant:*" by its glob, "audit:*" under a name.
CONFIGURED = json.dumps(["tenant:*", {"name": "audit trail", "match": "audit:*"}])
CONFIGURED_GLOBS = [b"tenant:*", b"audit:*"]
PROGRESS, TASKS, JOBS, TENANTS, AUDITS = 1500, 600, 200, 300, 150
ODD = b"we[i]rd*?"  # a family of its own: its glob escapes the glob bytes
ODD_GLOB = b"we\\[i\\]rd\\*\\?"


def populate(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for n in range(PROGRESS):
        key = f"progress:{n}"
        for step in range(1 + n % 3):
            pipe.xadd(key, {"event": "delta", "data": json.dumps({"step": step})})
        if n % 4:
            pipe.expire(key, 3600)
    for n in range(TASKS):
        pipe.xadd(f"task:{n}:events", {"type": "task.started", "n": str(n)})
        pipe.xadd(f"task:{n}:events", {"type": "task.done", "n": str(n)})
        if n % 10 == 0:
            pipe.xadd(f"{{task:{n}:events}}:dlq", {"dlq_original_stream": f"task:{n}:events", "dlq_error": "boom"})
    for n in range(JOBS):
        pipe.xadd(f"job:{uuid.UUID(int=n + 1)}", {"n": str(n)})
    for n in range(TENANTS):
        pipe.xadd(f"tenant:{'abc'[n % 3]}:{n}", {"n": str(n)})
    for n in range(AUDITS):
        pipe.xadd(f"audit:{n}", {"n": str(n)})
    for key in (b"orders", b"orders:created", b"progress:a:b", ODD, b"bin\xff:42", b"bin\xff:43"):
        pipe.xadd(key, {"n": "1"})
    pipe.xadd("orders", {"n": "2"})
    pipe.xadd("{orders}:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom"})
    # other types, which a pass over streams leaves out
    pipe.set("progress:999999", "a string")
    pipe.hset("task:1:meta", mapping={"a": "b"})
    pipe.execute()
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=1)
    for n in range(0, TASKS, 7):
        r.xgroup_create(f"task:{n}:events", "workers", id="0")
        r.xgroup_create(f"task:{n}:events", "audit", id="0")
        r.xreadgroup("workers", "w", {f"task:{n}:events": ">"}, count=1 + n % 2)


def stream_keys(r: redis.Redis) -> set[bytes]:
    return set(r.scan_iter(count=10_000, _type="stream"))


def _identifier(part: bytes) -> bool:
    if part.isdigit():
        return True
    try:
        uuid.UUID(part.decode())
    except ValueError:
        return False
    return len(part) == 36


def shape(key: bytes) -> bytes | None:
    """``progress:123`` -> ``progress:*``, ``{task:9:events}:dlq`` -> ``{task:*:events}:dlq``; None: no
    part looks like an identifier (the key is a family of its own)."""
    out, varied = [], False
    for part in key.split(b":"):
        inner = part.removeprefix(b"{").removesuffix(b"}")
        if inner and _identifier(inner):
            out.append(part.replace(inner, b"*"))
            varied = True
        else:
            out.append(part)
    return b":".join(out) if varied else None


def expected_grouping(r: redis.Redis) -> dict[bytes, set[bytes]]:
    """Family glob -> its stream keys: configured globs first (by Redis's SCAN MATCH), then shapes, then
    the key itself (a glob escaped, for a key with glob bytes: only ODD has them)."""
    keys = stream_keys(r)
    out: dict[bytes, set[bytes]] = defaultdict(set)
    left = set(keys)
    for glob in CONFIGURED_GLOBS:
        taken = set(r.scan_iter(match=glob, count=10_000, _type="stream")) & left
        out[glob] |= taken
        left -= taken
    for key in left:
        found = shape(key)
        if found is None:
            found = key if key != ODD else ODD_GLOB
        out[found].add(key)
    return dict(out)


@dataclass
class Figures:
    keys: int = 0
    entries: int = 0
    groups: int = 0
    pending: int = 0
    dlq_depth: int = 0
    oldest: str | None = None
    newest: str | None = None


def expected_figures(r: redis.Redis, grouping: dict[bytes, set[bytes]]) -> dict[bytes, Figures]:
    """Each family's figures from Redis's own XLEN, XINFO GROUPS, XPENDING, XRANGE and XREVRANGE."""
    family_of = {key: glob for glob, keys in grouping.items() for key in keys}
    out: dict[bytes, Figures] = defaultdict(Figures)
    for key, glob in family_of.items():
        f = out[glob]
        f.keys += 1
        f.entries += r.xlen(key)
        for group in r.xinfo_groups(key):
            f.groups += 1
            f.pending += r.xpending(key, group["name"])["pending"]
        first, last = r.xrange(key, count=1), r.xrevrange(key, count=1)
        if first:
            oldest, newest = first[0][0].decode(), last[0][0].decode()
            f.oldest = min(filter(None, (f.oldest, oldest)), key=id_order)
            f.newest = max(filter(None, (f.newest, newest)), key=id_order)
        if key.endswith(b":dlq") and key.startswith(b"{"):
            origin = key[1 : key.index(b"}")]
            out[family_of.get(origin) or shape(origin) or origin].dlq_depth += r.xlen(key)
    return dict(out)
