"""DLQ conventions by key: which streams are dead-letter queues, of which convention, requeueing where.

Covers the built-in conventions, operator-configured patterns (``BUSCONSOLE_DLQ_PATTERNS``: detection,
precedence, changes, and the system check that refuses a bad setting) and the source streams a DLQ page
links to. Expected results are spelled out literally, and a last test reads back entries XADDed to a real
Redis as their producers write them. The glob matcher has its own tests, against Redis's own
``SCAN MATCH``, in ``test_glob.py``; parsing of single entries and their requeue plans are in
``test_requeue_plans.py``.
"""

from __future__ import annotations

import json

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from eventbus.conventions import DlqEntry, DlqKind
from streams_app.redis_ops.conventions import (
    check_dlq_patterns,
    detect_dlq,
    dlq_source_streams,
    parse_dlq_entry,
    requeue_plan,
)
from streams_app.redis_ops.errors import InvalidArgument
from tests.console.redis_ops.helpers import EVENTBUS_ENTRY, OMNI_DATA, OMNI_KEY

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
    eventbus_id = r.xadd(b"orders:dlq", dict(EVENTBUS_ENTRY)).decode()
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
