"""The wire format of an event: how Python values become stream fields and back.

An entry holds a few flat fields (see :mod:`eventbus.keys`): ``type``, ``data`` (JSON text),
``id`` (the event's own id, a uuid4 hex that survives retries, unlike the entry ID), ``ts``
(publish time in ms) and, when relevant, ``correlation_id``, ``reply_to``, ``_retries``,
``_group``, ``_unique`` and, on retries, ``_first_id``, ``_failed_id`` and ``_failed_at`` (see
:mod:`eventbus.retry`).

``data`` is plain JSON so that any consumer or monitoring tool, in any language, can read it.
Values JSON has no type for are encoded the way most APIs do, and are *not* turned back into
Python types on read: datetimes, dates and times as ISO 8601 strings, ``Decimal`` as a string
(exact, unlike a float), ``UUID`` as its canonical string, ``bytes`` as standard base64, sets and
tuples as lists, enums as their value, dataclasses as objects.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import json
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from datetime import time as dtime
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from . import keys
from .errors import MalformedEvent
from .text import id_order


def json_default(value: Any) -> Any:
    """``json.dumps`` hook for the types listed in the module docstring."""
    if isinstance(value, datetime | date | dtime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, PurePath):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_encoder = json.JSONEncoder(default=json_default, separators=(",", ":"), ensure_ascii=False)


def dumps(value: Any) -> str:
    """Compact JSON text of ``value``, with the extra types above."""
    return _encoder.encode(value)


def loads(text: str | bytes) -> Any:
    return json.loads(text)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# Translation tables that set the version (4) and variant (RFC 4122) bits of a uuid4, as uuid.uuid4() does.
_UUID_VERSION_4 = bytes(b & 0x0F | 0x40 for b in range(256))
_UUID_VARIANT = bytes(b & 0x3F | 0x80 for b in range(256))


def new_event_ids(count: int) -> list[bytes]:
    """``count`` fresh event ids: each the hex of a uuid4, as ``uuid.uuid4().hex`` gives, in bytes.

    The same 122 random bits from the OS and the same version and variant bits as ``uuid.uuid4()``,
    without a ``UUID`` object per id: read in one call for a batch, this costs a few percent of
    what ``uuid4()`` did, which was the largest single cost of encoding an event.
    """
    raw = bytearray(os.urandom(16 * count))
    if count == 1:  # one publish: item assignment costs less than slicing
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        return [binascii.hexlify(raw)]
    raw[6::16] = raw[6::16].translate(_UUID_VERSION_4)
    raw[8::16] = raw[8::16].translate(_UUID_VARIANT)
    text = binascii.hexlify(raw)
    return [text[i : i + 32] for i in range(0, 32 * count, 32)]


def new_event_id() -> str:
    return new_event_ids(1)[0].decode("ascii")


_B_TYPE = keys.F_TYPE.encode()
_B_DATA = keys.F_DATA.encode()
_B_ID = keys.F_ID.encode()
_B_TS = keys.F_TS.encode()
_B_CORRELATION_ID = keys.F_CORRELATION_ID.encode()
_B_REPLY_TO = keys.F_REPLY_TO.encode()
_B_RETRIES = keys.F_RETRIES.encode()
_B_GROUP = keys.F_GROUP.encode()
_B_UNIQUE = keys.F_UNIQUE.encode()


def encode_event(
    type: str,
    data: Any = None,
    *,
    event_id: bytes | None = None,
    ts: int | None = None,
    correlation_id: str | None = None,
    reply_to: str | None = None,
    unique_key: str | None = None,
) -> list[bytes]:
    """The fields of a new event entry as XADD takes them: name, value, name, value..., all UTF-8 bytes.

    Flat and already encoded because this runs once per published event: redis-py passes bytes
    through untouched, where a dict of text would be flattened and encoded again, name by name.
    """
    fields = [
        _B_TYPE,
        type.encode(),
        _B_DATA,
        dumps(data).encode(),
        _B_ID,
        event_id or new_event_ids(1)[0],
        _B_TS,
        str(now_ms() if ts is None else ts).encode(),
    ]
    if correlation_id is not None:
        fields += (_B_CORRELATION_ID, correlation_id.encode())
    if reply_to is not None:
        fields += (_B_REPLY_TO, reply_to.encode())
    if unique_key is not None:
        fields += (_B_UNIQUE, unique_key.encode())
    return fields


@dataclass(frozen=True, slots=True)
class Event:
    """One delivery of an event to a handler.

    ``id`` is the event's identity (the same on every retry: use it for idempotency);
    ``entry_id`` is the stream entry being processed now. ``deliveries`` counts how many times the
    event has been handed to this consumer group so far, this one included: retries plus
    redeliveries after a crash or an expired lease, so 1 on a first, clean attempt.
    """

    id: str
    type: str
    data: Any
    stream: str
    group: str
    entry_id: str
    ts: int
    retries: int = 0
    deliveries: int = 1
    correlation_id: str | None = None
    reply_to: str | None = None
    unique_key: str | None = None
    #: the raw fields as stored, for handlers that need something the bus does not decode
    fields: Mapping[bytes, bytes] = field(default_factory=dict, repr=False)


def _text(fields: Mapping[bytes, bytes], name: bytes) -> str | None:
    value = fields.get(name)
    return None if value is None else value.decode()


def field_retries(fields: Mapping[bytes, bytes]) -> int:
    raw = fields.get(_B_RETRIES)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def target_group(fields: Mapping[bytes, bytes]) -> bytes | None:
    """The group a re-added retry is meant for (``None``: every group)."""
    return fields.get(_B_GROUP)


def decode_event(
    stream: str, group: str, entry_id: str, fields: Mapping[bytes, bytes], *, deliveries: int = 1
) -> Event:
    """Decode an entry read from ``stream``; raise :class:`MalformedEvent` if it is not an event."""
    try:
        type_ = fields[_B_TYPE].decode()
        raw_data = fields.get(_B_DATA)
        data = None if raw_data is None else json.loads(raw_data)
        retries = field_retries(fields)
        ts_raw = fields.get(_B_TS)
        return Event(
            id=_text(fields, _B_ID) or entry_id,
            type=type_,
            data=data,
            stream=stream,
            group=group,
            entry_id=entry_id,
            ts=int(ts_raw) if ts_raw is not None else id_order(entry_id)[0],
            retries=retries,
            deliveries=retries + deliveries,
            correlation_id=_text(fields, _B_CORRELATION_ID),
            reply_to=_text(fields, _B_REPLY_TO),
            unique_key=_text(fields, _B_UNIQUE),
            fields=fields,
        )
    except KeyError:
        raise MalformedEvent(f"Entry {entry_id} of {stream!r} has no {keys.F_TYPE!r} field.") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedEvent(f"Entry {entry_id} of {stream!r} cannot be decoded: {exc}") from None
