"""What the search can learn from an expression's text before evaluating it, conservatively.

The CEL library parses and evaluates; it does not hand out its syntax tree. Two speed-ups need a little
of that tree, so this module tokenizes the (already compiled, hence valid) expression itself and gives
up, returning "nothing known", on anything it does not fully understand:

* **Paths** (:func:`root_paths`): for each top-level variable, the selection chains the expression
  reads through it (``data.customer.id`` -> ``("customer", "id")``). When *every* occurrence of a root
  is such a chain (no ``data[...]``, no bare ``data``, no ``data.?x``), a decoded value can be cut down
  to those chains before it is handed to CEL without changing any answer: the expression cannot
  observe anything else of it. A chain followed by ``(`` is a method call: its last name is dropped.
* **Sizes** (:func:`size_only_paths`): a chain read only as ``size(chain)`` is handed over as its
  shape (a list of nulls of the same length, a map's keys), which CEL converts much faster.
* **Required literals** (:func:`required_literals`): the expression is split at top-level ``&&`` only
  (no top-level ``||`` or ``?`` anywhere, else nothing is required). A conjunct of the exact forms
  ``path == "s"``, ``"s" == path``, ``path in ["s", "t"]`` and ``path.contains("s")`` /
  ``startsWith`` / ``endsWith``, where ``path`` is a chain from a payload field, requires one of its
  strings to appear in the decoded value of some field; ``path == 42`` and ``path in [1, 2]`` require
  the digits of one of the numbers (:func:`number_needle`). The caller turns that into a bytes test on the
  raw values that is only trusted for values whose decoded text is a verbatim substring of their bytes
  (see :mod:`eventbus.search.query`). Strings with a backslash, raw or bytes prefixes or triple quotes
  are never used as literals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)[uU]?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|\.\?|[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE,
)

_PLAIN_STRING = re.compile(r"""^(?:"([^"\\\n]*)"|'([^'\\\n]*)')$""")
_CONTAINS = frozenset({"contains", "startsWith", "endsWith"})
_KEYWORDS = frozenset({"in", "true", "false", "null"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


def tokenize(source: str) -> list[Token] | None:
    """The tokens of ``source`` without spaces and ``//`` comments (CEL has no other use for ``//``
    outside a string), or None when something does not tokenize."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            return None
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(Token(kind, match.group()))
        pos = match.end()
    return tokens


def plain_string(token: Token) -> str | None:
    """The value of a plain string literal (no prefix, no escape, one line), or None."""
    if token.kind != "string":
        return None
    match = _PLAIN_STRING.match(token.text)
    if match is None:
        return None
    return match.group(1) if match.group(1) is not None else match.group(2)


def number_needle(token: Token) -> re.Pattern[bytes] | None:
    """For a numeric literal, a pattern every JSON spelling of its value matches, or None.

    A JSON number equal to ``42`` is written ``42``, ``42.0``, ``4.2e1`` or ``0.042e3``: whatever the
    spelling, its significant digits appear in order with at most a decimal point among them. That holds
    because CEL compares an int with a double as doubles and two decimals of at most 15 significant
    digits (``DBL_DIG``) in the normal range never round to the same double; so a literal with more
    digits, or far from 1, gives no pattern, and a value spelling a number with 16 or more digits is let
    through (:func:`has_long_number`): ``41.99999999999999999`` parses to ``42.0``. Zero has no significant
    digit, so it gives no pattern.
    """
    if token.kind != "number":
        return None
    text = token.text.rstrip("uU")
    try:
        value = Decimal(int(text, 16)) if text[:2] in ("0x", "0X") else Decimal(text)
    except (ArithmeticError, ValueError):
        return None
    if not value.is_finite() or value == 0 or not -300 <= value.adjusted() <= 300:
        return None
    digits = "".join(str(d) for d in value.normalize().as_tuple().digits)
    if len(digits) > 15:
        return None
    return re.compile(r"\.?".join(digits).encode())


_NUMBER_RUNS = bytes(0x30 if 0x30 <= b <= 0x39 or b == 0x2E else 0x20 for b in range(256))
_LONG_RUN = b"0" * 16


def has_long_number(raw: bytes) -> bool:
    """Whether ``raw`` holds a run of 16 digits and points: the spelling of every number with 16 or more
    significant digits, which may round to a double no short literal spells. (A translate and a
    substring test: a regex scanning every entry of a search cost ten times as much.)"""
    return _LONG_RUN in raw.translate(_NUMBER_RUNS)


Needle = str | re.Pattern[bytes]
"""What a conjunct requires to appear: a string (as its UTF-8 bytes), or a number's digits pattern."""


def _needle(token: Token) -> Needle | None:
    return plain_string(token) if token.kind == "string" else number_needle(token)


def _is_root(tokens: list[Token], i: int) -> bool:
    """Whether ``tokens[i]`` is an identifier standing for a variable (not a member, call or keyword)."""
    tok = tokens[i]
    if tok.kind != "ident" or tok.text in _KEYWORDS:
        return False
    if i > 0 and tokens[i - 1].text in (".", ".?"):
        return False
    return not (i + 1 < len(tokens) and tokens[i + 1].text == "(")  # a global function: size(...)


def _chain(tokens: list[Token], i: int) -> tuple[tuple[str, ...], int]:
    """The ``.name`` selections after the root at ``i``, and the index after them (a call drops its name)."""
    names: list[str] = []
    j = i + 1
    while j + 1 < len(tokens) and tokens[j].text == "." and tokens[j + 1].kind == "ident":
        names.append(tokens[j + 1].text)
        j += 2
    if names and j < len(tokens) and tokens[j].text == "(":
        names.pop()
        j -= 2
    return tuple(names), j


def root_paths(tokens: list[Token]) -> dict[str, frozenset[tuple[str, ...]] | None]:
    """For each root variable, the chains read through it; None when a use is not a plain chain."""
    found: dict[str, set[tuple[str, ...]] | None] = {}
    for i in range(len(tokens)):
        if not _is_root(tokens, i):
            continue
        name = tokens[i].text
        path, after = _chain(tokens, i)
        plain = bool(path) and not (after < len(tokens) and tokens[after].text in ("[", ".?"))
        if not plain:
            found[name] = None
        elif found.get(name, set()) is not None:
            found.setdefault(name, set()).add(path)  # type: ignore[union-attr]  # found holds sets for every name reaching here; None marks only names seen whole
    return {name: (frozenset(paths) if paths is not None else None) for name, paths in found.items()}


def size_only_paths(tokens: list[Token]) -> dict[str, frozenset[tuple[str, ...]]]:
    """For each root, the chains read only as ``size(chain)`` and extended by no other chain.

    CEL's ``size`` of a list, a map or a string depends on its length (its keys' count) alone, so such a
    value can be handed over as its shape (``[None] * n``): converting a list of maps costs CEL far
    more than a list of nulls."""
    wrapped: dict[str, set[tuple[str, ...]]] = {}
    other: dict[str, set[tuple[str, ...]]] = {}
    for i in range(len(tokens)):
        if not _is_root(tokens, i):
            continue
        path, after = _chain(tokens, i)
        if not path:
            continue
        in_size = (
            i >= 2
            and tokens[i - 1].text == "("
            and tokens[i - 2].text == "size"
            and (i < 3 or tokens[i - 3].text not in (".", ".?"))
            and after < len(tokens)
            and tokens[after].text == ")"
        )
        (wrapped if in_size else other).setdefault(tokens[i].text, set()).add(path)
    out: dict[str, frozenset[tuple[str, ...]]] = {}
    for name, paths in wrapped.items():
        every = paths | other.get(name, set())
        out[name] = frozenset(
            p
            for p in paths
            if p not in other.get(name, set()) and not any(q != p and q[: len(p)] == p for q in every)
        )
    return out


def _top_level_split(tokens: list[Token]) -> list[list[Token]] | None:
    """``tokens`` cut at depth-0 ``&&``; None if a depth-0 ``||`` or ``?`` makes that unsound."""
    parts: list[list[Token]] = [[]]
    depth = 0
    for tok in tokens:
        if tok.text in ("(", "[", "{"):
            depth += 1
        elif tok.text in (")", "]", "}"):
            depth -= 1
        if depth == 0 and tok.text in ("||", "?"):
            return None
        if depth == 0 and tok.text == "&&":
            parts.append([])
        else:
            parts[-1].append(tok)
    return parts


def _strip_parens(part: list[Token]) -> list[Token]:
    while len(part) >= 2 and part[0].text == "(" and part[-1].text == ")":
        depth = 0
        for k, tok in enumerate(part):
            depth += tok.text == "("
            depth -= tok.text == ")"
            if depth == 0 and k < len(part) - 1:
                return part  # "(a) == (b)": the first parenthesis closes early
        part = part[1:-1]
    return part


def _path_end(part: list[Token], start: int) -> int | None:
    """The index after a chain ``root.a.b`` starting at ``start`` (a root and at least zero selections)."""
    if start >= len(part) or part[start].kind != "ident" or part[start].text in _KEYWORDS:
        return None
    j = start + 1
    while j + 1 < len(part) and part[j].text == "." and part[j + 1].kind == "ident":
        j += 2
    return j


def _conjunct_literals(part: list[Token], unsafe_roots: frozenset[str]) -> frozenset[Needle] | None:
    """What the conjunct requires, one of which must appear; None when it requires nothing we can use."""
    part = _strip_parens(part)
    if not part:
        return None
    if part[0].kind in ("string", "number") and len(part) >= 3 and part[1].text == "==":
        needle, rest = _needle(part[0]), part[2:]
        end = _path_end(rest, 0)
        if needle is None or end != len(rest) or rest[0].text in unsafe_roots:
            return None
        return frozenset({needle})
    end = _path_end(part, 0)
    if end is None or part[0].text in unsafe_roots:
        return None
    tail = part[end:]
    if len(tail) == 2 and tail[0].text == "==":
        needle = _needle(tail[1])
        return frozenset({needle}) if needle is not None else None
    if len(tail) >= 4 and tail[0].text == "in" and tail[1].text == "[" and tail[-1].text == "]":
        items = tail[2:-1]
        needles = [_needle(t) for t in items[0::2]]
        commas_ok = all(t.text == "," for t in items[1::2])
        if needles and commas_ok and all(x is not None for x in needles):
            return frozenset(x for x in needles if x is not None)
        return None
    # a method call: the chain's last name is the method (root.a.contains("x"))
    if end - 2 > 0 and part[end - 1].text in _CONTAINS and part[end - 2].text == ".":
        call = part[end:]
        if len(call) == 3 and call[0].text == "(" and call[2].text == ")":
            literal = plain_string(call[1])
            return frozenset({literal}) if literal is not None else None
    return None


def required_literals(tokens: list[Token], unsafe_roots: frozenset[str]) -> tuple[frozenset[Needle], ...]:
    """One set per usable conjunct: a match must show, in some decoded field value, a string of each set.

    ``unsafe_roots`` are variables whose values do not come from a field's bytes (``id``, ``time``,
    a DLQ's ``origin`` which may come from the key): conjuncts on them require nothing.
    """
    parts = _top_level_split(tokens)
    if parts is None:
        return ()
    found = (_conjunct_literals(part, unsafe_roots) for part in parts)
    return tuple(literals for literals in found if literals)
