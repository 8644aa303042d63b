"""The one glob matcher (``eventbus.glob``) against the real server's ``SCAN MATCH``.

Redis is the oracle: the keys are created on the test server and every expected set is what
``SCAN 0 MATCH <pattern> COUNT 10000 TYPE stream`` returns for them. Then the places that match globs
without Redis (the streams page over the mirror, alert rules, configured DLQ patterns) are checked to
select the same keys, and the streams list to answer odd patterns with 200 or 400, never 500.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator
from datetime import timedelta
from urllib.parse import unquote_to_bytes, urlencode

import pytest
import redis
from django.test import Client
from django.utils import timezone

from eventbus.glob import glob_compile, glob_match
from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import AlertRule
from streams_app.metrics import mirror, snapshots
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.conventions import detect_dlq

CONN = "default"


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    redis_client.reset()
    yield
    redis_client.reset()


def scan_match(r: redis.Redis, pattern: bytes | str, *, type_: str = "stream") -> set[bytes]:
    """What Redis itself selects: one SCAN call large enough to cover the test database."""
    cursor, keys = r.scan(0, match=pattern, count=10000, _type=type_)
    assert cursor == 0, "the test database outgrew one SCAN call"
    return set(keys)


def make_streams(r: redis.Redis, keys: Iterable[bytes]) -> None:
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.xadd(key, {b"f": b"v"})
    pipe.execute()


# --- the matcher alone --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "key", "expected"),
    [
        (b"*", b"", True),
        (b"a*b", b"a\nb", True),  # "*" crosses newlines
        (b"a?c", b"a\xffc", True),
        (b"a?c", b"ac", False),
        (b"[abc]x", b"bx", True),
        (b"[^abc]x", b"bx", False),
        (b"[^abc]x", b"dx", True),
        (b"[z-a]", b"m", True),  # reversed range
        (b"a\\*", b"a*", True),
        (b"a\\*", b"ab", False),
        (b"[\\]]", b"]", True),
        (b"[]", b"]", False),  # "]" right after "[" closes an empty class
        (b"a[bc", b"ab", True),  # an unclosed class takes the rest of the pattern
        (b"a.b", b"axb", False),  # regex characters are literal
        (b"x+", b"xx", False),
        (b"abc\\", b"abc\\", True),  # a trailing backslash is literal
        (b"\xe9*", b"\xe9t\xe9", True),
        ("caf\u00e9", "caf\u00e9".encode(), True),  # text is matched as its UTF-8 bytes
        (b"[!a]", b"!", True),  # "!" does not negate
        (b"[!a]", b"b", False),
        (b"**", b"", False),  # only SCAN's own shortcut for "*" lets the empty key through
        (b"", b"", True),
    ],
)
def test_glob_match(pattern: bytes | str, key: bytes, expected: bool) -> None:
    assert glob_match(pattern, key) is expected


def test_literal_prefix_stops_at_the_first_wildcard() -> None:
    assert glob_compile(b"orders\\*:[ab]*").literal_prefix == b"orders*:"
    assert glob_compile(b"*orders").literal_prefix == b""
    assert glob_compile(b"ab\\").literal_prefix == b"ab\\"


GLOB_KEYS = [
    b"jobs:1:dead",
    b"jobs:dead",
    b"jobs::dead",
    b"a]b",
    b"a*b",
    b"axb",
    b"a\\b",
    b"abc",
    b"ab",
    b"a-b",
    b"a^b",
    b"q\nr",
    b"\xe9t\xe9",
    b"[x]",
]
GLOB_PATTERNS = [
    b"jobs:*:dead",
    b"jobs:?*:dead",
    b"a[]]b",
    b"a[\\]]b",
    b"a\\*b",
    b"a*b",
    b"a[^x]b",
    b"a[-]b",
    b"a[x-z]b",
    b"a[z-x]b",
    b"a[\\\\]b",
    b"ab[",
    b"a[b",
    b"q?r",
    b"\xe9*",
    b"\\[x\\]",
    b"[[]x]",
    b"*",
]


def test_glob_agrees_with_redis_scan_match(r: redis.Redis) -> None:
    for key in GLOB_KEYS:
        r.set(key, b"1")
    for pattern in GLOB_PATTERNS:
        redis_says = set(r.scan_iter(match=pattern, count=1000))
        assert {key for key in GLOB_KEYS if glob_match(pattern, key)} == redis_says, pattern


#: Keys as streams, binary and non-UTF-8 ones included.
KEYS = [
    b"", b"a", b"b", b"c", b"x", b"ax", b"bx", b"cx", b"dx", b"!", b"!a", b"^", b"^a", b"]", b"]a", b"a]",
    b"-", b"a-", b"\\", b"a\\", b"*", b"a*", b"?", b"[", b"[abc", b"abc", b"ab", b"_", b"`", b"a\nb",
    b"\x00", b"\x00a", b"\x01", b"\x7f", b"\x80", b"\xfe", b"\xff", b"\xffx", b"caf\xc3\xa9", b"caf\xe9",
    b"orders:1", b"orders:x", b"orders:dlq", b"a" * 300,
]
#: Patterns where glob dialects part ways, and Redis's own odd corners.
TRICKY = [
    b"[c-a]", b"[c-a]x", b"[a-c]x", b"[^a]", b"[!a]", b"[!a]*", b"[^a]*", b"[a-]", b"[a-]x", b"[]a]",
    b"[^]a]", b"[]]", b"\\*", b"a\\*", b"a\\", b"\\", b"[abc", b"a[bc", b"[abc]*", b"*?", b"?*", b"??",
    b"*", b"**", b"", b"[\\]]", b"[\\]]*", b"[\\\\]", b"[\\-a]", b"[a\\-c]", b"[^\\x]", b"[\x00-\x01]",
    b"[\x01-\xff]", b"[a-\xff]", b"[\x80-\xff]", b"[\xfe-\x80]*", b"\xff*", b"*\xff", b"caf?", b"caf??",
    b"caf\xc3\xa9", b"[", b"[^", b"[[]*", b"a?b", b"orders:[0-9]", b"orders:[^0-9]*", b"?\\", b"*a*a*a*a*b",
    b"a*" * 150,
]


@pytest.mark.parametrize("pattern", TRICKY, ids=repr)
def test_tricky_patterns_select_what_scan_match_selects(r: redis.Redis, pattern: bytes) -> None:
    make_streams(r, KEYS)
    assert {key for key in KEYS if glob_match(pattern, key)} == scan_match(r, pattern)


def test_random_patterns_select_what_scan_match_selects(r: redis.Redis) -> None:
    """A seeded sweep over the characters that mean something to a glob (bounded: 400 patterns)."""
    make_streams(r, KEYS)
    rnd = random.Random(20260110)
    alphabet = b"ab]-^!\\[*?\x00\xff\x80x"
    for _ in range(400):
        pattern = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(1, 7)))
        assert {key for key in KEYS if glob_match(pattern, key)} == scan_match(r, pattern), pattern


def test_past_a_thousand_nested_stars_redis_matches_nothing(r: redis.Redis) -> None:
    key = b"a" * 1001
    make_streams(r, [key])
    for pattern in (b"*a" * 1000, b"*a" * 1001, b"a*" * 1001, b"a*" * 1000 + b"a", b"a*" * 1002):
        assert glob_match(pattern, key) is (key in scan_match(r, pattern)), len(pattern)


# --- the streams list: mirror (HTML) and SCAN (API) ---------------------------------------------------------

#: Stream keys for the pages: the empty key has no page of its own, so it is left out here.
PAGE_KEYS = [key for key in KEYS if key]
#: Patterns with a glob character (without one, the mirror filter is a substring search by design).
PAGE_PATTERNS = [
    "[c-a]x", "[c-a]", "[!a]*", "[^a]*", "[a-]", "[a-]x", "[]a]", "\\*", "a\\*", "[abc", "*?", "[\\]]",
    "[\\]]*", "caf?", "caf??", "orders:[^0-9]*", "[", "[^", "a*", "*\\", "?\\", "caf\u00e9*", "_*", "A*",
]
_ROW = re.compile(r'<a class="mono" href="/c/default/streams/([^"/]+)/">')


def _page_keys(body: str) -> list[bytes]:
    return [unquote_to_bytes(segment) for segment in _ROW.findall(body)]


def _mirror_listing(client: Client, pattern: str, *, sort: str = "", count: int = 7) -> list[bytes]:
    """Every row the mirror lists for ``pattern``, page by page (bounded: at most 20 pages)."""
    listed: list[bytes] = []
    for page in range(20):
        response = client.get("/c/default/streams/?" + urlencode(
            {"match": pattern, "sort": sort, "count": count, "offset": page * count}
        ))
        assert response.status_code == 200, (pattern, response.status_code)
        body = response.content.decode()
        assert "listed from the mirror as of" in body
        rows = _page_keys(body)
        listed += rows
        if len(rows) < count:
            return listed
    raise AssertionError(f"{pattern!r}: more than 20 pages")


@pytest.fixture
def mirrored(r: redis.Redis, db) -> redis.Redis:
    make_streams(r, PAGE_KEYS)
    mirror.mirror_sync(conn=CONN)
    return r


def test_reversed_range_on_the_mirror_answers_200_with_redis_rows(mirrored: redis.Redis, viewer_client: Client) -> None:
    response = viewer_client.get("/c/default/streams/?match=[c-a]x")
    assert response.status_code == 200
    assert "listed from the mirror as of" in response.content.decode()
    assert set(_page_keys(response.content.decode())) == scan_match(mirrored, b"[c-a]x") == {b"ax", b"bx", b"cx"}


@pytest.mark.parametrize("pattern", PAGE_PATTERNS)
def test_mirror_listing_selects_what_scan_match_selects(
    mirrored: redis.Redis, viewer_client: Client, pattern: str
) -> None:
    expected = scan_match(mirrored, pattern.encode())
    for sort in ("", "length", "last"):
        listed = _mirror_listing(viewer_client, pattern, sort=sort)
        assert len(listed) == len(set(listed)), (pattern, sort)  # pages neither overlap nor repeat
        assert set(listed) == expected, (pattern, sort)


@pytest.mark.parametrize("pattern", [*PAGE_PATTERNS, "a\\", "\\", "caf\u00e9"])
def test_api_streams_list_selects_what_scan_match_selects(
    mirrored: redis.Redis, viewer_client: Client, pattern: str
) -> None:
    response = viewer_client.get("/api/v1/c/default/streams/?" + urlencode({"match": pattern, "count": 1000}))
    assert response.status_code == 200
    listed = [unquote_to_bytes(row["url"].split("/")[-2]) for row in response.json()["streams"]]
    assert set(listed) == scan_match(mirrored, pattern.encode())


@pytest.mark.parametrize("match", ["a" * 513, "a\x00*"])
def test_unusable_patterns_are_a_400_never_a_500(mirrored: redis.Redis, viewer_client: Client, match: str) -> None:
    query = urlencode({"match": match})
    for url in ("/c/default/streams/?", "/c/default/streams/?live=1&", "/api/v1/c/default/streams/?"):
        assert viewer_client.get(url + query).status_code == 400, url
    assert viewer_client.get("/api/v1/c/default/streams/?" + query).json()["error"]["code"] == "bad_request"


# --- alert rules and DLQ patterns ---------------------------------------------------------------------------


def test_alert_rule_globs_follow_redis_semantics(r: redis.Redis, db) -> None:
    """``[!a]`` is the class of ``!`` and ``a`` (not fnmatch's negation); ``[^a]`` negates."""
    keys = [b"a:orders", b"!:orders", b"b:orders", b"^:orders", b"\xff:orders"]
    groups = [b"b1", b"!1", b"c1"]
    for key in keys:
        for n in range(3):
            r.xadd(key, {b"n": str(n).encode()})
        for group in groups:
            r.xgroup_create(key, group, id="0")  # every group lags 3 behind
    for group in groups:
        r.set(b"group-name-oracle:" + group, b"1")
    tick = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(hours=2), interval_s=10)
    rules = {
        (stream_glob, group_glob): AlertRule.objects.create(
            name=f"{stream_glob} {group_glob}", kind=AlertRule.Kind.GROUP_LAG_ABOVE, threshold=1, for_seconds=0,
            stream_glob=stream_glob, group_glob=group_glob,
        )
        for stream_glob, group_glob in (("[!a]*", "*"), ("[^a]*", "*"), ("*", "[!b]*"), ("*", "[^b]*"))
    }
    snapshots.snapshot_take(tick=tick)
    alerts_evaluate(tick=tick)

    for (stream_glob, group_glob), rule in rules.items():
        opened = {(bytes(a.target_key), bytes(a.target_group_name)) for a in rule.alerts.all()}
        streams = scan_match(r, stream_glob)
        wanted_groups = {
            key.removeprefix(b"group-name-oracle:")
            for key in scan_match(r, b"group-name-oracle:" + group_glob.encode(), type_="string")
        }
        assert opened == {(key, group) for key in streams for group in wanted_groups}, (stream_glob, group_glob)
    assert scan_match(r, "[!a]*") == {b"a:orders", b"!:orders"}  # the two dialects really do differ here


def test_configured_dlq_patterns_follow_redis_semantics(r: redis.Redis, settings) -> None:
    keys = [b"a:dead", b"!:dead", b"b:dead", b"^:dead", b"\xff:dead", b"a:alive"]
    make_streams(r, keys)
    for match in ("[!a]*:dead", "[^a]*:dead", "[c-a]:dead", "\\!*"):
        settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
            [{"name": "dead-letters", "match": match, "target": "strip_suffix::dead"}]
        )
        detected = {key for key in keys if (kind := detect_dlq(key)) and kind.convention == "dead-letters"}
        assert detected == scan_match(r, match), match
