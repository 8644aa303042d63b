"""Search on what real buses wrote: FastStream's binary envelopes and OmniDaemon's stream and DLQ
(the seed ``streams`` module's DLQ is in ``test_search_api.py``: it is plain XADD with ``_retries``).

The data is produced as ``tests/console/interop/`` produces it, by the libraries themselves in the
interop venv; the expected matches are computed here over ``XRANGE`` with FastStream's own envelope
reader (its readings sent back by the library's script) and ``json.loads``, never with the search code.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import msgpack
import redis
from django.test import Client

from tests.console.helpers import stream_api
from tests.console.interop.helpers import XSS


def _search(client: Client, key: str, q: str) -> list[str]:
    response = client.get(stream_api(key, "search/"), {"q": q, "limit": 1000})
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert body["complete"] and body["scanned"] == body["total"]
    return [m["id"] for m in body["matches"]]


def test_faststream_headers_and_bodies(run_library: Callable, r: redis.Redis, viewer_client: Client) -> None:
    orders = [
        {"n": i, "customer": {"id": 40 + i % 3, "name": f"café {XSS}"}, "items": list(range(i))}
        for i in range(8)
    ]
    readings = run_library("faststream_side.py", "publish", stream="fs:orders", messages=[
        *({"body": order, "headers": {"x-tenant": "acme" if i % 2 else "zen"}, "correlation_id": f"order-{i}"}
          for i, order in enumerate(orders)),
        {"msgpack": {"sku": "X-1", "qty": 3}, "headers": {"content-type": "application/msgpack"},
         "correlation_id": "mp"},
        {"body": "plain timeout text", "correlation_id": "txt"},
    ])["parsed"]
    assert r.xlen("fs:orders") == 10  # each publish returned after its XADD
    parsed = {}
    for entry_id, fields in r.xrange("fs:orders"):
        [name] = fields
        body, headers = readings[entry_id.decode()][name.decode()]  # FastStream's own reader
        parsed[entry_id.decode()] = (base64.b64decode(body), headers)

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


def test_omnidaemon_stream_and_dead_letters(run_library: Callable, r: redis.Redis, viewer_client: Client,
                                            tmp_path) -> None:
    topic, agent = "file.uploaded", "file-processor"
    stream, group = f"omni-stream:{topic}", f"group:{topic}:{agent}"
    dlq = f"omni-dlq:{group}"
    run_library(
        "omnidaemon_side.py", "fail_then_dead_letter", env={"JSON_STORAGE_DIR": str(tmp_path / "omnidaemon")},
        messages=[[f"task-{n}", {"filename": f"report {n}.pdf", "fail": n in (2, 4), "pages": n * 10}]
                  for n in range(1, 6)],
        error="cannot parse {filename}", dead=2,
    )

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
