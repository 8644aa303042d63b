"""A search query: a CEL expression over an entry's decoded fields, or plain text.

Django-free: the bus's command line (``python -m eventbus inspect STREAM --search``) and any program
searching the bus's streams (a web page turns :class:`QueryError` into a 400) compile and evaluate
queries with this one copy, so a query finds the same entries in all.

Which library, and why
----------------------
Both candidates were measured (the figures are in docs/performance.md#figures-behind-the-design):

* ``common-expression-language`` 0.10.0 (import ``cel``: Python bindings of the Rust ``cel`` crate)
  runs a compiled program quickly on scalar variables; what costs is converting Python values into
  CEL's, map by map, which caps a scan fed whole payloads well below the XRANGE floor.
* ``cel-python`` 0.5.0 (pure Python, a tree-walking interpreter over its own value classes) is over a
  hundred times slower per evaluation, whatever is done around it, so it cannot reach the search goal
  (within 3x of XRANGE + ``json.loads``).

So ``cel`` is the evaluator, and the search spares it what it can. The commonest expressions
(comparisons, ``size``, ``has``, ``in`` joined by ``&&`` and ``||``) are evaluated in plain Python on
the decoded values with CEL's semantics, no conversion at all (:mod:`.fast`, which hands an entry back
to CEL whenever it cannot promise CEL's answer). For the rest the search hands CEL as little as
possible (see :mod:`.analysis`):
only the variables the program references are decoded; a decoded value is cut down to the selection
chains the expression reads (``data.customer.id == 42`` gets ``{"customer": {"id": 42}}``), a chain
read only by ``size()`` to its shape; and a conservative test on the raw bytes rejects most entries
before any decoding when a conjunct names a string or a number (that test serves both evaluators).
``bench/search.py`` measures each kind of query against bare XRANGE + ``json.loads`` in the same run.

Safety: no ``eval``; the library evaluates only the activation it is given (strings, numbers, lists,
maps, bytes, timestamps built here) and one registered Python function, ``matches`` on RE2
(:mod:`.regex`); an expression is at most :data:`MAX_QUERY` characters. An error while evaluating one
entry (a missing field, a type mismatch, a non-boolean result) means that entry does not match; only
exceptions of the kinds a program registers with :func:`eventbus.interrupts.let_through` (Celery's soft
time limit, for a program whose tasks search) reach the caller.

Bounded before it runs: the library holds the GIL for a whole evaluation and cannot be
stopped half-way, so :class:`Query` refuses (:class:`QueryError`, a 400 on a web page, exit status 2
on the command line) an expression nested deeper than :data:`.syntax.MAX_DEPTH` levels, one whose
cost bound for an entry (:mod:`.cost`) is over :data:`.cost.MAX_STEPS` steps, and a literal regular
expression RE2 cannot compile. An expression whose cost depends on the entry's data (a comprehension
over one of its lists) is bounded again on each entry's activation before CEL sees it: an entry over
the bound is not evaluated, is no match, and is counted in :attr:`Query.too_costly`, which the callers
report (the search's status line and API answer say how many entries were left out).

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
``headers`` and ``body``, the first FastStream envelope's parts; ``entry``, the map ``{"id": the entry
ID, "time": its timestamp}``, and ``id`` and ``time`` for those two parts. A field always wins over
these built-in names (none of them hides a field): on a bus DLQ, whose dead letters carry the event's
own ``id`` field, ``id == "8639cf…"`` compares that field, and ``entry.id`` is the entry ID; where no
field is called ``id``, ``id`` is the entry ID as before. On a DLQ, the parsed dead-letter fields too:
``error``, ``traceback``, ``retries``, ``origin``, ``original_id``, ``failed_at`` (a timestamp) and
``group``; each is the entry's field of that name when the convention does not say, null when neither
does. They are parsed from the entry as the caller hands it over, so a masked ``dlq_error`` or
``dlq_traceback`` is searched masked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import cel

from .. import interrupts
from ..conventions import DlqPattern, parse_dlq_entry
from ..decoding import PREVIEW_LIMIT, decoded_value
from ..text import display_text, id_ms, id_time
from . import analysis, cost, regex, syntax
from .fast import Evaluator, compile_fast

MAX_QUERY = 2000
"""Characters of a query: a search box, not a program."""

_BARE = re.compile(r"^[\w.\-:/@]+$")
# Printable ASCII, tab, LF and CR: a value of only these decodes as text or JSON whose text is its bytes.
_NOT_VERBATIM = re.compile(rb"[^\t\n\r\x20-\x7e]")
# A JSON escape that may decode to a lone surrogate (``"\\ud800"``), a string the CEL library refuses
# to convert: CEL's answer for an entry holding one is "no match" if that value is in the activation.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")

ENTRY_VARIABLES = frozenset({"entry", "id", "time", "fields"})
"""The entry's own variables: each is a field of that name when the entry has one (a field is never
hidden); ``entry`` is ``{"id": ..., "time": ...}``, ``id`` and ``time`` its parts, ``fields`` all fields."""
DLQ_VARIABLES = ("error", "traceback", "retries", "origin", "original_id", "failed_at", "group")
_FASTSTREAM_PARTS = {"headers": "headers", "body": "data"}

Fields = tuple[tuple[bytes, bytes], ...]


class SearchEntry(Protocol):
    """What a query reads of an entry (the command line's rows, or any object with these two)."""

    @property
    def id(self) -> str: ...

    @property
    def fields(self) -> Fields: ...


class QueryError(ValueError):
    """A query that cannot be one (empty, too long, an expression that does not parse): the message
    says why, for a 400 on a web page and exit status 2 on the command line."""


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
    return {name: _prune(value[name], sub) for name, sub in plan.items() if name in value}  # type: ignore[attr-defined]  # value is a map here: a plan holds sub-plans only under map fields


def _shape(value: object) -> object:
    """What ``size()`` sees of ``value``: a list's length, a map's keys; anything else as it is."""
    if isinstance(value, list):
        return [None] * len(value)
    if isinstance(value, dict):
        return dict.fromkeys(value)
    return value


_KEEP: Mapping[str, object] = {}  # no plans: every value whole, as the plain-Python evaluator reads it


class Query:
    """A compiled query; :meth:`matches` answers for one entry and never raises for the entry's sake.

    ``patterns`` are the configured DLQ conventions (:func:`eventbus.conventions.parse_dlq_patterns`) by
    which a dead letter's variables are parsed."""

    def __init__(self, text: str, *, patterns: Sequence[DlqPattern] = ()) -> None:
        self.text = text
        self.patterns = tuple(patterns)
        self.program: cel.Program | None = None
        self.fast: Evaluator | None = None
        self.estimate: cost.Estimate | None = None
        self.too_costly = 0
        """Entries :meth:`matches` did not hand to CEL because their own data made the expression too
        costly (see :mod:`.cost`): not matches, and counted here so that callers can say so."""
        self._functions: dict[str, Callable[..., Any]] = {}
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
                self._bound(tokens)
        if self.program is None:
            self.needle = text.lower()
            self._needle_bytes = self.needle.encode("utf-8", "surrogatepass")
            self.roots: tuple[str, ...] = ()
            self._root_names: tuple[tuple[str, bytes], ...] = ()
            self.paths: dict[str, frozenset[tuple[str, ...]] | None] = {}
            self.plans: dict[str, object] = {}
            self.literals: tuple[frozenset[bytes | re.Pattern[bytes]], ...] = ()
            return
        self.roots = tuple(self.program.variables())
        # A root is an identifier, and only the bytes of that very name display as it (display_text
        # writes anything else with a backslash): a field is looked up by its bytes.
        self._root_names = tuple((name, name.encode()) for name in self.roots)
        self.fast = compile_fast(tokens)
        self.paths = analysis.root_paths(tokens) if tokens is not None else {}
        sized = analysis.size_only_paths(tokens) if tokens is not None else {}
        self.plans = {name: _plan(paths, sized.get(name, frozenset())) for name, paths in self.paths.items()}
        if tokens is None:
            self.literals = ()
        else:
            unsafe = ENTRY_VARIABLES | {"origin", "group", "original_id", "failed_at", "retries"}
            found = analysis.required_literals(tokens, frozenset(unsafe - {"fields"}))
            self.literals = tuple(frozenset(_as_bytes_needle(n) for n in group) for group in found)

    def _bound(self, tokens: list[analysis.Token] | None) -> None:
        """Refuse an expression too deep or too costly to run (:mod:`.syntax`, :mod:`.cost`) and point
        its ``matches`` calls at RE2 (:mod:`.regex`): every caller of :func:`compile_query` gets both."""
        if tokens is None:
            raise QueryError("This expression holds a character the cost check cannot read; it is not run.")
        try:
            tree = syntax.parse(tokens)
        except syntax.TooDeep:
            raise QueryError(
                f"This expression is nested too deep: at most {syntax.MAX_DEPTH} levels "
                "(of brackets, '!', '-', '.field' and calls) are allowed."
            ) from None
        except syntax.Unsupported as exc:
            raise QueryError(f"This expression cannot be checked for cost ({exc}); it is not run.") from None
        patterns = regex.Patterns()
        try:
            rewritten = regex.rewrite(tokens, patterns)
        except regex.PatternError as exc:
            raise QueryError(f"This expression cannot run: {exc}.") from None
        assert self.program is not None
        roots = tuple(self.program.variables())
        if rewritten is not None:
            self.program = cel.compile(rewritten)
            self._functions = {regex.FUNCTION: patterns.matches}
        self.estimate = cost.Estimate(tree, roots, frozenset({regex.FUNCTION}))
        if self.estimate.steps > cost.MAX_STEPS:
            raise QueryError(
                f"This expression is too costly to run: about {self.estimate.steps:,.0f} steps for each "
                f"entry, and at most {cost.MAX_STEPS:,} are allowed ({self.estimate.why}). "
                "Nested comprehensions multiply: narrow the lists they run over."
            )

    @property
    def is_text(self) -> bool:
        return self.program is None

    def execute(self, activation: Mapping[str, object]) -> object:
        """The CEL program's value for ``activation`` (with the query's registered functions); raises
        the library's errors. :meth:`matches` is the bounded, never-raising answer."""
        assert self.program is not None
        if self._functions:
            return self.program.execute(cel.Context(variables=dict(activation), functions=self._functions))
        return self.program.execute(activation)  # type: ignore[arg-type]  # cel's execute takes a plain dict too; its stubs say Context only

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

    def matches(self, entry: SearchEntry, *, dlq: bool = False, key: bytes = b"") -> bool:
        """Whether ``entry`` matches. ``dlq`` adds the dead-letter variables (``key`` names the DLQ,
        which some conventions read)."""
        if self.program is None:
            return self._text_matches(entry.fields)
        if not self.may_match(entry.fields):
            return False
        if self.fast is not None:
            for _, value in entry.fields:
                if b"\\u" in value and _SURROGATE_ESCAPE.search(value):
                    break  # a string CEL refuses may be in the activation: only CEL can answer
            else:
                try:
                    return self.fast(self.variables(entry, dlq=dlq, key=key)) is True
                except interrupts.LET_THROUGH:  # a signal's (eventbus.interrupts), not the entry's
                    raise
                except Exception:  # .fast.Unknown (only CEL can answer for this entry), or a bug: either
                    pass  # way CEL's answer below is the reference, and matches() must not raise
        try:
            activation = self.activation(entry, dlq=dlq, key=key)
            estimate = self.estimate
            if (
                estimate is not None
                and estimate.dynamic
                and _size(entry, key) > estimate.safe_size
                and estimate.steps_for(activation) > cost.MAX_STEPS
            ):
                self.too_costly += 1  # not handed to CEL, which could not be stopped (module docstring)
                return False
            return self.execute(activation) is True
        except interrupts.LET_THROUGH:  # a signal's (eventbus.interrupts), not the entry's
            raise
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

    def activation(self, entry: SearchEntry, *, dlq: bool, key: bytes) -> dict[str, object]:
        """The variables the program references, and only those, decoded (and cut to what it reads)."""
        return self._variables(entry, dlq=dlq, key=key, plans=self.plans)

    def variables(self, entry: SearchEntry, *, dlq: bool, key: bytes) -> dict[str, object]:
        """The variables the program references, decoded and whole: what :mod:`.fast` reads."""
        return self._variables(entry, dlq=dlq, key=key, plans=_KEEP)

    def _variables(
        self, entry: SearchEntry, *, dlq: bool, key: bytes, plans: Mapping[str, object]
    ) -> dict[str, object]:
        fields = entry.fields
        out: dict[str, object] = {}
        dead: Mapping[str, object] | None = None
        for name, name_bytes in self._root_names:
            raw = _raw(fields, name_bytes)
            if dlq and name in DLQ_VARIABLES:
                if dead is None:
                    dead = self._dlq_variables(key, entry)
                value = dead.get(name)
                if value is None and raw is not None:
                    value = _field_value(raw)
                out[name] = value
            elif raw is not None:  # a field wins over every built-in name: none hides a field
                out[name] = _prune(_field_value(raw), plans.get(name))
            elif name == "entry":
                out[name] = _prune({"id": entry.id, "time": _entry_time(entry.id)}, plans.get(name))
            elif name == "id":
                out[name] = entry.id
            elif name == "time":
                out[name] = _entry_time(entry.id)
            elif name == "fields":
                out[name] = {n: _field_value(v) for n, v in _first_by_name(fields).items()}
            elif name in _FASTSTREAM_PARTS:
                part = _faststream_part(fields, _FASTSTREAM_PARTS[name])
                if part is not _MISSING:
                    out[name] = _prune(part, plans.get(name))
        return out

    def _dlq_variables(self, key: bytes, entry: SearchEntry) -> dict[str, object]:
        parsed = parse_dlq_entry(key, entry.id, entry.fields, self.patterns)
        return {
            "error": parsed.error,
            "traceback": parsed.traceback,
            "retries": parsed.retries,
            "origin": display_text(parsed.original_stream) if parsed.original_stream is not None else None,
            "original_id": parsed.original_id,
            "failed_at": id_time(parsed.failed_at_ms) if parsed.failed_at_ms is not None else None,
            "group": parsed.group,
        }


_MISSING = object()


def _as_bytes_needle(needle: analysis.Needle) -> bytes | re.Pattern[bytes]:
    return needle.encode("utf-8", "surrogatepass") if isinstance(needle, str) else needle


def _holds_any(value: bytes, needles: frozenset[bytes | re.Pattern[bytes]]) -> bool:
    """Whether ``value`` may decode to something holding one of ``needles`` (see :meth:`Query.may_match`).

    An ASCII value without a backslash is text (a string: never equal to a number), JSON whose strings
    are verbatim runs of its bytes and whose numbers are written in digits, or, with a control character,
    binary, which CEL never finds equal to or containing a string or a number. A number written with
    16 digits or more may equal a literal whose digits it does not show (:func:`.analysis.number_needle`).
    """
    numeric = False
    for needle in needles:
        if isinstance(needle, bytes):
            if needle in value:
                return True
        elif needle.search(value):
            return True
        else:
            numeric = True
    return not value.isascii() or b"\\" in value or (numeric and analysis.has_long_number(value))


def _size(entry: SearchEntry, key: bytes) -> int:
    """More than any value an expression can read of ``entry`` holds, in items or bytes: its values,
    its names and the key (a DLQ's ``origin`` may come from it) as displayed (a byte shown as ``\\xNN``
    at worst), the ID and a margin for the time."""
    names = sum(len(name) for name, _ in entry.fields) + len(key)
    return sum(len(value) for _, value in entry.fields) + 4 * names + len(entry.id) + 64


def _raw(fields: Fields, name: bytes) -> bytes | None:
    """The value of the first field called ``name`` (Redis allows a name to repeat within an entry)."""
    for field, value in fields:
        if field == name:
            return value
    return None


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


def compile_query(text: str, *, patterns: Sequence[DlqPattern] = ()) -> Query:
    """The query typed in the box, the API's ``q`` or ``--search``; :class:`QueryError` when it cannot be
    one. ``patterns``: the configured DLQ conventions, for a DLQ's variables."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError("The search query is empty.")
    if len(text) > MAX_QUERY:
        raise QueryError(f"The search query is {len(text)} characters long; at most {MAX_QUERY} are allowed.")
    if "\x00" in text:
        raise QueryError("The search query contains a NUL character.")
    text = text.strip()
    query = Query(text, patterns=patterns)
    if query.is_text and _looks_like_an_expression(text):
        raise QueryError(f"This is not a valid expression: {_parse_error(text)}")
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
