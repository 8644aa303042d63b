"""A CEL expression's syntax tree, for the cost check (:mod:`.cost`) and its nesting limit.

Why hand-written: the CEL library parses and evaluates but hands out no tree (see :mod:`.analysis`),
and a bound on what an expression may cost has to see its structure: which comprehension runs inside
which, over what. This parser runs only on text the library has already compiled, over
:func:`.analysis.tokenize`'s tokens, and follows CEL's grammar (precedence from ``?:`` down to member
selection, calls, indexing, list, map and message literals). Anything it does not recognise raises
:class:`Unsupported` (the query is refused: an expression the cost check cannot read is not run).

Nesting: every level of the tree counts (a ``!``, a ``.name``, an index, a call, a bracket); chains of
one binary operator (``a && b && c``, ``1 + 2 + 3``) are one level, so a long conjunction is not "deep".
An expression deeper than :data:`MAX_DEPTH` raises :class:`TooDeep` before any recursive walk of it
(this parser recurses a bounded number of frames per bracket, and stops counting at the limit), so
``"!" * 1990 + "true"`` or a thousand dotted levels are a clear refusal, not a ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .analysis import Token

MAX_DEPTH = 32
"""Levels of nesting of an expression: a search box, not a program (the CEL library itself refuses
parentheses nested about a hundred deep)."""

_LEVELS: tuple[frozenset[str], ...] = (
    frozenset({"||"}),
    frozenset({"&&"}),
    frozenset({"==", "!=", "<", "<=", ">", ">=", "in"}),
    frozenset({"+", "-"}),
    frozenset({"*", "/", "%"}),
)
_LITERAL_WORDS = frozenset({"true", "false", "null"})


class TooDeep(Exception):
    """The expression nests deeper than :data:`MAX_DEPTH`."""


class Unsupported(Exception):
    """Syntax this parser does not know (the message says where)."""


class Node:
    """One node: ``kind`` is ``literal`` (``text`` the token), ``ident`` (``text`` the name, with a
    leading dot when written so), ``select`` (``text`` the field; ``children`` the operand), ``index``
    (operand, index), ``call`` (``text`` the function; ``children`` the receiver first when ``method``,
    then the arguments), ``list``, ``map`` (keys and values alternating), ``message`` (``text`` the
    type; field values), ``unary`` (``text`` the operator), ``chain`` (``ops``: the operators between
    ``children``, all of one precedence level) or ``cond`` (condition, then, else)."""

    __slots__ = ("children", "depth", "kind", "method", "ops", "text")

    def __init__(
        self,
        kind: str,
        text: str = "",
        children: Sequence[Node] = (),
        *,
        ops: tuple[str, ...] = (),
        method: bool = False,
    ) -> None:
        self.kind = kind
        self.text = text
        self.children = tuple(children)
        self.ops = ops
        self.method = method
        self.depth: int = 1 + max((c.depth for c in self.children), default=0)
        if self.depth > MAX_DEPTH:
            raise TooDeep

    def __repr__(self) -> str:
        inner = ", ".join(repr(c) for c in self.children)
        return f"{self.kind}({self.text!r}{', ' + repr(self.ops) if self.ops else ''}; {inner})"


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.nesting = 0

    def peek(self, ahead: int = 0) -> str:
        j = self.i + ahead
        return self.tokens[j].text if j < len(self.tokens) else ""

    def take(self) -> Token:
        if self.i >= len(self.tokens):
            raise Unsupported("the expression ends early")
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text:
            raise Unsupported(f"{text!r} expected, found {token.text[:20]!r}")

    def ident(self) -> str:
        token = self.take()
        if token.kind != "ident":
            raise Unsupported(f"a name expected, found {token.text[:20]!r}")
        return token.text

    def parse(self) -> Node:
        node = self.expr()
        if self.i != len(self.tokens):
            raise Unsupported(f"unexpected {self.peek()[:20]!r}")
        return node

    def expr(self) -> Node:
        # Each bracket, argument list and ternary branch comes through here: the recursion is bounded
        # by counting them, before the tree's own depth is known.
        self.nesting += 1
        if self.nesting > MAX_DEPTH:
            raise TooDeep
        node = self.binary(0)
        if self.peek() == "?":
            self.i += 1
            then = self.binary(0)
            self.expect(":")
            node = Node("cond", "", (node, then, self.expr()))
        self.nesting -= 1
        return node

    def binary(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        operands = [self.binary(level + 1)]
        ops: list[str] = []
        while self.peek() in _LEVELS[level]:
            ops.append(self.take().text)
            operands.append(self.binary(level + 1))
        return operands[0] if not ops else Node("chain", "", operands, ops=tuple(ops))

    def unary(self) -> Node:
        ops: list[str] = []
        while self.peek() in ("!", "-"):
            ops.append(self.take().text)
            if len(ops) > MAX_DEPTH:
                raise TooDeep
        node = self.member()
        for op in reversed(ops):
            node = Node("unary", op, (node,))
        return node

    def member(self) -> Node:
        node = self.primary()
        while True:
            ahead = self.peek()
            if ahead in (".", ".?"):
                self.i += 1
                name = self.ident()
                if self.peek() == "(":
                    node = Node("call", name, (node, *self.arguments(")")), method=True)
                else:
                    node = Node("select", name, (node,))
            elif ahead == "[":
                self.i += 1
                index = self.expr()
                self.expect("]")
                node = Node("index", "", (node, index))
            elif ahead == "{" and node.kind in ("ident", "select") and _qualified(node):
                self.i += 1
                node = Node("message", _qualified(node), self.fields())
            else:
                return node

    def arguments(self, close: str) -> list[Node]:
        """``( a, b )`` or ``[ a, b, ]`` after the opening token (``close`` ends it)."""
        self.take()  # the opening bracket
        items: list[Node] = []
        while self.peek() != close:
            items.append(self.expr())
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != close:
                raise Unsupported(f"',' or {close!r} expected, found {self.peek()[:20]!r}")
        self.i += 1
        return items

    def entries(self) -> list[Node]:
        """``{k: v, ...}`` after the ``{``: keys and values alternating."""
        items: list[Node] = []
        while self.peek() != "}":
            items.append(self.expr())
            self.expect(":")
            items.append(self.expr())
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "}":
                raise Unsupported(f"',' or '}}' expected, found {self.peek()[:20]!r}")
        self.i += 1
        return items

    def fields(self) -> list[Node]:
        """``Type{name: value, ...}`` after the ``{``: the values (field names are not evaluated)."""
        values: list[Node] = []
        while self.peek() != "}":
            self.ident()
            self.expect(":")
            values.append(self.expr())
            if self.peek() == ",":
                self.i += 1
            elif self.peek() != "}":
                raise Unsupported(f"',' or '}}' expected, found {self.peek()[:20]!r}")
        self.i += 1
        return values

    def primary(self) -> Node:
        ahead = self.peek()
        if ahead == "(":
            self.i += 1
            node = self.expr()
            self.expect(")")
            return node
        if ahead == "[":
            return Node("list", "", self.arguments("]"))
        if ahead == "{":
            self.i += 1
            return Node("map", "", self.entries())
        token = self.take()
        if token.kind in ("string", "number") or token.text in _LITERAL_WORDS:
            return Node("literal", token.text)
        leading = ""
        if token.text == ".":
            leading, token = ".", self.take()
        if token.kind != "ident" or token.text == "in":
            raise Unsupported(f"unexpected {token.text[:20]!r}")
        if self.peek() == "(":
            return Node("call", leading + token.text, self.arguments(")"))
        return Node("ident", leading + token.text)


def _qualified(node: Node) -> str:
    """``a.b.C`` of a select chain from an identifier, or "" for anything else."""
    names: list[str] = []
    while node.kind == "select":
        names.append(node.text)
        node = node.children[0]
    if node.kind != "ident":
        return ""
    return ".".join([node.text, *reversed(names)])


def parse(tokens: list[Token]) -> Node:
    """The tree of an expression the CEL library compiled; :class:`TooDeep` or :class:`Unsupported`."""
    if not tokens:
        raise Unsupported("the expression is empty")
    return _Parser(tokens).parse()
