"""URLs of console pages for byte-string stream keys and group names.

Keys are any bytes, so they travel as one percent-encoded path segment
(``quote(key, safe="")``, SPEC section 4). Django's ``reverse()`` would quote the ``%`` of that
encoding a second time, so these builders make the URLs; :class:`BytesSegmentConverter` reads them.
"""

from __future__ import annotations

from urllib.parse import quote, unquote_to_bytes


def segment(value: bytes | str) -> str:
    """One path segment holding ``value`` exactly (``/`` and ``%`` included)."""
    if isinstance(value, str):
        value = value.encode()
    return quote(value, safe="")


class BytesSegmentConverter:
    """``<seg:key>``: a percent-encoded path segment, handed to the view as the raw bytes."""

    regex = "[^/]+"

    def to_python(self, value: str) -> bytes:
        return unquote_to_bytes(value)

    def to_url(self, value: bytes | str) -> str:
        return segment(value)


class ConnConverter:
    regex = "[A-Za-z0-9_.-]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class EntryIdConverter:
    """``<eid:entry_id>``: a full stream entry ID (``ms-seq``), handed to the view as text."""

    regex = r"[0-9]{1,20}-[0-9]{1,20}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


def stream_url(conn: str, key: bytes) -> str:
    return f"/c/{conn}/streams/{segment(key)}/"


def group_url(conn: str, key: bytes, group: bytes) -> str:
    return f"{stream_url(conn, key)}groups/{segment(group)}/"


def entry_url(conn: str, key: bytes, entry_id: str) -> str:
    return f"{stream_url(conn, key)}entries/{entry_id}/"


def raw_field_url(conn: str, key: bytes, entry_id: str, index: int) -> str:
    return f"{entry_url(conn, key, entry_id)}raw/?field={index}"


def api_stream_url(conn: str, key: bytes) -> str:
    return f"/api/v1/c/{conn}/streams/{segment(key)}/"


def dlq_url(conn: str, key: bytes) -> str:
    return f"/c/{conn}/dlq/{segment(key)}/"


def api_dlq_url(conn: str, key: bytes) -> str:
    return f"/api/v1/c/{conn}/dlq/{segment(key)}/"


def job_url(job_id: int) -> str:
    return f"/jobs/{int(job_id)}/"
