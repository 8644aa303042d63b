"""Typed input of the JSON API: one pydantic model per request body and per query string.

The API reads JSON, so it is typed like JSON: a flag is ``true`` or ``false`` (an HTML checkbox reads
any value as "on", which made ``{"force": "no"}`` a yes), a count is an integer in its range, an entry
ID is ``<ms>-<seq>`` in ASCII digits; anything else is refused with a 400 naming the field. The same
models validate each request (:func:`parse`, :func:`query`) and describe it in the OpenAPI document
(:mod:`streams_app.views.api.openapi`), so the description cannot drift from what is enforced.

HTML pages keep their Django forms (:mod:`streams_app.views.action_forms`), where checkbox semantics
are right; both hand the services the same typed values (entry IDs as canonical text, names as
bytes), and both check IDs and positions with the one parser of :mod:`streams_app.redis_ops.ids`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Self, TypeVar

from django.http import QueryDict
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from streams_app.jobs.models import Job
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_id, parse_position, parse_time
from streams_app.redis_ops.reads.groups import CONSUMER_SORTS, GROUP_SORTS
from streams_app.redis_ops.reads.limits import DEFAULT_PAGE, MAX_PAGE
from streams_app.views.action_forms import MAX_SELECTION

#: The largest integer Redis and the database take (a signed 64-bit integer).
I64_MAX = 2**63 - 1
#: Errors listed in one 400 message; a body with a thousand bad IDs gets the first few, and a count.
_ERRORS_SHOWN = 5

ENTRY_ID_PATTERN = r"^[0-9]{1,20}-[0-9]{1,20}$"
ID_OR_MS_PATTERN = r"^[0-9]{1,20}(-[0-9]{1,20})?$"
# A date-time the server takes, exactly: a real calendar date from 1970 on (February 29 in leap years
# only), hours 00-23, minutes and seconds 00-59, an optional UTC offset. Anything looser would
# describe as valid a time that ``parse_time`` refuses (the fuzz tests sent 1279-97-34T04:49).
_YEAR = r"(19[7-9][0-9]|[2-9][0-9]{3})"
_LEAP_YEAR = r"(19(7[26]|8[048]|9[26])|[2-9][0-9](0[48]|[2468][048]|[13579][26])|([2468][048]|[3579][26])00)"
_DATE = (rf"({_YEAR}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|{_YEAR}-(0[13-9]|1[0-2])-(29|30)"
         rf"|{_YEAR}-(0[13578]|1[02])-31|{_LEAP_YEAR}-02-29)")
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
_ZONE = r"(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?"
DATE_TIME_PATTERN = rf"^{_DATE}T{_TIME}{_ZONE}$"
EXAMPLE_ID = "1700000000000-0"
EXAMPLE_TIME = "2026-11-22T10:30:00Z"


def _whole(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """``pattern`` (anchored, as JSON Schema writes it) matched against the whole text: Python's ``$``
    would also match before a final newline, which the schema's pattern does not allow."""
    return re.compile(pattern.removeprefix("^").removesuffix("$")).fullmatch


_ENTRY_ID = _whole(ENTRY_ID_PATTERN)
_ID_OR_MS = _whole(ID_OR_MS_PATTERN)
_DATE_TIME = _whole(DATE_TIME_PATTERN)


def _refuse(kind: str, message: str) -> PydanticCustomError:
    """A validation error whose message is shown as it is (no context: braces in it stay literal)."""
    return PydanticCustomError(kind, message)


# ----------------------------------------------------------------------------------------- types


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise _refuse(f"{what.replace(' ', '_')}_type", f"Give the {what} as a JSON string.")
    return value


def _checked_id(value: object, *, allow_bare: bool) -> str:
    """An entry ID in canonical form; ``allow_bare`` also takes a bare millisecond (``ms`` = ``ms-0``).

    The pattern comes first (ASCII digits, nothing around them): ``parse_id`` alone would strip
    spaces, which the OpenAPI pattern does not allow, and the description must say exactly what
    passes. ``parse_id`` then checks the range (each part fits in 64 bits) and canonicalises.
    """
    given = _text(value, "entry ID")
    if not (_ID_OR_MS if allow_bare else _ENTRY_ID)(given):
        expected = "<milliseconds>[-<sequence>]" if allow_bare else "<milliseconds>-<sequence>"
        raise _refuse("entry_id", f"{given[:64]!r} is not an entry ID ({expected}, digits 0-9).")
    try:
        return str(parse_id(given, allow_bare=allow_bare, what="entry ID"))
    except InvalidArgument as exc:
        raise _refuse("entry_id", exc.message) from None


def _exact_id(value: object) -> str:
    return _checked_id(value, allow_bare=False)


def _cursor_id(value: object) -> str:
    return _checked_id(value, allow_bare=True)


EntryId = Annotated[
    str,
    PlainValidator(_exact_id),
    WithJsonSchema({"type": "string", "pattern": ENTRY_ID_PATTERN, "examples": [EXAMPLE_ID]}),
]
"""One exact entry ID, ``<ms>-<seq>``."""

CursorId = Annotated[
    str,
    PlainValidator(_cursor_id),
    WithJsonSchema({"type": "string", "pattern": ID_OR_MS_PATTERN, "examples": [EXAMPLE_ID]}),
]
"""An exclusive paging cursor: an entry ID, or a bare millisecond read as ``<ms>-0``."""


def position(*specials: str) -> Any:
    """A place in a stream: an entry ID, a bare millisecond time, an ISO-8601 date-time (naive is UTC),
    or one of ``specials`` (``-``, ``+``, ``$``, ``0``), passed on as given for the services to resolve."""

    def check(value: object) -> str:
        given = _text(value, "position")
        if given in specials:
            return given
        if not (_ID_OR_MS(given) or _DATE_TIME(given)):
            raise _refuse(
                "position",
                f"{given[:64]!r} is neither an entry ID, a millisecond time nor an ISO-8601 date-time "
                f"(e.g. {EXAMPLE_ID} or {EXAMPLE_TIME}).",
            )
        try:
            parse_position(given)
        except InvalidArgument as exc:
            raise _refuse("position", exc.message) from None
        return given

    forms: list[dict[str, Any]] = [{"pattern": ID_OR_MS_PATTERN}, {"pattern": DATE_TIME_PATTERN}]
    if specials:
        forms.append({"enum": list(specials)})
    schema = {"type": "string", "anyOf": forms, "examples": [EXAMPLE_ID, EXAMPLE_TIME, *specials]}
    return Annotated[str, PlainValidator(check), WithJsonSchema(schema)]


def _name(value: object) -> bytes:
    name = _text(value, "name")
    if not 1 <= len(name) <= 512 or "\x00" in name:
        raise _refuse("name", "A name is 1 to 512 characters, without NUL.")
    return name.encode()


Name = Annotated[
    bytes,
    PlainValidator(_name),
    WithJsonSchema(
        {"type": "string", "minLength": 1, "maxLength": 512, "pattern": r"^[^\x00]*$", "examples": ["worker-2"]}
    ),
]
"""A consumer or stream name typed by the caller: the bytes Redis gets are its UTF-8."""


def _field_filter(value: object) -> dict[bytes, bytes]:
    if not isinstance(value, dict):
        raise _refuse("filter_type", "The filter is a JSON object of field names to text values.")
    if len(value) > 20:
        raise _refuse("filter", "At most 20 fields in a filter.")
    pairs: dict[bytes, bytes] = {}
    for name, wanted in value.items():
        if not 1 <= len(name) <= 512 or not isinstance(wanted, str):
            raise _refuse("filter", "The filter maps field names (1 to 512 characters) to text values.")
        pairs[name.encode()] = wanted.encode()
    return pairs


FieldFilter = Annotated[
    dict[bytes, bytes],
    PlainValidator(_field_filter),
    WithJsonSchema(
        {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "propertyNames": {"minLength": 1, "maxLength": 512},
            "maxProperties": 20,
            "examples": [{"type": "order.created"}],
        }
    ),
]
"""``{field: value}`` pairs an entry must all hold, compared as bytes."""


def _distinct(ids: list[str]) -> list[str]:
    """The IDs once each, in the order given: linear, and only after the list's length was checked."""
    return list(dict.fromkeys(ids))


IdList = Annotated[
    list[EntryId], Field(min_length=1, max_length=MAX_SELECTION), AfterValidator(_distinct)
]
"""Up to :data:`MAX_SELECTION` entry IDs, duplicates dropped. The length is checked as the list is read
(pydantic stops at item ``MAX_SELECTION + 1``), so an oversized list is refused at once whatever it
holds, and de-duplication, after that, is linear."""

#: Text fields refuse NUL, as Django's form fields do (a NUL in a SCAN pattern or a name is a mistake).
NO_NUL_PATTERN = r"^[^\x00]*$"


def text(*, max_length: int, min_length: int = 0) -> Any:
    """A text field of at most ``max_length`` characters, without NUL."""
    return Annotated[str, StringConstraints(min_length=min_length, max_length=max_length, pattern=NO_NUL_PATTERN)]


def _integral(value: object) -> object:
    """A JSON number with a zero fraction (``2.0``, ``1e3``) as the integer it is. JSON Schema's
    ``integer`` admits it, so refusing it would make the description promise what is not taken;
    a fraction (``0.5``) is still refused by the strict integer check that follows."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def body_int(*, ge: int, le: int, **field: Any) -> Any:
    """An integer body field in ``[ge, le]``."""
    return Annotated[int, Field(ge=ge, le=le, **field), BeforeValidator(_integral)]


# Written out (what body_int and text return) so that mypy reads them as types.
Millis = Annotated[int, Field(ge=0, le=I64_MAX), BeforeValidator(_integral)]
Batch = Annotated[int, Field(ge=1, le=5000, description="Entries per step of the background job."), BeforeValidator(_integral)]
Confirm = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=NO_NUL_PATTERN)]

_DIGITS = _whole(r"^-?[0-9]{1,30}$")


def _query_digits(value: object) -> object:
    """A query string's integer as its decimal digits only: pydantic's lax reading would also take
    ``+5``, `` 5`` and ``5_000``, which the description's ``integer`` does not."""
    if isinstance(value, str):
        if not _DIGITS(value):
            raise _refuse("int_parsing", "must be an integer (digits 0-9)")
        return int(value)
    return value


def query_int(*, ge: int, le: int) -> Any:
    """An integer query parameter in ``[ge, le]``."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_query_digits)]


# ----------------------------------------------------------------------------------- base models


class Body(BaseModel):
    """A JSON request body: strict types, unknown fields refused (a typo must not pass silently)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Query(BaseModel):
    """A query string: its values are text, read as the declared types ("5" is 5). A parameter given
    empty is checked like any value (``count=`` is not a count): the OpenAPI description says exactly
    what passes. Parameters the endpoint does not know are ignored (a cache buster harms nothing)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


M = TypeVar("M", bound=BaseModel)


def _problem(error: Mapping[str, Any], model: type[BaseModel]) -> str:
    """One validation error as ``field: what is wrong``, in words a caller can act on."""
    where = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = f"unknown field (this endpoint takes {', '.join(model.model_fields) or 'no fields'})"
    elif error["type"] in ("bool_type", "bool_parsing"):
        message = "must be a boolean, true or false"
    elif error["type"] == "string_pattern_mismatch":  # the only pattern of a text field: no NUL
        message = "must not contain NUL characters"
    elif error["type"] == "model_type":
        message = "The request body must be a JSON object."
    return f"{where}: {message}" if where else message


def parse(model: type[M], data: object) -> M:
    """``data`` validated by ``model``; every problem becomes one InvalidArgument (a 400) naming the fields."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        problems = [_problem(e, model) for e in errors[:_ERRORS_SHOWN]]
        if len(errors) > _ERRORS_SHOWN:
            problems.append(f"and {len(errors) - _ERRORS_SHOWN} more problems")
        raise InvalidArgument("; ".join(problems)) from None


def query(model: type[M], params: QueryDict) -> M:
    """The query string read by ``model``: the parameters it declares (the last value of a repeated one)."""
    return parse(model, {name: params[name] for name in model.model_fields if name in params})


JobState = Literal[tuple(Job.State.values)]  # type: ignore[valid-type]  # the states come from the model; mypy wants them spelled out


# ------------------------------------------------------------------------------ pending entries


class ClaimBody(Body):
    """Claim pending entries for ``consumer``, each only while it has been idle for ``min_idle_ms``
    (XCLAIM): an entry its consumer touched since is skipped, one deleted from the stream is reported."""

    ids: IdList
    consumer: Name
    min_idle_ms: Millis

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"ids": [EXAMPLE_ID], "consumer": "worker-2", "min_idle_ms": 60000}]}
    )


class AutoclaimBody(Body):
    """Sweep the group's idle pending entries to ``consumer`` (XAUTOCLAIM), ``count`` at most."""

    consumer: Name
    min_idle_ms: Millis
    count: body_int(ge=1, le=1000) = 100  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"consumer": "sweeper", "min_idle_ms": 60000, "count": 100}]}
    )


class AckBody(Body):
    """Acknowledge entries (XACK): they leave the pending list and are never processed."""

    ids: IdList

    model_config = ConfigDict(json_schema_extra={"examples": [{"ids": [EXAMPLE_ID]}]})


class RewindBody(Body):
    """Move the group's last-delivered ID (XGROUP SETID with ENTRIESREAD, so lag stays known).

    ``to`` is an entry ID, a millisecond time, an ISO-8601 date-time, ``0``/``-`` (the start) or ``$``
    (the end). ``dry_run`` says what would be redelivered and changes nothing.
    """

    to: position("0", "-", "$")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    dry_run: bool = False

    model_config = ConfigDict(json_schema_extra={"examples": [{"to": EXAMPLE_TIME, "dry_run": True}]})


# ----------------------------------------------------------------------------------------- DLQs


class DlqRequeueBody(Body):
    """Requeue dead letters to the streams they came from: ``ids`` now, or ``all`` with ``up_to``
    (the newest ID the caller saw) as a background job that leaves later arrivals alone."""

    ids: IdList | None = None
    all: bool = False
    up_to: EntryId | None = None
    batch: Batch | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"ids": [EXAMPLE_ID]}, {"all": True, "up_to": EXAMPLE_ID}],
            # Either shape, never both: what the validator below enforces (null counts as absent).
            "oneOf": [
                {"required": ["ids"], "properties": {"ids": {"type": "array"}, "all": {"const": False}}},
                {"required": ["all", "up_to"],
                 "properties": {"all": {"const": True}, "up_to": {"type": "string"}, "ids": {"type": "null"}}},
            ],
        }
    )

    @model_validator(mode="after")
    def _ids_or_all(self) -> Self:
        if self.all:
            if self.up_to is None:
                raise _refuse("requeue", "up_to: requeue all needs up_to, the newest entry ID you saw.")
            if self.ids is not None:
                raise _refuse("requeue", "Give either ids or all, not both.")
        elif self.ids is None:
            raise _refuse("requeue", "ids: select at least one entry, or give all: true with up_to.")
        return self


class DlqDeleteBody(Body):
    """Delete dead letters for good (admin)."""

    ids: IdList

    model_config = ConfigDict(json_schema_extra={"examples": [{"ids": [EXAMPLE_ID]}]})


class DlqPurgeBody(Body):
    """Delete every dead letter up to ``up_to`` (admin); ``confirm`` is the DLQ's name, typed."""

    up_to: EntryId
    confirm: Confirm

    model_config = ConfigDict(json_schema_extra={"examples": [{"up_to": EXAMPLE_ID, "confirm": "orders:dlq"}]})


# --------------------------------------------------------------------------------------- replay


class ReplayBody(Body):
    """Re-publish the entries from ``start`` to ``end`` (both included) that hold every field of
    ``match``, to ``target`` (default: the same stream), as a background job; ``dry_run`` counts them."""

    start: position("-", "0")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    end: position("+", "$")  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    target: Name | None = None
    match: FieldFilter | None = None
    dry_run: bool = False
    batch: Batch | None = None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"start": "-", "end": "+", "target": "orders:replayed", "match": {"type": "order.created"},
                          "dry_run": True}]
        }
    )


# -------------------------------------------------------------------------------- admin actions


class ConsumerDeleteBody(Body):
    """Delete a consumer (admin). While it owns pending entries this is refused (409) unless
    ``force`` is true, which drops them from the group with it."""

    force: bool = False

    model_config = ConfigDict(json_schema_extra={"examples": [{"force": False}]})


class GroupDeleteBody(Body):
    """Delete a consumer group (admin); ``confirm`` is the group's name, typed."""

    confirm: Confirm

    model_config = ConfigDict(json_schema_extra={"examples": [{"confirm": "billing"}]})


class TrimBody(Body):
    """Trim a stream (admin): exactly one of ``maxlen`` (keep about that many of the newest entries)
    and ``minid`` (remove entries older than an ID or a time); ``dry_run`` shows what would go."""

    maxlen: Millis | None = None
    minid: position() | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    dry_run: bool = False

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"maxlen": 10000, "dry_run": True}, {"minid": EXAMPLE_TIME}],
            "oneOf": [
                {"required": ["maxlen"], "properties": {"maxlen": {"type": "integer"}, "minid": {"type": "null"}}},
                {"required": ["minid"], "properties": {"minid": {"type": "string"}, "maxlen": {"type": "null"}}},
            ],
        }
    )

    @model_validator(mode="after")
    def _one_threshold(self) -> Self:
        if (self.maxlen is None) == (self.minid is None):
            raise _refuse("trim", "Give exactly one of maxlen (entries to keep) and minid (an ID or a time).")
        return self


class EntriesDeleteBody(Body):
    """Delete entries by ID (admin); ``dry_run`` says which exist and which are still pending."""

    ids: IdList
    dry_run: bool = False

    model_config = ConfigDict(json_schema_extra={"examples": [{"ids": [EXAMPLE_ID], "dry_run": True}]})


# ---------------------------------------------------------------------------------- query strings


class StreamsQuery(Query):
    """``match`` is a Redis glob; ``cursor`` continues a SCAN over every primary (the value a reply
    gave, opaque); ``sort`` ranks every stream from the mirror like the streams page (largest first,
    ``name`` A to Z), paged by ``offset``; before the mirror's first sync only ``sort=length`` answers,
    ranking the streams one scan budget finds."""

    match: text(min_length=1, max_length=512) = "*"  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    cursor: query_int(ge=0, le=2**64 - 1) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    sort: Literal["length", "pending", "lag", "last", "name"] | None = None
    offset: query_int(ge=0, le=I64_MAX) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class FamiliesQuery(Query):
    """One page of the family rows (``offset``, ``count``) of the newest snapshot (``now``: of one bounded
    pass over Redis made now instead), or of a family's members (``cursor``: the value a reply gave,
    opaque, continuing a SCAN over every primary)."""

    offset: query_int(ge=0, le=I64_MAX) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    cursor: query_int(ge=0, le=2**64 - 1) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    now: bool = False


class EntriesQuery(Query):
    """At most one of ``after`` and ``before`` (exclusive cursors) and ``at`` (an ID or a time)."""

    order: Literal["desc", "asc"] = "desc"
    after: CursorId | None = None
    before: CursorId | None = None
    at: position() | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type

    @model_validator(mode="after")
    def _one_cursor(self) -> Self:
        if sum(value is not None for value in (self.after, self.before, self.at)) > 1:
            raise _refuse("cursor", "Give at most one of after, before and at.")
        return self


class PendingQuery(Query):
    consumer: text(min_length=1, max_length=512) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    min_idle_ms: query_int(ge=0, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    after: CursorId | None = None
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class GroupsQuery(Query):
    """``sort`` orders the stream's groups: by ``pending`` (the default), ``lag``, ``consumers`` or
    ``name``; ``order`` is ``desc`` unless told (names: ``asc``), ties go by name, and a lag Redis cannot
    tell comes last either way. Redis answers every group at once; ``offset`` and ``count`` cut the page."""

    sort: Literal[tuple(GROUP_SORTS)] = "pending"  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    order: Literal["desc", "asc"] | None = None
    offset: query_int(ge=0, le=I64_MAX) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class ConsumersQuery(Query):
    """``sort`` orders the group's consumers: by ``pending`` (the default), ``idle``, ``inactive``
    (Redis 7.2+) or ``name``; ``order`` is ``desc`` unless told (names: ``asc``), ties go by name, and an
    ``inactive`` Redis does not report comes last either way. ``offset`` and ``count`` cut the page."""

    sort: Literal[tuple(CONSUMER_SORTS)] = "pending"  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    order: Literal["desc", "asc"] | None = None
    offset: query_int(ge=0, le=I64_MAX) = 0  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=MAX_PAGE) = DEFAULT_PAGE  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class TriageFilterFields(BaseModel):
    """The dead letters of one triage count: ``signature`` (an error signature as ``/reports/`` and the
    triage show it), ``group`` and ``origin`` (the stream it came from) as the triage shows them, or
    ``no_group``/``no_origin`` for those that record none. All given parts must hold."""

    signature: text(max_length=300) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    group: text(max_length=512) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    origin: text(max_length=512) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    no_group: bool = False
    no_origin: bool = False

    @model_validator(mode="after")
    def _one_of_each(self) -> Self:
        if self.group is not None and self.no_group:
            raise _refuse("filter", "Give either group or no_group, not both.")
        if self.origin is not None and self.no_origin:
            raise _refuse("filter", "Give either origin or no_origin, not both.")
        return self

    def triage_filter(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in ("signature", "group", "origin", "no_group", "no_origin")}


class DlqEntriesQuery(TriageFilterFields, Query):
    """``error`` keeps entries whose error contains that text; the triage's filters (``signature``,
    ``group``, ``origin``, ``no_group``, ``no_origin``) keep a count's dead letters; ``before`` pages to
    older entries. A filtered page may be short with a ``next`` to go on from: each call reads a bounded
    number of entries."""

    error: text(max_length=200) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    before: EntryId | None = None
    count: query_int(ge=1, le=500) = 50  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class DlqTriageQuery(Query):
    """``before``: count the dead letters older than this ID (a previous answer's ``next``); ``limit``:
    how many to read at most (default ``BUSCONSOLE_DLQ_TRIAGE_LIMIT``)."""

    before: EntryId | None = None
    limit: query_int(ge=1, le=200_000) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class RequeueFilteredBody(TriageFilterFields, Body):
    """Requeue the dead letters of one triage count (at least one filter part). ``dry_run``: count them
    up to the newest dead letter now (200, with that ID as ``up_to``). Otherwise ``up_to`` is required:
    a background job requeues the matching dead letters up to it, each exactly once (202)."""

    up_to: EntryId | None = None
    dry_run: bool = False

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"signature": "ValueError: order <num> not found", "up_to": EXAMPLE_ID},
                                        {"group": "billing", "dry_run": True}]}
    )


class JobsQuery(Query):
    before: query_int(ge=1, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    state: JobState | None = None  # type: ignore[valid-type]  # JobState is built from the model's states


def _since(value: object) -> datetime:
    """An ISO-8601 date-time as the schema's pattern writes it (``parse_time`` alone would also take a
    bare date and other forms the description does not mention)."""
    given = _text(value, "time")
    if not _DATE_TIME(given):
        raise _refuse("since", f"{given[:64]!r} is not an ISO-8601 date-time (e.g. {EXAMPLE_TIME}).")
    try:
        return datetime.fromtimestamp(parse_time(given) / 1000, tz=UTC)
    except InvalidArgument as exc:
        raise _refuse("since", exc.message) from None


class AuditQuery(Query):
    """Filters (``action`` is a prefix) and the "older than" cursor ``before`` (the last row's id)."""

    action: text(max_length=64) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    user: text(max_length=150) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    connection: text(max_length=100) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    outcome: Literal["ok", "error", "denied"] | None = None
    since: Annotated[
        datetime,
        PlainValidator(_since),
        WithJsonSchema({"type": "string", "pattern": DATE_TIME_PATTERN, "examples": [EXAMPLE_TIME]}),
    ] | None = None
    before: query_int(ge=1, le=I64_MAX) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    count: query_int(ge=1, le=500) = 50  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
