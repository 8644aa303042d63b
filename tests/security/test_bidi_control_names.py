"""Bidi control characters (U+202A..U+202E, U+2066..U+2069, LRM, RLM, ALM) in stream, group, consumer and
field names and in values are shown escaped as ``\\uNNNN`` on the pages and in the API's names, so a name
cannot reorder the text around it; the API's decoded value stays exactly what the producer wrote.

The names are written to a real redis-server; their escaped form is computed here, by hand.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from tests.console.helpers import CONN, api, group_url, seg, stream_api, stream_url

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
        "\u200e", "\u200f", "\u061c"]


def escaped(char: str) -> str:
    return f"\\u{ord(char):04x}"


@pytest.fixture
def bidi_names(r: redis.Redis) -> dict[str, str]:
    """A stream, group, consumer and field name each holding bidi controls, and a payload holding all."""
    names = {
        "key": "pay\u202eevil\u202c.exe",
        "group": "grp\u2066x\u2069\u200f",
        "consumer": "c\u202b1\u061c",
        "field": "f\u2067ld\u200e",
    }
    entry_id = r.xadd(names["key"], {names["field"]: "v" + "".join(BIDI) + "end"}).decode()
    r.xgroup_create(names["key"], names["group"], id="0")
    r.xreadgroup(names["group"], names["consumer"], {names["key"]: ">"}, count=1)
    return {**names, "id": entry_id}


def _shown(name: str) -> str:
    """How a name must read on screen: each bidi control as ``\\uNNNN``."""
    return "".join(escaped(c) if c in BIDI else c for c in name)


def test_pages_show_bidi_controls_escaped(viewer_client: Client, bidi_names: dict[str, str]) -> None:
    key, group = bidi_names["key"], bidi_names["group"]
    pages = {
        "streams": f"/c/{CONN}/streams/?live=1",
        "stream": stream_url(key),
        "group": group_url(key, group),
        "entry": stream_url(key, f"entries/{bidi_names['id']}/"),
    }
    for what, path in pages.items():
        response = viewer_client.get(path)
        assert response.status_code == 200, (what, response.content[:300])
        body = response.content.decode()
        raw = [c for c in BIDI if c in body]
        assert raw == [], f"{what} page shows raw bidi controls {[escaped(c) for c in raw]}"
        assert _shown(key) in body, what
    assert _shown(group) in viewer_client.get(group_url(key, group)).content.decode()
    assert _shown(bidi_names["consumer"]) in viewer_client.get(group_url(key, group)).content.decode()
    entry = viewer_client.get(stream_url(key, f"entries/{bidi_names['id']}/")).content.decode()
    assert _shown(bidi_names["field"]) in entry
    assert "v" + "".join(escaped(c) for c in BIDI) + "end" in entry


def test_api_names_show_bidi_controls_escaped(viewer_client: Client, bidi_names: dict[str, str]) -> None:
    key, group = bidi_names["key"], bidi_names["group"]
    listed = viewer_client.get(api(f"/c/{CONN}/streams/")).json()["streams"]
    assert [s["key"] for s in listed] == [_shown(key)]
    info = viewer_client.get(stream_api(key)).json()
    assert info["key"] == _shown(key)
    assert [g["name"] for g in info["groups"]] == [_shown(group)]
    pending = viewer_client.get(stream_api(key, f"groups/{seg(group)}/pending/")).json()
    assert list(pending["summary"]["consumers"]) == [_shown(bidi_names["consumer"])]
    assert [e["consumer"] for e in pending["entries"]] == [_shown(bidi_names["consumer"])]
    entry = viewer_client.get(stream_api(key, "entries/")).json()["entries"][0]
    assert list(entry["fields"]) == [_shown(bidi_names["field"])]
    # The decoded value is data for programs: it stays exactly what the producer wrote.
    assert entry["decoded"][0]["value"] == "v" + "".join(BIDI) + "end"
