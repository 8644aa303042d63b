"""One dead letter at a time: what each convention's entry parses into, and its requeue plan.

Entries are written by hand as the producers of each convention write them (docs/architecture.md#conventions-of-other-buses,
the seeds' layouts: eventbus, the seed ``streams`` module, OmniDaemon), malformed ones included, and the expected
``DlqEntry`` and requeue plan (target stream, fields in order, one fresh ``_requeued_from`` marker) are
spelled out literally. Which keys are DLQs at all is covered in ``test_dlq_conventions.py``.
"""

from __future__ import annotations

import json

import pytest

from eventbus.conventions import DlqEntry
from streams_app.redis_ops.conventions import parse_dlq_entry, requeue_plan
from streams_app.redis_ops.errors import InvalidArgument
from tests.console.redis_ops.helpers import EVENTBUS_ENTRY, OMNI_DATA, OMNI_KEY

DLQ_ID = "1700000000123-4"


# --- eventbus -----------------------------------------------------------------------------------------------


def test_eventbus_entry() -> None:
    assert parse_dlq_entry(b"orders:dlq", DLQ_ID, EVENTBUS_ENTRY) == DlqEntry(
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
    assert requeue_plan(b"orders:dlq", DLQ_ID, EVENTBUS_ENTRY) == (
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
