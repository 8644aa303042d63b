"""Search on what real buses wrote: FastStream's binary envelopes and OmniDaemon's stream and DLQ
(the seed ``streams`` module's DLQ is in ``test_search_api.py``: it is plain XADD with ``_retries``).

The data is produced as ``tests/console/interop/`` produces it, with the libraries themselves; the
expected matches are computed here over ``XRANGE`` with FastStream's own envelope reader and
``json.loads``, never with the search code.
"""

from __future__ import annotations

import json

import msgpack
import redis
from django.test import Client

from tests.console.helpers import stream_api
from tests.console.interop.helpers import WAIT, XSS, LoopThread
from tests.polling import until


def _search(client: Client, key: str, q: str) -> list[str]:
    response = client.get(stream_api(key, "search/"), {"q": q, "limit": 1000})
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert body["complete"] and body["scanned"] == body["total"]
    return [m["id"] for m in body["matches"]]


def test_faststream_headers_and_bodies(
    aio: LoopThread, url: str, r: redis.Redis, viewer_client: Client
) -> None:
    from faststream.redis import BinaryMessageFormatV1, RedisBroker

    orders = [
        {"n": i, "customer": {"id": 40 + i % 3, "name": f"café {XSS}"}, "items": list(range(i))}
        for i in range(8)
    ]

    async def publish() -> None:
        async with RedisBroker(url, logger=None) as broker:
            for i, order in enumerate(orders):
                await broker.publish(
                    order,
                    stream="fs:orders",
                    headers={"x-tenant": "acme" if i % 2 else "zen"},
                    correlation_id=f"order-{i}",
                )
            await broker.publish(
                msgpack.packb({"sku": "X-1", "qty": 3}),
                stream="fs:orders",
                headers={"content-type": "application/msgpack"},
                correlation_id="mp",
            )
            await broker.publish("plain timeout text", stream="fs:orders", correlation_id="txt")

    aio.run(publish())
    assert r.xlen("fs:orders") == 10  # each publish returned after its XADD
    parsed = {}
    for entry_id, fields in r.xrange("fs:orders"):
        [value] = fields.values()
        body, headers = BinaryMessageFormatV1.parse(value)  # FastStream's own reader
        parsed[entry_id.decode()] = (body, headers)

    def body_json(body: bytes) -> object:
        try:
            return json.loads(body)
        except ValueError:
            return None

    assert _search(viewer_client, "fs:orders", "body.customer.id == 41") == [
        i
        for i, (b, _) in parsed.items()
        if isinstance(body_json(b), dict) and body_json(b)["customer"]["id"] == 41
    ]
    assert _search(viewer_client, "fs:orders", 'headers["x-tenant"] == "acme" && size(body.items) > 3') == [
        i
        for i, (b, h) in parsed.items()
        if h.get("x-tenant") == "acme" and isinstance(body_json(b), dict) and len(body_json(b)["items"]) > 3
    ]
    assert _search(viewer_client, "fs:orders", 'headers.correlation_id in ["order-2", "mp"]') == [
        i for i, (_, h) in parsed.items() if h["correlation_id"] in ("order-2", "mp")
    ]
    assert _search(viewer_client, "fs:orders", "body.qty == 3") == [
        i for i, (b, h) in parsed.items() if h["correlation_id"] == "mp" and msgpack.unpackb(b)["qty"] == 3
    ]
    # plain text: headers and bodies, ignoring case; the msgpack body as the JSON of its value
    assert _search(viewer_client, "fs:orders", "CAFÉ") == [
        i for i, (b, _) in parsed.items() if b"caf\xc3\xa9" in b
    ]
    assert _search(viewer_client, "fs:orders", "ACME") == [
        i for i, (_, h) in parsed.items() if h.get("x-tenant") == "acme"
    ]
    assert _search(viewer_client, "fs:orders", "timeout") == [
        i for i, (b, _) in parsed.items() if b"timeout" in b
    ]
    assert _search(viewer_client, "fs:orders", "x-1") == [
        i for i, (_, h) in parsed.items() if h["correlation_id"] == "mp"
    ]


def test_omnidaemon_stream_and_dead_letters(
    aio: LoopThread, url: str, r: redis.Redis, viewer_client: Client, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("JSON_STORAGE_DIR", str(tmp_path / "omnidaemon"))
    from omnidaemon.event_bus.redis_stream_bus import RedisStreamEventBus

    topic, agent = "file.uploaded", "file-processor"
    stream, group = f"omni-stream:{topic}", f"group:{topic}:{agent}"
    dlq = f"omni-dlq:{group}"

    async def fail_then_dead_letter() -> None:
        bus = RedisStreamEventBus(
            redis_url=url, reclaim_interval=0.02, default_reclaim_idle_ms=1, default_dlq_retry_limit=1
        )

        async def process(payload: dict) -> None:
            if payload["content"].get("fail"):
                raise RuntimeError(f"cannot parse {payload['content']['filename']}")

        try:
            await bus.subscribe(topic, agent, process)
            for n in range(1, 6):
                content = {"filename": f"report {n}.pdf", "fail": n in (2, 4), "pages": n * 10}
                await bus.publish(
                    {
                        "topic": topic,
                        "id": f"task-{n}",
                        "payload": {"content": content},
                        "correlation_id": f"req-{n}",
                    }
                )
            await until(
                lambda: r.xlen(dlq) == 2 and r.xpending(stream, group)["pending"] == 0,
                what="OmniDaemon to dead-letter the failing messages",
                timeout=WAIT,
            )
        finally:
            await bus.close()

    aio.run(fail_then_dead_letter())

    messages = {i.decode(): json.loads(f[b"data"]) for i, f in r.xrange(stream)}
    assert _search(viewer_client, stream, 'data.task_id == "task-3"') == [
        i for i, m in messages.items() if m.get("task_id") == "task-3"
    ]
    assert _search(viewer_client, stream, "data.content.pages >= 30") == [
        i for i, m in messages.items() if m["content"]["pages"] >= 30
    ]
    dead = {i.decode(): json.loads(f[b"data"]) for i, f in r.xrange(dlq)}
    assert _search(viewer_client, dlq, 'error.contains("report 4")') == [
        i for i, d in dead.items() if "report 4" in d["error"]
    ]
    assert _search(viewer_client, dlq, f'origin == "{stream}" && retries >= 1') == [
        i for i, d in dead.items() if d["original_stream"] == stream and d["retry_count"] >= 1
    ]
    assert _search(viewer_client, dlq, f'group == "{group}"') == list(dead)
    assert _search(viewer_client, dlq, "data.failed_message.content.fail") == []  # plain text: no such text
    assert _search(viewer_client, dlq, "data.failed_message.content.fail == true") == list(dead)
    assert _search(viewer_client, dlq, "REPORT 2") == [
        i for i, d in dead.items() if "report 2" in json.dumps(d)
    ]
