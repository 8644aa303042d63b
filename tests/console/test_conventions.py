"""DLQ conventions: detection by key, entry parsing per convention, requeue plans, configured patterns.

Entries are written by hand as the producers of each convention write them (SPEC section 6, the seeds'
layouts), with the expected results spelled out literally. The glob matcher has its own tests, against
Redis's own ``SCAN MATCH``, in ``tests/console/redis_ops/test_glob.py``.
"""

from __future__ import annotations

import json

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from streams_app.redis_ops.conventions import (
    DlqEntry,
    DlqKind,
    check_dlq_patterns,
    detect_dlq,
    dlq_source_streams,
    parse_dlq_entry,
    requeue_plan,
)
from streams_app.redis_ops.errors import InvalidArgument

DLQ_ID = "1700000000123-4"

EVENTBUS_FIELDS = [
    (b"type", b"order.created"),
    (b"data", b'{"order_id": 7}'),
    (b"id", b"evt-1"),
    (b"ts", b"1699999999000"),
    (b"_retries", b"5"),
    (b"dlq_original_stream", b"orders"),
    (b"dlq_original_id", b"1699999999000-0"),
    (b"dlq_group", b"billing"),
    (b"dlq_error", b"ValueError: card declined \xe2\x9c\x97"),
    (b"dlq_traceback", b'Traceback (most recent call last):\n  File "app.py"'),
    (b"dlq_retries", b"5"),
    (b"dlq_failed_at", b"1700000000100"),
]

OMNI_DATA = (
    b'{"topic": "file.uploaded", "original_stream": "omni-stream:file.uploaded", '
    b'"original_id": "1678901234567-0", "failed_message": {"content": {"filename": "doc.pdf"}, '
    b'"correlation_id": "req-123", "delivery_attempts": 4}, "error": "Max retries (3) exceeded", '
    b'"retry_count": 3, "failed_at": 1678901300.123}'
)
OMNI_KEY = b"omni-dlq:group:file.uploaded:file-processor"


@pytest.fixture(autouse=True)
def _no_configured_patterns(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = ""


# --- detection ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"orders:dlq", DlqKind("eventbus-or-streams", b"orders")),
        (b"a:b:dlq", DlqKind("eventbus-or-streams", b"a:b")),
        (b"\xffbin\x00:dlq", DlqKind("eventbus-or-streams", b"\xffbin\x00")),
        (b"orders:dlq:dlq", DlqKind("eventbus-or-streams", b"orders:dlq")),
        (OMNI_KEY, DlqKind("omnidaemon", b"omni-stream:file.uploaded")),
        (b"omni-dlq:custom-group", DlqKind("omnidaemon", None)),
        (b"omni-dlq:", DlqKind("omnidaemon", None)),
        (b":dlq", None),
        (b"orders", None),
        (b"orders:DLQ", None),
        (b"orders:dlq ", None),
        (b"omni-stream:file.uploaded", None),
        (b"", None),
    ],
)
def test_detect_builtin(key: bytes, expected: DlqKind | None) -> None:
    assert detect_dlq(key) == expected


# --- eventbus -----------------------------------------------------------------------------------------------


def test_eventbus_entry() -> None:
    assert parse_dlq_entry(b"orders:dlq", DLQ_ID, EVENTBUS_FIELDS) == DlqEntry(
        id=DLQ_ID,
        convention="eventbus",
        original_stream=b"orders",
        original_id="1699999999000-0",
        group="billing",
        error="ValueError: card declined ✗",
        retries=5,
        failed_at_ms=1700000000100,
        payload_fields=[
            (b"type", b"order.created"),
            (b"data", b'{"order_id": 7}'),
            (b"id", b"evt-1"),
            (b"ts", b"1699999999000"),
        ],
        traceback='Traceback (most recent call last):\n  File "app.py"',
    )


def test_eventbus_requeue_plan_drops_dlq_fields_and_retries() -> None:
    assert requeue_plan(b"orders:dlq", DLQ_ID, EVENTBUS_FIELDS) == (
        b"orders",
        [
            (b"type", b"order.created"),
            (b"data", b'{"order_id": 7}'),
            (b"id", b"evt-1"),
            (b"ts", b"1699999999000"),
            (b"_requeued_from", b"1700000000123-4"),
        ],
    )


def test_eventbus_original_stream_wins_over_the_key() -> None:
    fields = [(b"data", b"x"), (b"dlq_original_stream", b"orders-v2")]
    assert requeue_plan(b"orders:dlq", DLQ_ID, fields)[0] == b"orders-v2"


def test_eventbus_entry_requeued_before_gets_a_single_new_marker() -> None:
    fields = [(b"data", b"x"), (b"_requeued_from", b"1-1"), (b"dlq_original_stream", b"orders")]
    assert requeue_plan(b"orders:dlq", "2-0", fields) == (
        b"orders",
        [(b"data", b"x"), (b"_requeued_from", b"2-0")],
    )


def test_eventbus_malformed_fields_are_none() -> None:
    fields = [
        (b"data", b"\xff\xfe"),
        (b"dlq_original_stream", b""),  # empty: the key's prefix names the stream
        (b"dlq_retries", b"many"),
        (b"dlq_failed_at", b"soon"),
        (b"_retries", b"\xff"),
    ]
    assert parse_dlq_entry(b"\xfforders:dlq", "1700000000000-0", fields) == DlqEntry(
        id="1700000000000-0",
        convention="eventbus",
        original_stream=b"\xfforders",
        original_id=None,
        group=None,
        error=None,
        retries=None,
        failed_at_ms=1700000000000,  # from the DLQ entry's ID
        payload_fields=[(b"data", b"\xff\xfe")],
        traceback=None,
    )


def test_eventbus_retries_fall_back_to_the_counter() -> None:
    fields = [(b"_retries", b"4"), (b"dlq_original_stream", b"s")]
    assert parse_dlq_entry(b"s:dlq", "5-0", fields).retries == 4


# --- seed "streams" module ----------------------------------------------------------------------------------


def test_streams_entry_and_plan() -> None:
    fields = [(b"event_type", b"actor.updated"), (b"data", b'json:{"a": "\xc3\xa9"}'), (b"_retries", b"5")]
    assert parse_dlq_entry(b"actors:dlq", "1700000000500-0", fields) == DlqEntry(
        id="1700000000500-0",
        convention="streams",
        original_stream=b"actors",
        original_id=None,
        group=None,
        error=None,
        retries=5,
        failed_at_ms=1700000000500,
        payload_fields=[(b"event_type", b"actor.updated"), (b"data", b'json:{"a": "\xc3\xa9"}')],
    )
    assert requeue_plan(b"actors:dlq", "1700000000500-0", fields) == (
        b"actors",
        [
            (b"event_type", b"actor.updated"),
            (b"data", b'json:{"a": "\xc3\xa9"}'),
            (b"_requeued_from", b"1700000000500-0"),
        ],
    )


def test_streams_keeps_user_fields_that_look_like_ours() -> None:
    # without dlq_original_stream the entry is the seed module's: a dlq_ field is the user's own
    fields = [(b"dlq_note", b"kept"), (b"_retries", b"1")]
    entry = parse_dlq_entry(b"x:dlq", "1-0", fields)
    assert (entry.convention, entry.payload_fields) == ("streams", [(b"dlq_note", b"kept")])


def test_accepts_redis_py_field_dicts() -> None:
    assert requeue_plan(b"q:dlq", "3-0", {b"a": b"1", b"_retries": b"2"}) == (
        b"q",
        [(b"a", b"1"), (b"_requeued_from", b"3-0")],
    )


# --- OmniDaemon ---------------------------------------------------------------------------------------------


def test_omnidaemon_entry_and_plan() -> None:
    entry_id = "1678901300200-0"
    assert parse_dlq_entry(OMNI_KEY, entry_id, [(b"data", OMNI_DATA)]) == DlqEntry(
        id=entry_id,
        convention="omnidaemon",
        original_stream=b"omni-stream:file.uploaded",
        original_id="1678901234567-0",
        group="group:file.uploaded:file-processor",
        error="Max retries (3) exceeded",
        retries=3,
        failed_at_ms=1678901300123,
        payload_fields=[
            (
                b"data",
                b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}',
            )
        ],
    )
    assert requeue_plan(OMNI_KEY, entry_id, [(b"data", OMNI_DATA)]) == (
        b"omni-stream:file.uploaded",
        [
            (
                b"data",
                b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}',
            ),
            (b"_requeued_from", b"1678901300200-0"),
        ],
    )


def test_omnidaemon_unicode_message_is_written_as_python_json_dumps_does() -> None:
    data = json.dumps({"original_stream": "omni-stream:t", "failed_message": {"name": "café ✓"}}).encode()
    assert requeue_plan(b"omni-dlq:g", "1-0", [(b"data", data)]) == (
        b"omni-stream:t",
        [(b"data", b'{"name": "caf\\u00e9 \\u2713"}'), (b"_requeued_from", b"1-0")],
    )


def test_omnidaemon_stream_from_topic_when_original_stream_is_missing() -> None:
    data = b'{"topic": "user.registered", "failed_message": "plain"}'
    assert requeue_plan(b"omni-dlq:g", "1-0", [(b"data", data)]) == (
        b"omni-stream:user.registered",
        [(b"data", b'"plain"'), (b"_requeued_from", b"1-0")],
    )


@pytest.mark.parametrize(
    "fields",
    [
        [(b"data", b"{not json")],
        [(b"data", b"\xff\xfe")],
        [(b"data", b"[1, 2]")],
        [(b"data", b"null")],
        [(b"other", b"x")],
        [],
    ],
)
def test_omnidaemon_malformed_entries_parse_with_nones(fields: list[tuple[bytes, bytes]]) -> None:
    assert parse_dlq_entry(b"omni-dlq:g", "1700000000000-1", fields) == DlqEntry(
        id="1700000000000-1",
        convention="omnidaemon",
        original_stream=None,
        original_id=None,
        group="g",
        error=None,
        retries=None,
        failed_at_ms=1700000000000,
        payload_fields=[],
    )
    with pytest.raises(InvalidArgument, match="Cannot tell which stream"):
        requeue_plan(b"omni-dlq:g", "1700000000000-1", fields)


def test_omnidaemon_wrong_types_inside_the_document() -> None:
    data = (
        b'{"original_stream": 5, "topic": ["x"], "original_id": 12, "error": {"code": 7}, '
        b'"retry_count": "three", "failed_at": "yesterday", "failed_message": {"a": 1}}'
    )
    entry = parse_dlq_entry(b"omni-dlq:g", "9-0", [(b"data", data)])
    assert entry == DlqEntry(
        id="9-0",
        convention="omnidaemon",
        original_stream=None,
        original_id=None,
        group="g",
        error='{"code": 7}',
        retries=None,
        failed_at_ms=9,
        payload_fields=[(b"data", b'{"a": 1}')],
    )


def test_omnidaemon_without_failed_message_cannot_be_requeued() -> None:
    data = b'{"original_stream": "omni-stream:t", "error": "boom"}'
    with pytest.raises(InvalidArgument, match="no failed_message"):
        requeue_plan(b"omni-dlq:g", "1-0", [(b"data", data)])


# --- refusals -----------------------------------------------------------------------------------------------


def test_not_a_dlq() -> None:
    entry = parse_dlq_entry(b"orders", "1-0", [(b"a", b"b"), (b"_requeued_from", b"0-1")])
    assert entry == DlqEntry("1-0", "none", None, None, None, None, None, 1, [(b"a", b"b")])
    with pytest.raises(InvalidArgument, match="not a dead-letter queue"):
        requeue_plan(b"orders", "1-0", [(b"a", b"b")])


def test_requeue_into_the_dlq_itself_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="its own DLQ"):
        requeue_plan(b"x:dlq", "1-0", [(b"dlq_original_stream", b"x:dlq")])


def test_bad_entry_id_leaves_failed_at_unknown() -> None:
    entry = parse_dlq_entry(b"x:dlq", "not-an-id", [(b"a", b"b")])
    assert (entry.id, entry.failed_at_ms) == ("not-an-id", None)


# --- source streams -----------------------------------------------------------------------------------------


def test_dlq_source_streams() -> None:
    entries = [
        parse_dlq_entry(b"orders:dlq", "1-0", [(b"dlq_original_stream", b"orders")]),
        parse_dlq_entry(b"orders:dlq", "2-0", [(b"dlq_original_stream", b"orders-eu")]),
        parse_dlq_entry(b"orders:dlq", "3-0", [(b"_retries", b"5")]),
    ]
    assert dlq_source_streams(b"orders:dlq", entries) == [b"orders", b"orders-eu"]
    assert dlq_source_streams(b"omni-dlq:g") == []
    assert dlq_source_streams(b"plain") == []


# --- configured patterns ------------------------------------------------------------------------------------

JOBS_PATTERN = {
    "name": "jobs-dead",
    "match": "jobs:*:dead",
    "target": "strip_suffix::dead",
    "error_field": "reason",
    "retries_field": "attempts",
    "original_id_field": "orig",
    "failed_at_field": "ts",
    "failed_at_unit": "s",
    "group_field": "queue",
    "traceback_field": "tb",
    "drop_fields": ["worker"],
}


def test_configured_strip_suffix(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps([JOBS_PATTERN])
    key = b"jobs:\xe9t\xe9:dead"
    assert detect_dlq(key) == DlqKind("jobs-dead", b"jobs:\xe9t\xe9")
    fields = [
        (b"payload", b"\x00\x01"),
        (b"reason", b"timeout"),
        (b"attempts", b"3"),
        (b"orig", b"10-0"),
        (b"ts", b"1700000000.5"),
        (b"queue", b"low"),
        (b"tb", b"..."),
        (b"worker", b"w-1"),
        (b"_requeued_from", b"0-1"),
    ]
    assert parse_dlq_entry(key, "20-0", fields) == DlqEntry(
        id="20-0",
        convention="jobs-dead",
        original_stream=b"jobs:\xe9t\xe9",
        original_id="10-0",
        group="low",
        error="timeout",
        retries=3,
        failed_at_ms=1700000000500,
        payload_fields=[(b"payload", b"\x00\x01")],
        traceback="...",
    )
    assert requeue_plan(key, "20-0", fields) == (
        b"jobs:\xe9t\xe9",
        [(b"payload", b"\x00\x01"), (b"_requeued_from", b"20-0")],
    )
    assert detect_dlq(b"jobs:dead") is None  # "*" needs the two colons around it


def test_configured_field_target_and_precedence_over_builtins(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [{"name": "legacy", "match": "legacy:*:dlq", "target": "field:origin"}]
    )
    assert detect_dlq(b"legacy:a:dlq") == DlqKind("legacy", None)
    assert detect_dlq(b"other:dlq") == DlqKind("eventbus-or-streams", b"other")
    fields = [(b"origin", b"legacy:a"), (b"body", b"{}")]
    assert requeue_plan(b"legacy:a:dlq", "1-0", fields) == (
        b"legacy:a",
        [(b"body", b"{}"), (b"_requeued_from", b"1-0")],
    )
    with pytest.raises(InvalidArgument, match="Cannot tell which stream"):
        requeue_plan(b"legacy:a:dlq", "1-0", [(b"body", b"{}")])


def test_configured_fixed_and_strip_prefix_targets(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [
            {"name": "fixed", "match": "graveyard", "target": "fixed:jobs", "failed_at_field": "at"},
            {"name": "prefixed", "match": "dead.[a-c]?", "target": "strip_prefix:dead."},
        ]
    )
    assert detect_dlq(b"graveyard") == DlqKind("fixed", b"jobs")
    assert parse_dlq_entry(b"graveyard", "5-0", [(b"at", b"1700000000999")]).failed_at_ms == 1700000000999
    assert detect_dlq(b"dead.b7") == DlqKind("prefixed", b"b7")
    assert detect_dlq(b"dead.d7") is None


def test_pattern_changes_take_effect(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps([{"name": "one", "match": "x*", "target": "fixed:a"}])
    assert detect_dlq(b"xy") == DlqKind("one", b"a")
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps([{"name": "two", "match": "x*", "target": "fixed:b"}])
    assert detect_dlq(b"xy") == DlqKind("two", b"b")
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    assert detect_dlq(b"xy") is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"name": "a"}', "must be a JSON list"),
        ('["x"]', r"BUSCONSOLE_DLQ_PATTERNS\[0\] must be an object"),
        ('[{"name": "a", "match": "x"}]', r"\[0\]: 'target' is required"),
        (
            '[{"name": "a", "match": "x", "target": "fixed:y", "eror_field": "e"}]',
            "unknown key.*'eror_field'",
        ),
        ('[{"name": "a", "match": "x", "target": "stream:y"}]', r"\[0\]\.target: 'stream:y' must be"),
        ('[{"name": "a", "match": "x", "target": "fixed:"}]', r"\.target: 'fixed:' must be"),
        ('[{"name": "eventbus", "match": "x", "target": "fixed:y"}]', "built-in convention"),
        ('[{"name": "a b", "match": "x", "target": "fixed:y"}]', r"\.name: 'a b' must be"),
        ('[{"name": "a", "match": "", "target": "fixed:y"}]', r"\.match must be a non-empty string"),
        ('[{"name": "a", "match": "x", "target": "fixed:y", "error_field": 3}]', r"\.error_field must be"),
        ('[{"name": "a", "match": "x", "target": "fixed:y", "failed_at_unit": "h"}]', "'ms' or 's'"),
        ('[{"name": "a", "match": "x", "target": "fixed:y", "drop_fields": "f"}]', "drop_fields must be"),
        (
            '[{"name": "a", "match": "x", "target": "fixed:y"}, {"name": "a", "match": "z", "target": "fixed:y"}]',
            r"\[1\]\.name: 'a' is used twice",
        ),
    ],
)
def test_bad_patterns_are_refused_clearly(settings, value: str, message: str) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = value
    with pytest.raises(ImproperlyConfigured, match=message):
        detect_dlq(b"x")
    [error] = check_dlq_patterns()
    assert error.id == "streams_app.E101"


def test_good_patterns_pass_the_system_check(settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps([JOBS_PATTERN])
    assert check_dlq_patterns() == []


# --- against a real server ----------------------------------------------------------------------------------


def test_entries_read_back_from_redis(r: redis.Redis) -> None:
    """XADD each convention's entries as their producers would and parse what XRANGE returns."""
    eventbus_id = r.xadd(b"orders:dlq", dict(EVENTBUS_FIELDS)).decode()
    streams_id = r.xadd(b"orders:dlq", {b"type": b"t", b"data": b"\xff\x00", b"_retries": b"5"}).decode()
    omni_id = r.xadd(OMNI_KEY, {b"data": OMNI_DATA}).decode()
    r.xadd(b"orders", {b"type": b"order.created"})

    assert [detect_dlq(key) for key in sorted(r.scan_iter(_type="stream"))] == [
        DlqKind("omnidaemon", b"omni-stream:file.uploaded"),
        None,
        DlqKind("eventbus-or-streams", b"orders"),
    ]

    [(id_1, fields_1), (id_2, fields_2)] = r.xrange(b"orders:dlq")
    first = parse_dlq_entry(b"orders:dlq", id_1.decode(), fields_1)
    second = parse_dlq_entry(b"orders:dlq", id_2.decode(), fields_2)
    assert (first.id, first.convention, first.original_id, first.retries) == (
        eventbus_id,
        "eventbus",
        "1699999999000-0",
        5,
    )
    assert (second.id, second.convention, second.original_stream, second.payload_fields) == (
        streams_id,
        "streams",
        b"orders",
        [(b"type", b"t"), (b"data", b"\xff\x00")],
    )

    [(id_3, fields_3)] = r.xrange(OMNI_KEY)
    target, fields = requeue_plan(OMNI_KEY, id_3.decode(), fields_3)
    assert target == b"omni-stream:file.uploaded"
    new_id = r.xadd(target, dict(fields))
    [(_, written)] = r.xrange(target)
    assert written == {
        b"data": b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}',
        b"_requeued_from": omni_id.encode(),
    }
    assert new_id
