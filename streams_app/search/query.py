"""A search query: a CEL expression over an entry's decoded fields, or plain text.

Which library, and why
----------------------
Both candidates were measured (November 2026, this project's 2-core test machine):

* ``common-expression-language`` 0.10.0 (import ``cel``: Python bindings of the Rust ``cel`` crate)
  runs a compiled program in well under 1 µs on scalar variables; what costs is converting Python
  values into CEL's: about 2 µs per map, 12 µs for a list of five small maps, 25 µs for a typical
  6-key JSON order. Fed whole payloads it would cap a scan at about 40k entries/s.
* ``cel-python`` 0.5.0 (pure Python, a tree-walking interpreter over its own value classes) takes
  110 µs for ``x == 1`` and 140-270 µs for the issue's examples: under 10k entries/s whatever we do
  around it, so it cannot reach the goal (200k entries/s, within 3x of XRANGE + ``json.loads``).

So ``cel`` is the evaluator, and the search hands it as little as possible (see :mod:`.analysis`):
only the variables the program references are decoded; a decoded value is cut down to the selection
chains the expression reads (``data.customer.id == 42`` gets ``{"customer": {"id": 42}}``), a chain
read only by ``size()`` to its shape; and a conservative test on the raw bytes rejects most entries
before any decoding when a conjunct names a string or a number. ``bench/search.py`` on 1M JSON entries:
plain text 213k entries/s, ``type == "order.refunded"`` 228k/s, ``data.customer.id == 42`` 191k/s (the
floor, bare XRANGE + ``json.loads``, did 183k/s in the same run), ``size(data.items) > 3 &&
data.total > 100.0`` (no prefilter possible; a quarter of the entries match) 57k/s, 3.2x the floor.

Safety: no ``eval``; the library evaluates only the activation it is given (strings, numbers, lists,
maps, bytes, timestamps built here), registers no Python function, and an expression is at most
:data:`MAX_QUERY` characters. An error while evaluating one entry (a missing field, a type mismatch,
a non-boolean result) means that entry does not match.

The query rule (shown in the page's help)
-----------------------------------------
A query is an **expression** when CEL parses it and it is more than a bare word, that is, when it holds
any character other than letters, digits and ``_ . - : / @``. Anything else is **plain text**:
``timeout``, ``order.paid``, ``42``, ``payment failed``, ``can't connect``; except that a query using
CEL's operators or functions (``==``, ``!=``, ``<=``, ``>=``, ``&&``, ``||``, `` in [``, ``has(``,
``size(``, ``.contains(``, ...) that does not parse is refused with the parser's message (a 400): it was
meant as an expression, and "no match" would hide the typo. Plain text matches an entry
when the name or the value of one of its fields contains it, ignoring case; values are searched as text:
text and JSON as written, msgpack and FastStream envelopes as the JSON of their decoded value (headers and
body), and binary values (shown as hex) not at all. Only the first 64 KiB of a value are searched, as
only they are decoded for the page.

Variables of an expression
--------------------------
Every field by name, decoded (JSON and msgpack as maps and lists, text as a string, binary as bytes, a
FastStream envelope as ``{"headers", "data", "data_format"}``; the first of repeated names); ``fields``,
the map of all of them by name (for names that are not identifiers: ``fields["x-request-id"]``);
``headers`` and ``body``, the first FastStream envelope's parts unless a field has that name; ``id`` (the
entry ID, a string) and ``time`` (its timestamp). On a DLQ, the parsed dead-letter fields too:
``error``, ``retries``, ``origin``, ``original_id``, ``failed_at`` (a timestamp) and ``group``; each is the
entry's field of that name when the convention does not say, null when neither does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime

import cel

from streams_app.redis_ops.conventions import parse_dlq_entry
from streams_app.redis_ops.decoding import PREVIEW_LIMIT, decoded_value, display_text
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import id_ms, id_time
from streams_app.redis_ops.types import Entry

from . import analysis

MAX_QUERY = 2000
"""Characters of a query: a search box, not a program."""

_BARE = re.compile(r"^[\w.\-:/@]+$")
# Printable ASCII, tab, LF and CR: a value of only these decodes as text or JSON whose text is its bytes.
_NOT_VERBATIM = re.compile(rb"[^\t\n\r\x20-\x7e]")

ENTRY_VARIABLES = frozenset({"id", "time", "fields"})
DLQ_VARIABLES = ("error", "retries", "origin", "original_id", "failed_at", "group")
_FASTSTREAM_PARTS = {"headers": "headers", "body": "data"}


def is_expression_text(text: str) -> bool:
    """The first half of the rule: more than a bare word (whether it parses is the second)."""
    return not _BARE.match(text)


def _verbatim(raw: bytes) -> bool:
    """Whether ``raw`` decodes as text or JSON whose text as written is exactly its bytes (printable ASCII)."""
    return _NOT_VERBATIM.search(raw) is None


def _field_value(raw: bytes) -> object:
    fmt, value = decoded_value(raw)
    return raw if fmt == "hex" else value


_SHAPE = object()
"""A cut-down plan's leaf: only the value's shape is read (``size()``)."""


def _plan(
    paths: frozenset[tuple[str, ...]] | None, sized: frozenset[tuple[str, ...]] = frozenset()
) -> object:
    """How to cut a value down to ``paths`` (see :mod:`.analysis`), worked out once per query: None
    keeps the value whole, :data:`_SHAPE` keeps its shape (a path in ``sized``, read only by
    ``size()``), a dict maps each key to keep to its own plan."""
    if paths is None:
        return None
    if () in paths:
        return _SHAPE if len(paths) == 1 and () in sized else None
    heads: dict[str, set[tuple[str, ...]]] = {}
    for path in paths:
        heads.setdefault(path[0], set()).add(path[1:])
    sized_heads: dict[str, set[tuple[str, ...]]] = {}
    for path in sized:
        if path:
            sized_heads.setdefault(path[0], set()).add(path[1:])
    return {
        name: _plan(frozenset(rest), frozenset(sized_heads.get(name, ()))) for name, rest in heads.items()
    }


def _prune(value: object, plan: object) -> object:
    """``value`` cut down by ``plan`` (:func:`_plan`); only maps are cut."""
    if plan is None:
        return value
    if plan is _SHAPE:
        return _shape(value)
    if not isinstance(value, dict):
        return value
    return {name: _prune(value[name], sub) for name, sub in plan.items() if name in value}  # type: ignore[attr-defined]


def _shape(value: object) -> object:
    """What ``size()`` sees of ``value``: a list's length, a map's keys; anything else as it is."""
    if isinstance(value, list):
        return [None] * len(value)
    if isinstance(value, dict):
        return dict.fromkeys(value)
    return value


class Query:
    """A compiled query; :meth:`matches` answers for one entry and never raises for the entry's sake."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.program: cel.Program | None = None
        self.needle = ""
        self._needle_bytes = b""
        tokens = None
        if is_expression_text(text):
            try:
                self.program = cel.compile(text)
            except (ValueError, RuntimeError, TypeError):
                self.program = None
            if self.program is not None:
                tokens = analysis.tokenize(text)
        if self.program is None:
            self.needle = text.lower()
            self._needle_bytes = self.needle.encode("utf-8", "surrogatepass")
            self.roots: tuple[str, ...] = ()
            self.paths: dict[str, frozenset[tuple[str, ...]] | None] = {}
            self.plans: dict[str, object] = {}
            self.literals: tuple[frozenset[bytes | re.Pattern[bytes]], ...] = ()
            return
        self.roots = tuple(self.program.variables())
        self.paths = analysis.root_paths(tokens) if tokens is not None else {}
        sized = analysis.size_only_paths(tokens) if tokens is not None else {}
        self.plans = {name: _plan(paths, sized.get(name, frozenset())) for name, paths in self.paths.items()}
        if tokens is None:
            self.literals = ()
        else:
            unsafe = ENTRY_VARIABLES | {"origin", "group", "original_id", "failed_at", "retries"}
            found = analysis.required_literals(tokens, frozenset(unsafe - {"fields"}))
            self.literals = tuple(frozenset(_as_bytes_needle(n) for n in group) for group in found)

    @property
    def is_text(self) -> bool:
        return self.program is None

    # ------------------------------------------------------------------------------ the cheap test

    def may_match(self, fields: Fields) -> bool:
        """False only when the entry provably does not match: a test on the raw bytes, before decoding.

        Each required group (:func:`.analysis.required_literals`) needs a value holding one of its
        strings: a value whose bytes are ASCII without a backslash decodes to text or JSON whose strings
        are runs of those very bytes (or, with a control character, to binary, which no string equals),
        so the bytes tell; any other value might hold anything once decoded, so it lets the entry through.
        """
        if self.program is None:
            return True  # plain text: :meth:`matches` is itself a bytes test wherever that is exact
        for group in self.literals:  # loops, not nested generators: this runs for every entry scanned
            for _, value in fields:
                if _holds_any(value, group):
                    break
            else:
                return False
        return True

    # ------------------------------------------------------------------------------ the full answer

    def matches(self, entry: Entry, *, dlq: bool = False, key: bytes = b"") -> bool:
        """Whether ``entry`` matches. ``dlq`` adds the dead-letter variables (``key`` names the DLQ,
        which some conventions read)."""
        if self.program is None:
            return self._text_matches(entry.fields)
        if not self.may_match(entry.fields):
            return False
        try:
            return self.program.execute(self.activation(entry, dlq=dlq, key=key)) is True
        except Exception:  # the library's ValueError/TypeError/RuntimeError: this entry does not match
            return False

    def _text_matches(self, fields: Fields) -> bool:
        """Plain text, as bytes wherever that is exact: an ASCII name without NUL is its display text,
        and an ASCII value is its own text (text or JSON as written) or, with a control character,
        binary (shown as hex, not searched)."""
        needle = self._needle_bytes
        for name, value in fields:
            if name.isascii() and b"\x00" not in name:
                if needle in name.lower():
                    return True
            elif self.needle in display_text(name).lower():
                return True
            cut = value[:PREVIEW_LIMIT]
            if cut.isascii():
                if needle in cut.lower() and _verbatim(cut):
                    return True
            elif self.needle in searchable_text(value).lower():
                return True
        return False

    def activation(self, entry: Entry, *, dlq: bool, key: bytes) -> dict[str, object]:
        """The variables the program references, and only those, decoded (and cut to what it reads)."""
        named = _first_by_name(entry.fields)
        out: dict[str, object] = {}
        dead: Mapping[str, object] | None = None
        for name in self.roots:
            if dlq and name in DLQ_VARIABLES:
                if dead is None:
                    dead = _dlq_variables(key, entry)
                value = dead.get(name)
                if value is None and name in named:
                    value = _field_value(named[name])
                out[name] = value
            elif name == "id":
                out[name] = entry.id
            elif name == "time":
                out[name] = _entry_time(entry.id)
            elif name == "fields":
                out[name] = {n: _field_value(v) for n, v in named.items()}
            elif name in named:
                out[name] = _prune(_field_value(named[name]), self.plans.get(name))
            elif name in _FASTSTREAM_PARTS:
                part = _faststream_part(entry.fields, _FASTSTREAM_PARTS[name])
                if part is not _MISSING:
                    out[name] = _prune(part, self.plans.get(name))
        return out


Fields = tuple[tuple[bytes, bytes], ...]
_MISSING = object()


def _as_bytes_needle(needle: analysis.Needle) -> bytes | re.Pattern[bytes]:
    return needle.encode("utf-8", "surrogatepass") if isinstance(needle, str) else needle


def _holds_any(value: bytes, needles: frozenset[bytes | re.Pattern[bytes]]) -> bool:
    """Whether ``value`` may decode to something holding one of ``needles`` (see :meth:`Query.may_match`).

    An ASCII value without a backslash is text (a string: never equal to a number), JSON whose strings
    are verbatim runs of its bytes and whose numbers are written in digits, or, with a control character,
    binary, which CEL never finds equal to or containing a string or a number."""
    for needle in needles:
        if needle in value if isinstance(needle, bytes) else needle.search(value):
            return True
    return not value.isascii() or b"\\" in value


def _first_by_name(fields: Fields) -> dict[str, bytes]:
    named: dict[str, bytes] = {}
    for name, value in fields:
        # display_text's result for the common ASCII name without NUL, without its regex passes
        text = name.decode() if name.isascii() and b"\x00" not in name else display_text(name)
        named.setdefault(text, value)
    return named


def _entry_time(entry_id: str) -> datetime:
    return id_time(id_ms(entry_id) or 0)


def _faststream_part(fields: Fields, part: str) -> object:
    for _, value in fields:
        fmt, decoded = decoded_value(value)
        if fmt == "faststream" and isinstance(decoded, dict):
            return decoded.get(part)
    return _MISSING


def _dlq_variables(key: bytes, entry: Entry) -> dict[str, object]:
    parsed = parse_dlq_entry(key, entry.id, entry.fields)
    return {
        "error": parsed.error,
        "retries": parsed.retries,
        "origin": display_text(parsed.original_stream) if parsed.original_stream is not None else None,
        "original_id": parsed.original_id,
        "failed_at": id_time(parsed.failed_at_ms) if parsed.failed_at_ms is not None else None,
        "group": parsed.group,
    }


def searchable_text(raw: bytes) -> str:
    """A value as plain-text search sees it (module docstring): text and JSON as written, msgpack and
    FastStream as the JSON of their decoded value, binary as nothing."""
    fmt, value = decoded_value(raw)
    if fmt == "text":
        return str(value)
    if fmt == "json":
        return raw[:PREVIEW_LIMIT].decode("utf-8", "replace")
    if fmt == "hex":
        return ""
    return json.dumps(value, ensure_ascii=False)


def compile_query(text: str) -> Query:
    """The query typed in the box or the API's ``q``; InvalidArgument (a 400) when it cannot be one."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidArgument("The search query is empty.")
    if len(text) > MAX_QUERY:
        raise InvalidArgument(
            f"The search query is {len(text)} characters long; at most {MAX_QUERY} are allowed."
        )
    if "\x00" in text:
        raise InvalidArgument("The search query contains a NUL character.")
    text = text.strip()
    query = Query(text)
    if query.is_text and _looks_like_an_expression(text):
        raise InvalidArgument(f"This is not a valid expression: {_parse_error(text)}")
    return query


_OPERATORS = (
    "==",
    "!=",
    "<=",
    ">=",
    "&&",
    "||",
    "has(",
    "size(",
    ".contains(",
    ".startsWith(",
    ".endsWith(",
    ".exists(",
    ".all(",
    " in [",
)


def _looks_like_an_expression(text: str) -> bool:
    """A query that fails to parse is plain text, unless it uses CEL's operators or functions: then it was
    meant as an expression, and the user is better served by the parser's message than by no match."""
    return any(op in text for op in _OPERATORS)


def _parse_error(text: str) -> str:
    try:
        cel.compile(text)
    except Exception as exc:  # the library's ValueError with the position
        message = str(exc)
        return message.split("ERROR: ", 1)[-1][:300]
    return "it does not parse."
