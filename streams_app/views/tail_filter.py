"""The live tail's filter: search's language, compiled by search's own :func:`~streams_app.search.compile_query`.

A filter is what the search box takes (a CEL expression or plain text, the rule in
:mod:`eventbus.search.query`), evaluated by the same ``Query.matches`` on the same masked entries
(the tail's frames are built from them), so a text finds in the tail what it finds in search.

The old filter's ``path=value``. Before the tail used search's language it filtered in the browser with a syntax of its
own: ``data.customer.id=4`` kept every entry whose value at that path *contained* ``4`` (customer 42
too). That syntax is now read as the CEL equality it looked like, and the page says so ("filter read
as ``data.customer.id == 4``"): a bookmarked or shared tail address keeps working, with exact
equality. The rule, kept small on purpose (anything else is search's language as it stands):

- ``path=value`` with one ``=`` (not ``==``, ``!=``, ``<=``, ``>=``) and a ``path`` of names, ``.0`` or
  ``[0]`` indexes; ``value`` with no ``=``, ``&&`` or ``||`` in it;
- ``value`` is a JSON number, ``true``, ``false``, ``null`` or a quoted string, taken as that literal;
  anything else is a string (``type=order.paid`` is ``type == "order.paid"``); nothing after ``=`` is
  ``has(path)`` (``"name" in fields`` for a bare field name), as the old "the path exists";
- a name CEL cannot take as an identifier (``x-request-id``, a reserved word) is written as an index
  (``fields["x-request-id"]``, ``data["in"]``).

``path:value`` is not translated: the old filter read it as plain text, search does too, and plain
text is what ``orders:dlq``, ``12:30`` or ``redis://`` mean.

Written here rather than borrowed: no library reads this one-off syntax, and it is a regex and a
few string rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from streams_app import search
from streams_app.live.filtering import TailFilter

_NAME = r"[A-Za-z0-9_-]+"
_OLD = re.compile(rf"^\s*({_NAME}(?:\.{_NAME}|\[\d+\])*)\s*=\s*(.*?)\s*$", re.DOTALL)
_STEP = re.compile(rf"\.?({_NAME})|\[(\d+)\]")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$")
# CEL's reserved words (language definition): not identifiers, so written as an index.
_RESERVED = frozenset(
    ["true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if",
     "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"]
)
_INT64 = 2**63


def old_syntax_read(text: str) -> str | None:
    """The CEL an old ``path=value`` filter means (module docstring), or None when ``text`` is not one."""
    match = _OLD.match(text)
    if match is None:
        return None
    path, value = match.groups()
    if "=" in value or "&&" in value or "||" in value:
        return None
    steps: list[str | int] = [name if name is not None else int(index or 0) for name, index in _steps(path)]
    if not value:
        last = steps[-1]
        if len(steps) == 1:
            return f"{json.dumps(last)} in fields"
        if not isinstance(last, str) or not _IDENT.match(last) or last in _RESERVED:
            return None  # has() takes a field selection only
        return f"has({_path(steps)})"
    return f"{_path(steps)} == {_literal(value)}"


def _steps(path: str) -> list[tuple[str | None, str | None]]:
    out: list[tuple[str | None, str | None]] = []
    for match in _STEP.finditer(path):
        name, index = match.groups()
        if name is not None and name.isdigit() and out:
            out.append((None, name))  # items.0: an index, as the old filter read it
        else:
            out.append((name, index))
    return out


def _path(steps: list[str | int]) -> str:
    first, rest = steps[0], steps[1:]
    out = first if isinstance(first, str) and _IDENT.match(first) and first not in _RESERVED else (
        f"fields[{json.dumps(str(first))}]"
    )
    for step in rest:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _IDENT.match(step) and step not in _RESERVED:
            out += f".{step}"
        else:
            out += f"[{json.dumps(step)}]"
    return out


def _literal(value: str) -> str:
    if value in ("true", "false", "null"):
        return value
    if _NUMBER.match(value):
        if not any(c in value for c in ".eE"):
            return value if -_INT64 <= int(value) < _INT64 else json.dumps(value)
        return value
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if value[0] == '"':
            try:
                decoded: Any = json.loads(value)
            except ValueError:
                decoded = inner
            return json.dumps(decoded if isinstance(decoded, str) else inner, ensure_ascii=False)
        return json.dumps(inner, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ChosenFilter:
    """A filter the tail accepted: what the hub evaluates and what the page is told about it."""

    tail_filter: TailFilter
    frame: dict[str, Any]


def tail_filter_compile(text: str, *, key: bytes, dlq: bool) -> ChosenFilter:
    """The filter ``text`` as the tail runs it on ``key``; InvalidArgument (its message for the page) when
    search would refuse it. ``dlq``: the key is a dead-letter queue (its entries have ``error``...)."""
    given = text.strip()
    read_as = old_syntax_read(given)
    effective = read_as or given
    query = search.compile_query(effective)
    return ChosenFilter(
        tail_filter=TailFilter(
            text=effective,
            matches=lambda entry: query.matches(entry, dlq=dlq, key=key),
            left_out=lambda: query.too_costly,
        ),
        frame={
            "type": "status",
            "state": "filter",
            "filter": text,
            "query": effective,
            "kind": "text" if query.is_text else "expression",
            "read_as": read_as,
        },
    )
