"""Turn stream field values (arbitrary bytes) into something a person can read.

Django-free: the one copy of the decoding, for the bus's command line (``python -m eventbus inspect
--search``) and any program that shows the bus's entries, so a search finds the same entries in all.

Redis stores field names and values as bytes, and the buses we monitor put anything in them: JSON,
msgpack, FastStream's binary envelope, plain text, images. :func:`decode_value` tries, in this order,
JSON, msgpack, the FastStream envelope, UTF-8 text and finally hex, and always returns a
:class:`Decoded` whose ``value`` is JSON-able (for the API) and whose ``pretty`` is plain text (for the
page, which escapes it). Nothing here produces HTML and nothing here raises: the input is untrusted and a
page must render whatever a producer wrote.

Heuristics, chosen to avoid calling text "JSON" or "msgpack" by accident:

* JSON only when the bytes are strict UTF-8 and the top level is an object or an array. ``hello``, ``42``,
  ``true`` or ``"quoted"`` are valid JSON documents too, but showing them as JSON adds nothing, and a field
  holding ``42`` is better shown as the text it is.
* msgpack only when the whole buffer unpacks (no trailing bytes) and the top level is a map or an array.
  ASCII text is a run of msgpack positive fixints, so it never unpacks as a whole; short binary values
  rarely form a complete map or array by chance.
* The FastStream envelope is recognised by its 8-byte magic before msgpack is tried: the magic's first
  byte, 0x89, is also a msgpack fixmap, and the magic is the stronger signal.
* Text only when the bytes are strict UTF-8 without C0 control characters other than tab, LF and CR, so
  that a packed struct that happens to be valid UTF-8 is shown as hex rather than as invisible characters.

Values larger than ``limit`` bytes are never parsed: only their prefix is shown, as text or hex, because a
cut JSON or msgpack document does not parse anyway and parsing a 50 MB value on a page view is the kind
of unbounded work a page or a terminal must not do. The one exception is a FastStream envelope, whose headers (at its
start) are read from the prefix, followed by the start of its body as text or hex.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, time
from typing import Any

import msgpack

from . import interrupts
from .text import as_bytes, display_text, escape_bidi

PREVIEW_LIMIT = 64 * 1024
"""Bytes of a value that are decoded; the rest is left for the raw download."""

HEX_LINE = 16
"""Bytes per line in the spaced-hex rendering."""

FASTSTREAM_MAGIC = b"\x89BIN\r\n\x1a\n"
"""First 8 bytes of FastStream's ``BinaryMessageFormatV1`` (the Redis default since FastStream 0.6)."""

_FASTSTREAM_V1 = 1
_FASTSTREAM_FIXED = struct.Struct(">HII")  # version, headers_start, data_start
_FASTSTREAM_MIN_HEADERS_START = len(FASTSTREAM_MAGIC) + _FASTSTREAM_FIXED.size  # 18

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# NaN and Infinity are not JSON: keep them as the strings they were written as so that the API can
# serialise the value again. One decoder for every value: ``json.loads`` with an option builds a new
# one per call, which a search scanning 100k entries pays 100k times.
_JSON = json.JSONDecoder(parse_constant=str)


@dataclass(frozen=True, slots=True)
class Decoded:
    """One value, decoded for display.

    ``format`` is one of ``json``, ``msgpack``, ``faststream``, ``text`` and ``hex``. ``value`` is what the
    JSON API returns (for ``hex`` the unspaced hex string; for ``faststream`` a dict
    ``{"headers": {...}, "data": <value>, "data_format": <format of data>}``). ``pretty`` is what the page
    shows. ``size`` is the byte length of the whole original value, ``truncated`` whether only a prefix
    of it was decoded.
    """

    format: str
    value: object
    pretty: str
    size: int
    truncated: bool


@dataclass(frozen=True, slots=True)
class DecodedField:
    """One field of a stream entry: its name as text and raw bytes, its position, its decoded value.

    ``index`` is the field's position in the entry: Redis allows a name to repeat within an entry, so the
    name alone does not identify a field.
    """

    name: str
    name_raw: bytes
    index: int
    decoded: Decoded


def decode_value(raw: bytes, *, limit: int = PREVIEW_LIMIT) -> Decoded:
    """Decode one field value (see the module docstring for the order and the heuristics).

    ``pretty`` shows bidi control characters escaped (a payload must not reorder the page around it);
    ``value`` keeps them, because it is the producer's data and the API hands it to programs.
    """
    decoded = _decode(raw, limit)
    pretty = escape_bidi(decoded.pretty)
    return decoded if pretty == decoded.pretty else replace(decoded, pretty=pretty)


def _decode(raw: bytes, limit: int) -> Decoded:
    try:
        data = as_bytes(raw)
        size = len(data)
        limit = max(0, int(limit))
        if size > limit:
            return _decode_prefix(data[:limit], size)
        for attempt in (_try_json, _try_faststream, _try_msgpack):
            found = attempt(data)
            if found is not None:
                return found
        return _text_or_hex(data, size=size, truncated=False)
    except interrupts.LET_THROUGH:  # a signal's (eventbus.interrupts), not the value's
        raise
    except Exception:  # a last resort: this function must render anything, whatever the bug
        data = raw if isinstance(raw, bytes | bytearray | memoryview) else repr(raw).encode()
        prefix = bytes(data[: max(0, limit)]) if isinstance(limit, int) else bytes(data[:PREVIEW_LIMIT])
        return _hex(prefix, size=len(data), truncated=len(prefix) < len(data))


def decode_fields(
    fields: Iterable[tuple[bytes, bytes]] | Mapping[bytes, bytes], *, limit: int = PREVIEW_LIMIT
) -> list[DecodedField]:
    """Decode every field of an entry, keeping the order Redis returned them in.

    Accepts the pairs of a raw reply or the dict redis-py builds for XRANGE entries.
    """
    pairs = fields.items() if isinstance(fields, Mapping) else fields
    result: list[DecodedField] = []
    for index, (name, value) in enumerate(pairs):
        name_raw = as_bytes(name)
        result.append(DecodedField(display_text(name_raw), name_raw, index, decode_value(value, limit=limit)))
    return result


# --- the formats, each returning None when the value is not in that format --------------------------------


def _try_json(data: bytes, *, any_top_level: bool = False) -> Decoded | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    stripped = text.lstrip(" \t\r\n")
    if not any_top_level and not stripped.startswith(("{", "[")):
        return None
    try:
        value = _JSON.decode(text)
        pretty = json.dumps(value, indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
    return Decoded("json", value, pretty, len(data), False)


class _MsgpackMap(list[Any]):
    """A msgpack map as its key/value pairs: keys may be unhashable (arrays) or repeat."""


def _try_msgpack(data: bytes) -> Decoded | None:
    if not data or data[0] not in _MSGPACK_CONTAINER_LEADS:
        return None
    try:
        unpacked = msgpack.unpackb(
            data,
            raw=False,
            unicode_errors="backslashreplace",
            strict_map_key=False,
            object_pairs_hook=_MsgpackMap,
        )
        value = _jsonable(unpacked)
        pretty = json.dumps(value, indent=2, ensure_ascii=False)
    except interrupts.LET_THROUGH:  # a signal's (eventbus.interrupts), not the value's
        raise
    except Exception:  # ExtraData, FormatError, StackError, ValueError, RecursionError...
        return None
    return Decoded("msgpack", value, pretty, len(data), False)


# fixmap, fixarray, array 16/32, map 16/32: the only first bytes of a map or an array
_MSGPACK_CONTAINER_LEADS = frozenset([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])


def _try_faststream(data: bytes, *, whole_size: int | None = None) -> Decoded | None:
    """FastStream's ``BinaryMessageFormatV1`` (``faststream/redis/parser/binary.py``, FastStream 0.6).

    Layout, integers big-endian::

        0   8 bytes  magic b"\\x89BIN\\r\\n\\x1a\\n"
        8   u16      version (1)
        10  u32      headers_start (18 as written by FastStream)
        14  u32      data_start
        headers_start:
            u16      header count, then per header: u16 length + key, u16 length + value
        data_start:  the body, to the end of the buffer

    FastStream writes ``len(str)`` as a header's length, which is a character count, not a byte count, so
    a non-ASCII header is cut short (and the headers after it misread) by a byte-count reader such as
    FastStream's own parser, which then gives up on the whole message. We locate the body by
    ``data_start``, which FastStream computes from the real byte length, and read the headers by
    characters when that is what makes them end at ``data_start`` (see :func:`_faststream_headers`).

    With ``whole_size``, ``data`` is only the first bytes of a longer value: its headers are shown whole
    (they must fit in ``data``) and the start of its body as text or hex, marked truncated.
    """
    if not data.startswith(FASTSTREAM_MAGIC) or len(data) < _FASTSTREAM_MIN_HEADERS_START:
        return None
    version, headers_start, data_start = _FASTSTREAM_FIXED.unpack_from(data, len(FASTSTREAM_MAGIC))
    if version != _FASTSTREAM_V1 or not (
        headers_start >= _FASTSTREAM_MIN_HEADERS_START and headers_start + 2 <= data_start <= len(data)
    ):
        return None
    headers = _faststream_headers(data, headers_start, data_start)
    if headers is None:
        return None
    body = data[data_start:]
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    inner: Decoded | None = None
    if whole_size is not None:
        inner = _text_or_hex_prefix(body, size=whole_size - data_start)
    elif content_type == "application/json":
        inner = _try_json(body, any_top_level=True)
    elif content_type == "text/plain":
        inner = _text_or_hex(body, size=len(body), truncated=False)
    if inner is None:
        inner = _try_json(body) or _try_msgpack(body) or _text_or_hex(body, size=len(body), truncated=False)
    value = {"headers": headers, "data": inner.value, "data_format": inner.format}
    header_lines = "".join(f"{key}: {text}\n" for key, text in headers.items())
    if whole_size is not None:
        return Decoded("faststream", value, f"{header_lines}\n{inner.pretty}", whole_size, True)
    return Decoded("faststream", value, f"{header_lines}\n{inner.pretty}", len(data), False)


def _faststream_headers(data: bytes, start: int, end: int) -> dict[str, str] | None:
    """The header block between ``headers_start`` and ``data_start``, or None when it does not parse.

    FastStream writes ``len(value)`` before each key and value: a character count for a ``str``, so
    a non-ASCII header carries fewer than its bytes, while ``data_start`` is computed from the real
    bytes. A block that ends exactly at ``data_start`` when read by byte counts is read that way (every
    ASCII header); otherwise, if it ends exactly there when the lengths are read as characters, it is
    what FastStream wrote. Failing both, whatever byte counts read inside the bounds is shown.
    """
    by_bytes = _faststream_header_block(data, start, end, chars=False)
    if by_bytes is not None and by_bytes[1] == end:
        return by_bytes[0]
    by_chars = _faststream_header_block(data, start, end, chars=True)
    if by_chars is not None and by_chars[1] == end:
        return by_chars[0]
    return by_bytes[0] if by_bytes is not None else None


def _faststream_header_block(
    data: bytes, start: int, end: int, *, chars: bool
) -> tuple[dict[str, str], int] | None:
    headers: dict[str, str] = {}
    (count,) = struct.unpack_from(">H", data, start)
    offset = start + 2
    for _ in range(count):
        key, offset = _faststream_string(data, offset, end, chars=chars)
        value, offset = _faststream_string(data, offset, end, chars=chars)
        if key is None or value is None:
            return None
        headers[key] = value
    return headers, offset


def _faststream_string(data: bytes, offset: int, end: int, *, chars: bool = False) -> tuple[str | None, int]:
    if offset + 2 > end:
        return None, offset
    (length,) = struct.unpack_from(">H", data, offset)
    offset += 2
    stop = _utf8_span(data, offset, length, end) if chars else offset + length
    if stop is None or stop > end:
        return None, offset
    return display_text(data[offset:stop]), stop


def _utf8_span(data: bytes, offset: int, chars: int, end: int) -> int | None:
    """Where ``chars`` UTF-8 characters starting at ``offset`` end, or None if they are not valid UTF-8."""
    pos = offset
    for _ in range(chars):
        if pos >= end:
            return None
        width = _utf8_width(data[pos])
        if not width or pos + width > end:
            return None
        pos += width
    try:
        data[offset:pos].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return pos


def _utf8_width(lead: int) -> int:
    """The byte length of a UTF-8 character from its first byte; 0 when it cannot start one."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead < 0xE0:
        return 2
    if 0xE0 <= lead < 0xF0:
        return 3
    return 4 if 0xF0 <= lead < 0xF5 else 0


def _text_or_hex(data: bytes, *, size: int, truncated: bool) -> Decoded:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _hex(data, size=size, truncated=truncated)
    return _text(text, data, size=size, truncated=truncated)


def _text(text: str, data: bytes, *, size: int, truncated: bool) -> Decoded:
    if _CONTROL.search(text):
        return _hex(data, size=size, truncated=truncated)
    return Decoded("text", text, text, size, truncated)


def _decode_prefix(prefix: bytes, size: int) -> Decoded:
    """The first ``limit`` bytes of a long value: a FastStream envelope's headers and the start of its
    body (an envelope always starts with binary bytes, which would make the whole of it hex), else
    text or hex."""
    return _try_faststream(prefix, whole_size=size) or _text_or_hex_prefix(prefix, size=size)


def _text_or_hex_prefix(prefix: bytes, *, size: int) -> Decoded:
    """Text or hex of a cut value.

    The cut may fall inside a multi-byte character: an incremental decoder drops those trailing bytes
    instead of calling the whole value binary.
    """
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(prefix, final=False)
    except UnicodeDecodeError:
        return _hex(prefix, size=size, truncated=True)
    return _text(text, prefix, size=size, truncated=True)


def _hex(data: bytes, *, size: int, truncated: bool) -> Decoded:
    lines = (data[i : i + HEX_LINE].hex(" ") for i in range(0, len(data), HEX_LINE))
    return Decoded("hex", data.hex(), "\n".join(lines), size, truncated)


# --- making msgpack values JSON-able ---------------------------------------------------------------------


def _jsonable(value: object) -> object:
    """A JSON-able copy of an unpacked msgpack value.

    bytes become display text (control characters escaped too), extension types
    ``{"ext": code, "hex": ...}``, timestamps and other objects their ISO or ``str`` form, non-finite
    floats their name, map keys strings.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return _bin_text(bytes(value))
    if isinstance(value, msgpack.ExtType):  # a namedtuple: before the tuple case
        return {"ext": value.code, "hex": bytes(value.data).hex()}
    if isinstance(value, _MsgpackMap):
        return {_key(k): _jsonable(v) for k, v in value}
    if isinstance(value, list | tuple):
        return [_jsonable(item) for item in value]
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, msgpack.Timestamp):
        try:
            return value.to_datetime().isoformat()
        except (OverflowError, ValueError, OSError):
            return f"Timestamp(seconds={value.seconds}, nanoseconds={value.nanoseconds})"  # type: ignore[attr-defined]  # msgpack sets both in __init__; its stubs name neither
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    return str(value)


def _bin_text(data: bytes) -> str:
    """A msgpack ``bin`` as text: ``\\xNN`` for bytes that are not UTF-8 and for control characters."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", display_text(data))


def _key(key: object) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bytes | bytearray):
        return _bin_text(bytes(key))
    return json.dumps(_jsonable(key), ensure_ascii=False, separators=(",", ":"))


def decoded_value(raw: bytes, *, limit: int = PREVIEW_LIMIT) -> tuple[str, object]:
    """``(format, value)`` as :func:`decode_value` gives them, without the display text.

    Payload search evaluates every entry of a range and never shows most of them: building ``pretty``
    (an indented ``json.dumps``) would cost it more than the parse. A JSON object or array, by far the
    commonest payload, is parsed as :func:`_try_json` parses it; anything else goes through
    :func:`decode_value`, so the formats and their order stay those of this module.
    """
    data = as_bytes(raw)
    if len(data) <= limit and data[:1] in (b"{", b"["):
        try:
            return "json", _JSON.decode(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            pass
    decoded = decode_value(data, limit=limit)
    return decoded.format, decoded.value
