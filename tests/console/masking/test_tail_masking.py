"""The live tail's entry frames are masked: the hub encodes one masked frame per entry for every subscriber,
admins included (the tail never reveals). Real uvicorn, real websocket, real redis-server."""

from __future__ import annotations

import json

import redis

from streams_app.masking.models import MaskRule
from tests.conftest import session_cookie
from tests.console.live.helpers import entries_until, open_tail, run, until_live

SECRET = "alice.secret@example.com"


def test_tail_frames_are_masked(asgi_server, admin_user, r: redis.Redis) -> None:
    MaskRule.objects.create(stream_glob="orders*", field_path="data.customer.email", action="mask")
    key = b"orders"
    cookies = session_cookie(admin_user)

    async def scenario() -> tuple[str, list[str]]:
        raw: list[str] = []
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            data = json.dumps({"customer": {"email": SECRET, "name": "Alice"}})
            entry_id = r.xadd(key, {"data": data}).decode()
            frames: list = []
            await entries_until(ws, entry_id, frames=frames)
            raw.extend(json.dumps(f, ensure_ascii=False) for f in frames)
            return entry_id, raw

    _, raw = run(scenario())
    text = "".join(raw)
    assert SECRET not in text
    frame = json.loads(raw[-1])
    entry = frame if frame["type"] == "entry" else frame["entries"][-1]
    assert json.loads(entry["fields"]["data"]) == {"customer": {"email": "••••", "name": "Alice"}}
