"""The expressions most searches are, evaluated in plain Python with CEL's answers; CEL for the rest.

Why a second evaluator
----------------------
The CEL library evaluates a compiled program quickly, but first converts the activation into its own
values, map by map, which for a typical entry costs more than reading and decoding it (``bench/search.py``;
the figures are in docs/performance.md#figures-behind-the-design). Most searches are conjunctions
and disjunctions of comparisons on decoded payload values, which Python answers on the decoded values
as they are, with no conversion at all. :func:`compile_fast` recognises that subset and compiles it to
closures; any other expression (arithmetic, ternaries, macros, indexing, timestamps, escapes in a
string literal, uint literals...) gets None and is evaluated by CEL alone.

The subset: ``||``, ``&&``, ``!``; ``== != < <= > >= in`` between a path (``data.customer.id``), a
literal (int, double, plain string, bool, null; a list of them after ``in``), ``size(x)`` /
``x.size()``, ``has(path)`` and ``x.contains("s")`` / ``startsWith`` / ``endsWith``; parentheses.

Same answers, value by value
----------------------------
Each rule below was read off the library (``common-expression-language`` 0.10.0) and is checked
against it by the project's tests (``test_speedups_keep_answers.py``):

* an error (a missing key or variable, a select on a non-map, an operator on the wrong types) is a
  value, :data:`ERROR`, which ``&&`` and ``||`` absorb as CEL does (``false && error`` is false,
  ``true || error`` true) and everything else propagates; an entry matches only when the result is
  ``true``;
* ``==`` across types is false (``"42" == 42``, ``null == 0``, ``true == 1``); an int and a double
  compare as doubles (``9007199254740993 == 9007199254740992.0`` holds); ordering across types is an
  error, between bools, strings (code points), numbers allowed;
* ``size`` of a string is its UTF-8 byte length (so ``size("é") == 2`` in this library), of a list, map
  or bytes its length, of anything else an error;
* ``has(a.b)`` is whether map ``a`` has key ``b``, an error when ``a`` is not a map;
* ``in`` a list is equality with one item; ``in`` a map is a string key's presence (an int or a bool is
  never a key of a decoded map, a double or null is an error).

Whatever the evaluator cannot promise raises :class:`Unknown`, and the caller asks CEL for that one
entry: an int beyond 64 bits (CEL makes it a uint or a double), list or map equality, bytes, timestamps,
a missing variable named like one of CEL's types (``type == "x"`` is false, not an error, when there
is no ``type`` field), any value type not listed above. Decoded maps have string keys only (JSON,
msgpack via :func:`eventbus.decoding.decoded_value`, FastStream headers, ``fields``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping

from .analysis import Token, plain_string


class Unknown(Exception):
    """The evaluator cannot promise CEL's answer for this entry: ask CEL."""


class _Error:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ERROR"


ERROR = _Error()
"""A CEL error as a value (``&&`` and ``||`` may absorb it)."""

_MISSING = object()

Evaluator = Callable[[Mapping[str, object]], object]
"""A compiled expression: root variables by name in, CEL's value (or :data:`ERROR`) out."""

_NONE = type(None)
_KNOWN = frozenset({str, bool, int, float, _NONE, list, dict})
"""The types a decoded payload holds whose behaviour under every operator here is known."""
_NOT_A_MAP = frozenset({str, bool, int, float, _NONE, list, bytes})
"""Selecting a field of these, or asking ``has`` of them, is an error."""
_NUMBERS = frozenset({int, float})
_MIN, _MAX = -(2**63), 2**63 - 1
_CEL_TYPE_NAMES = frozenset(
    {"type", "int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "dyn"}
)
"""Identifiers the library resolves without a variable (``type == "x"`` is false, not an error)."""


# ------------------------------------------------------------------------------------------ the operators


def _int64(value: int) -> int:
    if not _MIN <= value <= _MAX:
        raise Unknown  # CEL holds it as a uint or a double
    return value


def _eq(a: object, b: object) -> object:
    if a is ERROR or b is ERROR:
        return ERROR
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is str or ta is float or ta is bool or ta is _NONE:
            return a == b
        if ta is int:
            return _int64(a) == _int64(b)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
        raise Unknown  # lists and maps (element-wise), bytes, timestamps
    if ta in _NUMBERS and tb in _NUMBERS:
        return float(_int64(a) if ta is int else a) == float(_int64(b) if tb is int else b)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
    if ta in _KNOWN and tb in _KNOWN:
        return False
    raise Unknown


def _ordered(a: object, b: object) -> tuple[object, object] | _Error:
    """The operands as Python compares them the way CEL orders them, or ERROR."""
    if a is ERROR or b is ERROR:
        return ERROR
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is bool):
        return a, b
    if ta in _NUMBERS and tb in _NUMBERS:
        if ta is int and tb is int:
            return _int64(a), _int64(b)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
        x = float(_int64(a) if ta is int else a)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
        y = float(_int64(b) if tb is int else b)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
        if x != x or y != y:
            raise Unknown  # NaN: the library refuses to order it
        return x, y
    if ta in _KNOWN and tb in _KNOWN:
        return ERROR
    raise Unknown


def _in(a: object, b: object) -> object:
    if a is ERROR or b is ERROR:
        return ERROR
    tb = type(b)
    if tb is list:
        return any(_eq(a, item) is True for item in b)  # type: ignore[attr-defined]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
    if tb is dict:
        ta = type(a)
        if ta is str:
            return a in b  # type: ignore[operator]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
        if ta is bool:
            return False
        if ta is int:
            _int64(a)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
            return False
        if ta is float or ta is _NONE:
            return ERROR  # not a valid map key type
        raise Unknown
    if tb in _KNOWN:
        return ERROR
    raise Unknown


def _size(value: object) -> object:
    t = type(value)
    if t is str:
        return len(value) if value.isascii() else len(value.encode("utf-8"))  # type: ignore[attr-defined, arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
    if t is list or t is dict or t is bytes:
        return len(value)  # type: ignore[arg-type]  # narrowed by the exact type() check above, which mypy does not follow through a variable (the hot path compares types, not isinstance)
    if value is ERROR or t in _KNOWN:
        return ERROR
    raise Unknown


def _truth(value: object) -> object:
    """``!value``."""
    if value is True:
        return False
    if value is False:
        return True
    if value is ERROR or type(value) in _KNOWN:
        return ERROR
    raise Unknown


_ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_STRING_METHODS = {"contains": operator.contains, "startsWith": str.startswith, "endsWith": str.endswith}


# --------------------------------------------------------------------------------------- the closures


def _root(name: str) -> Evaluator:
    type_name = name in _CEL_TYPE_NAMES

    def root(env: Mapping[str, object]) -> object:
        value = env.get(name, _MISSING)
        if value is _MISSING:
            if type_name:
                raise Unknown
            return ERROR
        return value

    return root


def _path(name: str, names: tuple[str, ...]) -> Evaluator:
    """``name.a.b...``: one closure for the whole chain, the commonest operand by far."""
    root = _root(name)

    def path(env: Mapping[str, object]) -> object:
        value = root(env)
        for key in names:
            if type(value) is dict:
                value = value.get(key, ERROR)
            elif value is ERROR or type(value) in _NOT_A_MAP:
                return ERROR
            else:
                raise Unknown
        return value

    return path if names else root


def _select(inner: Evaluator, key: str) -> Evaluator:
    return _path_from(inner, (key,))


def _path_from(inner: Evaluator, names: tuple[str, ...]) -> Evaluator:
    def path(env: Mapping[str, object]) -> object:
        value = inner(env)
        for key in names:
            if type(value) is dict:
                value = value.get(key, ERROR)
            elif value is ERROR or type(value) in _NOT_A_MAP:
                return ERROR
            else:
                raise Unknown
        return value

    return path


def _has(parent: Evaluator, key: str) -> Evaluator:
    def has(env: Mapping[str, object]) -> object:
        value = parent(env)
        if type(value) is dict:
            return key in value
        if value is ERROR or type(value) in _NOT_A_MAP:
            return ERROR
        raise Unknown

    return has


def _constant(value: object) -> Evaluator:
    return lambda env: value


def _equals_constant(inner: Evaluator, constant: object, *, negate: bool) -> Evaluator:
    """``x == "s"`` and its kind: the value's type checked once, the general rule only on a mismatch."""
    kind = type(constant)

    def equals(env: Mapping[str, object]) -> object:
        value = inner(env)
        result = value == constant if type(value) is kind and kind is not int else _eq(value, constant)
        if negate and result is not ERROR:
            return not result
        return result

    return equals


def _compare_constant(inner: Evaluator, op: str, constant: int | float) -> Evaluator:
    """``x > 100.0`` and its kind (``x`` on the left: the parser swaps a constant on the left): a value
    of the constant's type compared at once, the general rule only otherwise."""
    compare = _ORDER[op]
    kind = type(constant)

    def order(env: Mapping[str, object]) -> object:
        value = inner(env)
        if type(value) is kind and (value == value if kind is float else _MIN <= value <= _MAX):
            return compare(value, constant)
        pair = _ordered(value, constant)
        return pair if pair is ERROR else compare(*pair)  # type: ignore[misc]  # pair is a 2-tuple once it is not ERROR; mypy cannot narrow the sentinel by identity

    return order


def _relation(op: str, left: Evaluator, right: Evaluator) -> Evaluator:
    if op in ("==", "!="):
        negate = op == "!="

        def equality(env: Mapping[str, object]) -> object:
            result = _eq(left(env), right(env))
            return (not result) if negate and result is not ERROR else result

        return equality
    if op == "in":
        return lambda env: _in(left(env), right(env))
    compare = _ORDER[op]

    def order(env: Mapping[str, object]) -> object:
        pair = _ordered(left(env), right(env))
        return pair if pair is ERROR else compare(*pair)  # type: ignore[misc]  # pair is a 2-tuple once it is not ERROR; mypy cannot narrow the sentinel by identity

    return order


def _and(left: Evaluator, right: Evaluator) -> Evaluator:
    def conjunction(env: Mapping[str, object]) -> object:
        a = left(env)
        if a is False:
            return False
        b = right(env)
        if b is False:
            return False
        return True if a is True and b is True else ERROR

    return conjunction


def _or(left: Evaluator, right: Evaluator) -> Evaluator:
    def disjunction(env: Mapping[str, object]) -> object:
        a = left(env)
        if a is True:
            return True
        b = right(env)
        if b is True:
            return True
        return False if a is False and b is False else ERROR

    return disjunction


def _not(inner: Evaluator) -> Evaluator:
    return lambda env: _truth(inner(env))


def _size_of(inner: Evaluator) -> Evaluator:
    return lambda env: _size(inner(env))


def _string_method(inner: Evaluator, method: str, argument: str) -> Evaluator:
    test = _STRING_METHODS[method]

    def call(env: Mapping[str, object]) -> object:
        value = inner(env)
        if type(value) is str:
            return test(value, argument)  # type: ignore[operator]  # test is one of the typed comparison functions chosen above
        if value is ERROR or type(value) in _NOT_A_MAP:
            return ERROR
        raise Unknown

    return call


# ------------------------------------------------------------------------------------------ the parser


class _NotSimple(Exception):
    """The expression is outside the subset: CEL evaluates it."""


_RELATIONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in"})
_CONSTANT = object()


class _Node:
    """What the parser knows of an operand: its closure, and when it is a constant or a plain path,
    that too (``has`` needs a path; ``x == constant`` gets a faster closure)."""

    __slots__ = ("constant", "evaluate", "path")

    def __init__(
        self,
        evaluate: Evaluator,
        *,
        path: tuple[str, tuple[str, ...]] | None = None,
        constant: object = _CONSTANT,
    ) -> None:
        self.evaluate = evaluate
        self.path = path
        self.constant = constant


class _Parser:
    """Recursive descent over :func:`~.analysis.tokenize`'s tokens, CEL's precedence: ``||`` below
    ``&&`` below one relation below unary ``!`` / ``-`` below member selection and calls."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> str:
        return self.tokens[self.i].text if self.i < len(self.tokens) else ""

    def take(self) -> Token:
        if self.i >= len(self.tokens):
            raise _NotSimple
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, text: str) -> None:
        if self.take().text != text:
            raise _NotSimple

    def parse(self) -> Evaluator:
        node = self.disjunction()
        if self.i != len(self.tokens):
            raise _NotSimple
        return node.evaluate

    def disjunction(self) -> _Node:
        node = self.conjunction()
        while self.peek() == "||":
            self.i += 1
            node = _Node(_or(node.evaluate, self.conjunction().evaluate))
        return node

    def conjunction(self) -> _Node:
        node = self.relation()
        while self.peek() == "&&":
            self.i += 1
            node = _Node(_and(node.evaluate, self.relation().evaluate))
        return node

    def relation(self) -> _Node:
        left = self.unary()
        op = self.peek()
        if op not in _RELATIONS:
            return left
        self.i += 1
        right = self.unary()
        if self.peek() in _RELATIONS:
            raise _NotSimple  # a chain: (a < b) < c, rare and easy to get subtly wrong
        if op in ("==", "!=") and (left.constant is not _CONSTANT or right.constant is not _CONSTANT):
            operand, constant = (
                (left, right.constant) if right.constant is not _CONSTANT else (right, left.constant)
            )
            if type(constant) in (str, int, float, bool):
                return _Node(_equals_constant(operand.evaluate, constant, negate=op == "!="))
        if op in _ORDER and type(right.constant) in (int, float) and left.constant is _CONSTANT:
            return _Node(_compare_constant(left.evaluate, op, right.constant))  # type: ignore[arg-type]  # a constant node's value is a CEL scalar, which _compare_constant takes; typed as object on the node
        if op in _ORDER and type(left.constant) in (int, float) and right.constant is _CONSTANT:
            return _Node(_compare_constant(right.evaluate, _SWAPPED[op], left.constant))  # type: ignore[arg-type]  # a constant node's value is a CEL scalar, which _compare_constant takes; typed as object on the node
        return _Node(_relation(op, left.evaluate, right.evaluate))

    def unary(self) -> _Node:
        if self.peek() == "!":
            self.i += 1
            return _Node(_not(self.unary().evaluate))
        if self.peek() == "-":
            self.i += 1
            value = _number(self.take(), negate=True)
            return _Node(_constant(value), constant=value)
        return self.member()

    def member(self) -> _Node:
        node = self.primary()
        while self.peek() == ".":
            self.i += 1
            name = self.take()
            if name.kind != "ident":
                raise _NotSimple
            if self.peek() == "(":
                node = self.method(node, name.text)
            elif node.path is not None:
                root, names = node.path
                path = (root, (*names, name.text))
                node = _Node(_path(*path), path=path)
            else:
                node = _Node(_select(node.evaluate, name.text))
        return node

    def method(self, receiver: _Node, name: str) -> _Node:
        self.expect("(")
        if name == "size":
            self.expect(")")
            return _Node(_size_of(receiver.evaluate))
        if name not in _STRING_METHODS:
            raise _NotSimple
        argument = plain_string(self.take())
        if argument is None:
            raise _NotSimple
        self.expect(")")
        return _Node(_string_method(receiver.evaluate, name, argument))

    def primary(self) -> _Node:
        token = self.take()
        if token.text == "(":
            node = self.disjunction()
            self.expect(")")
            return _Node(node.evaluate, constant=node.constant)
        if token.text == "[":
            items = self.list_items()
            return _Node(_constant(items))
        if token.kind in ("string", "number") or token.text in ("true", "false", "null"):
            value = _literal(token)
            return _Node(_constant(value), constant=value)
        if token.kind != "ident" or token.text == "in":
            raise _NotSimple
        if self.peek() == "(":
            return self.function(token.text)
        return _Node(_root(token.text), path=(token.text, ()))

    def function(self, name: str) -> _Node:
        self.expect("(")
        argument = self.disjunction()
        self.expect(")")
        if name == "size":
            return _Node(_size_of(argument.evaluate))
        if name == "has" and argument.path is not None and argument.path[1]:
            root, names = argument.path
            return _Node(_has(_path(root, names[:-1]), names[-1]))
        raise _NotSimple

    def list_items(self) -> list[object]:
        items: list[object] = []
        while self.peek() != "]":
            if self.peek() == "-":
                self.i += 1
                items.append(_number(self.take(), negate=True))
            else:
                items.append(_literal(self.take()))
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "]":
                raise _NotSimple
        self.i += 1
        return items


def _literal(token: Token) -> object:
    if token.kind == "number":
        return _number(token)
    if token.kind == "string":
        value = plain_string(token)
        if value is None:
            raise _NotSimple  # an escape, a raw or bytes prefix, triple quotes
        return value
    literals = {"true": True, "false": False, "null": None}
    if token.text in literals:
        return literals[token.text]
    raise _NotSimple


def _number(token: Token, *, negate: bool = False) -> int | float:
    text = token.text
    if token.kind != "number" or text[-1:] in ("u", "U"):
        raise _NotSimple  # uint literals: a type decoded payloads never hold
    if text[:2] in ("0x", "0X"):
        value: int | float = int(text, 16)
    elif any(c in text for c in ".eE"):
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise _NotSimple
    else:
        value = int(text)
    if negate:
        value = -value
    if type(value) is int and not _MIN <= value <= _MAX:
        raise _NotSimple
    return value


def compile_fast(tokens: list[Token] | None) -> Evaluator | None:
    """The expression (already compiled by CEL, so valid) as a closure, or None when it is outside the
    subset (module docstring). The closure may raise :class:`Unknown` for one entry."""
    if not tokens:
        return None
    try:
        return _Parser(tokens).parse()
    except (_NotSimple, ValueError):
        return None
