"""What an expression may cost one entry, bounded before the CEL library runs it.

Why: the CEL library holds the GIL for the whole of one ``execute`` (a deeply nested ``exists`` stalled
every other thread of the web process for as long as it ran), and nothing in it stops a program half-way. So a program must be known to be short before
it starts: :class:`Estimate` reads the syntax tree (:mod:`.syntax`) and gives an upper bound, in
*steps*, of the work one evaluation does. A step is what CEL spends on one node of the tree (a
comparison, a selection, one item of a literal, one iteration of a comprehension's body), or on
:data:`BYTES_PER_STEP` bytes of a string it copies, compares or converts. What a step costs is measured
by ``bench/cost.py`` (docs/performance.md#figures-behind-the-design); :data:`MAX_STEPS` is set so that
the dearest allowed evaluation, in the dearest shapes (deep equality of maps, lists built in a loop), stays
within the 10 ms goal of the longest single evaluation.

Why written here: cel-go has a cost estimator, but the Rust ``cel`` crate behind the Python binding
has none and hands out no tree, and no other package bounds a CEL expression for it; the model below
follows the library's measured behaviour (the quadratic ``map``/``filter`` included), not cel-go's.

How the bound is built (an abstract evaluation, one pass over the tree):

* every value has a *shape*: an upper bound on its size (a list's or a map's length, a string's or
  bytes' length in bytes), on its items (the join of a list's items or a map's values), its keys and
  its fields by name, and on its whole size (``total``: nodes and bytes, for deep copies and compares);
* a comprehension (``exists``, ``all``, ``exists_one``, ``map``, ``filter``) costs its range, then its
  body once per item of the range's size, with its variable bound to the range's items' shape: nested
  comprehensions multiply; ``map`` and ``filter`` give lists of that many items, and pay n^2/2 item
  copies besides (the library appends to its result by copying it);
* ``+`` copies both operands (a chain ``s + s + s`` copies its growing prefix each time), ``==``,
  ``in``, ``contains`` and their kin compare up to the smaller side, literals cost their items;
* ``?:`` costs its condition and its dearer branch; ``&&`` and ``||`` both sides (no short cut is
  assumed); an unknown function its arguments (CEL stops at it with an error).

Data values: at compile time a variable's shape is a *probe* of one item at every level (an entry
whose lists hold one item each): an expression too costly even then is refused (:data:`MAX_STEPS`, the
caller's 400). When the cost depends on the data at all (the same tree measured with a probe of a
billion items costs more), :class:`Estimate` is ``dynamic``: before an entry is handed to CEL, its cost
is measured again on that entry's activation, whose sizes are known (it is built in Python), and an
entry over the limit is not evaluated (:class:`eventbus.search.query.Query` counts it as too costly).
Sizes are read lazily: only the values a comprehension's range or a copy actually reaches are walked,
and an entry no bigger than :attr:`Estimate.safe_size` is not measured at all. Shapes stay flat (a
literal of a thousand items is one union, not a chain), so no walk recurses deeper than the tree.

Regular expressions (``matches``) run on RE2 through a registered Python function
(:mod:`.regex`), which releases the GIL while it matches: a call costs a fixed
:data:`CALL_STEPS` plus its operands' conversion, not the match itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from .syntax import Node

MAX_STEPS = 200_000
"""Steps one entry's evaluation may take (module docstring): about 10 ms of CEL holding the GIL."""

WORST_NS_PER_STEP = 50
"""A step at its dearest (deep equality of maps, lists built in a loop, on a loaded machine): what a caller
bounding a whole scan's time multiplies steps by (:func:`seconds_per_entry`)."""

BYTES_PER_STEP = 32
"""Bytes of a string a step copies, compares or converts (measured: about 1 ns a byte copied by ``+``)."""

CALL_STEPS = 20
"""A registered Python function called from CEL (``matches`` on RE2): the crossing both ways."""

_HUGE = 1e18


def _cap(value: float) -> float:
    return value if value < _HUGE else _HUGE


# ------------------------------------------------------------------------------------------ shapes


class Shape:
    """An upper bound on the values one place of an expression can hold (module docstring)."""

    __slots__ = ()

    @property
    def size(self) -> float:
        return 0.0

    @property
    def total(self) -> float:
        return 1.0

    def item(self) -> Shape:
        return EMPTY

    def keys(self) -> Shape:
        return EMPTY

    def field(self, name: str) -> Shape:
        return EMPTY


class Fixed(Shape):
    """A shape known outright (literals, results of operators)."""

    __slots__ = ("_fields", "_item", "_keys", "_size", "_total")

    def __init__(
        self,
        size: float = 0.0,
        total: float = 1.0,
        item: Shape | None = None,
        keys: Shape | None = None,
        fields: Mapping[str, Shape] | None = None,
    ) -> None:
        self._size = _cap(size)
        self._total = _cap(total)
        self._item = item
        self._keys = keys
        self._fields = fields

    @property
    def size(self) -> float:
        return self._size

    @property
    def total(self) -> float:
        return self._total

    def item(self) -> Shape:
        return self._item or EMPTY

    def keys(self) -> Shape:
        return self._keys or EMPTY

    def field(self, name: str) -> Shape:
        if self._fields is not None and name in self._fields:
            return self._fields[name]
        return self._item or EMPTY

    def is_plain(self) -> bool:
        """Only a size (a string, bytes, a scalar): nothing inside to select or iterate."""
        return self._item is None and self._keys is None and self._fields is None


EMPTY = Fixed(0.0, 0.0)
SCALAR = Fixed(0.0, 1.0)


def text_shape(length: float) -> Shape:
    """A string or bytes of at most ``length`` bytes."""
    return Fixed(length, 1.0 + length / BYTES_PER_STEP)


class Union(Shape):
    """Any of several shapes (a ``?:``, the items of a literal list, a list's items and a map's keys),
    kept flat: a literal of a thousand items, or a thousand ``+``, is one level deep, never a chain
    that a recursive walk would follow a thousand frames down."""

    __slots__ = ("members",)

    def __init__(self, members: tuple[Shape, ...]) -> None:
        self.members = members

    @property
    def size(self) -> float:
        return max(m.size for m in self.members)

    @property
    def total(self) -> float:
        return max(m.total for m in self.members)

    def item(self) -> Shape:
        return join_all(m.item() for m in self.members)

    def keys(self) -> Shape:
        return join_all(m.keys() for m in self.members)

    def field(self, name: str) -> Shape:
        return join_all(m.field(name) for m in self.members)


def join_all(shapes: Iterable[Shape]) -> Shape:
    """One shape for any of ``shapes``: unions flattened, duplicates dropped, plain ones (strings,
    scalars) merged into one."""
    members: list[Shape] = []
    seen: set[int] = set()
    plain: Fixed | None = None
    for shape in shapes:
        for member in shape.members if isinstance(shape, Union) else (shape,):
            if member is EMPTY or id(member) in seen:
                continue
            if type(member) is Fixed and member.is_plain():
                if plain is None or (member.size, member.total) != (plain.size, plain.total):
                    plain = (
                        member
                        if plain is None
                        else Fixed(max(plain.size, member.size), max(plain.total, member.total))
                    )
                continue
            seen.add(id(member))
            members.append(member)
    if plain is not None:
        members.append(plain)
    if not members:
        return EMPTY
    return members[0] if len(members) == 1 else Union(tuple(members))


def join(a: Shape, b: Shape) -> Shape:
    return join_all((a, b))


class Concat(Shape):
    """``a + b + ...``: a string, bytes or list as long as all its parts (a number when they are
    numbers), kept flat like :class:`Union`."""

    __slots__ = ("_size", "_total", "parts")

    def __init__(self, parts: tuple[Shape, ...], size: float, total: float) -> None:
        self.parts, self._size, self._total = parts, _cap(size), _cap(total)

    @property
    def size(self) -> float:
        return self._size

    @property
    def total(self) -> float:
        return self._total

    def item(self) -> Shape:
        return join_all(p.item() for p in self.parts)


def concat(a: Shape, b: Shape) -> Concat:
    parts = (a.parts if isinstance(a, Concat) else (a,)) + (b.parts if isinstance(b, Concat) else (b,))
    return Concat(parts, a.size + b.size, a.total + b.total)


class Repeated(Shape):
    """A list of at most ``count`` items of shape ``each`` (``map``, ``filter``)."""

    __slots__ = ("count", "each")

    def __init__(self, count: float, each: Shape) -> None:
        self.count, self.each = _cap(count), each

    @property
    def size(self) -> float:
        return self.count

    @property
    def total(self) -> float:
        return _cap(1.0 + self.count * (1.0 + self.each.total))

    def item(self) -> Shape:
        return self.each


class Probe(Shape):
    """A variable at compile time: ``n`` items (or bytes) at every level, whatever is asked."""

    __slots__ = ("n",)

    def __init__(self, n: float) -> None:
        self.n = n

    @property
    def size(self) -> float:
        return self.n

    @property
    def total(self) -> float:
        return self.n

    def item(self) -> Shape:
        return self

    def keys(self) -> Shape:
        return self

    def field(self, name: str) -> Shape:
        return self


_SIZED = (str, bytes, list, dict)


class Values(Shape):
    """The values a place can hold in one entry's activation, read lazily: a root is one value, a
    comprehension's variable every item of its range's values."""

    __slots__ = ("_fields", "_item", "_keys", "_size", "_total", "values")

    def __init__(self, values: list[object]) -> None:
        self.values = values
        self._size: float | None = None
        self._total: float | None = None
        self._item: Shape | None = None
        self._keys: Shape | None = None
        self._fields: dict[str, Shape] = {}

    @property
    def size(self) -> float:
        if self._size is None:
            self._size = float(max((_length(v) for v in self.values), default=0))
        return self._size

    @property
    def total(self) -> float:
        if self._total is None:
            self._total = max((_deep(v) for v in self.values), default=0.0)
        return self._total

    def item(self) -> Shape:
        if self._item is None:
            items: list[object] = []
            for v in self.values:
                if isinstance(v, list):
                    items.extend(v)
                elif isinstance(v, dict):
                    items.extend(v.values())
            self._item = Values(items) if items else EMPTY
        return self._item

    def keys(self) -> Shape:
        if self._keys is None:
            keys = [k for v in self.values if isinstance(v, dict) for k in v]
            self._keys = Values(keys) if keys else EMPTY
        return self._keys

    def field(self, name: str) -> Shape:
        found = self._fields.get(name)
        if found is None:
            values = [v[name] for v in self.values if isinstance(v, dict) and name in v]
            found = self._fields[name] = Values(values) if values else EMPTY
        return found


def _length(value: object) -> int:
    if isinstance(value, str):
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    return len(value) if isinstance(value, _SIZED) else 0


def _deep(value: object) -> float:
    """Nodes and bytes (in steps) of a value, without recursion (a decoded value may be deep)."""
    total = 0.0
    stack = [value]
    while stack:
        v = stack.pop()
        total += 1.0
        if isinstance(v, str | bytes):
            total += _length(v) / BYTES_PER_STEP
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
            total += len(v)
    return total


def runtime_shapes(activation: Mapping[str, object]) -> dict[str, Shape]:
    return {name: Values([value]) for name, value in activation.items()}


# ------------------------------------------------------------------------------------------ the estimate

_MACROS = frozenset({"exists", "all", "exists_one", "map", "filter"})
_CONSTANT_FUNCTIONS = frozenset(
    {"size", "has", "type", "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek"}
    | {"getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds"}
)
_CONVERSIONS = frozenset({"int", "uint", "double", "bool", "timestamp", "duration"})
_TEXT_FUNCTIONS = frozenset({"contains", "startsWith", "endsWith"})
_REGEX_FUNCTIONS = frozenset({"matches"})  # and the registered RE2 function (:mod:`.regex`)


class Result:
    """What a node costs (steps, an upper bound), the shape of its value, and (when explaining) the
    biggest part of its cost in words."""

    __slots__ = ("cost", "shape", "why")

    def __init__(self, cost: float, shape: Shape, why: str = "") -> None:
        self.cost, self.shape, self.why = _cap(cost), shape, why


def _count(n: float) -> str:
    return f"{n:,.0f}" if n < 1e15 else "more than a million billion"


class _Estimator:
    def __init__(self, roots: Mapping[str, Shape], *, explain: bool, regex_names: frozenset[str]) -> None:
        self.roots = roots
        self.explain = explain
        self.regex_names = _REGEX_FUNCTIONS | regex_names

    def run(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        rule: Callable[[Node, Mapping[str, Shape]], Result] = getattr(self, "_" + node.kind)
        return rule(node, scope)

    def _dearest(self, parts: list[Result]) -> str:
        if not self.explain or not parts:
            return ""
        return max(parts, key=lambda r: r.cost).why

    def _literal(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        text = node.text
        if text[:1] in "\"'rRbB":
            return Result(1.0, text_shape(len(text.encode("utf-8", "surrogatepass"))))
        return Result(1.0, SCALAR)

    def _ident(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        name = node.text
        shape = scope.get(name) or self.roots.get(name.lstrip(".")) or SCALAR
        return Result(1.0, shape)

    def _select(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        inner = self.run(node.children[0], scope)
        return Result(inner.cost + 1.0, inner.shape.field(node.text), inner.why)

    def _index(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        inner, index = (self.run(c, scope) for c in node.children)
        literal = node.children[1]
        if literal.kind == "literal" and literal.text[:1] in "\"'":
            shape = inner.shape.field(literal.text[1:-1])  # a plain key; an escaped one reads as another
            shape = join(shape, inner.shape.item()) if "\\" in literal.text else shape
        else:
            shape = inner.shape.item()
        return Result(inner.cost + index.cost + 1.0, shape, self._dearest([inner, index]))

    def _list(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        items = [self.run(c, scope) for c in node.children]
        each = join_all(item.shape for item in items)
        n = len(items)
        cost = 1.0 + n + sum(i.cost for i in items)
        why = self._dearest(items) or (f"a literal list of {n} items" if self.explain else "")
        return Result(cost, Fixed(n, 1.0 + sum(i.shape.total for i in items), each), why)

    def _map(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        parts = [self.run(c, scope) for c in node.children]
        keys, values = parts[0::2], parts[1::2]
        key_shape = join_all(k.shape for k in keys)
        value_shape = join_all(v.shape for v in values)
        fields: dict[str, Shape] = {}
        for key_node, value in zip(node.children[0::2], values, strict=True):
            if key_node.kind == "literal" and key_node.text[:1] in "\"'" and "\\" not in key_node.text:
                fields[key_node.text[1:-1]] = join(fields.get(key_node.text[1:-1], EMPTY), value.shape)
        n = len(values)
        total = 1.0 + sum(p.shape.total for p in parts)
        shape = Fixed(n, total, value_shape, key_shape, fields if len(fields) == n else None)
        return Result(1.0 + n + sum(p.cost for p in parts), shape, self._dearest(parts))

    def _message(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        parts = [self.run(c, scope) for c in node.children]
        return Result(1.0 + sum(p.cost for p in parts), SCALAR, self._dearest(parts))

    def _unary(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        inner = self.run(node.children[0], scope)
        return Result(inner.cost + 1.0, SCALAR, inner.why)

    def _cond(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        test, then, other = (self.run(c, scope) for c in node.children)
        dearer = then if then.cost >= other.cost else other
        return Result(
            1.0 + test.cost + dearer.cost, join(then.shape, other.shape), self._dearest([test, dearer])
        )

    def _chain(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        parts = [self.run(c, scope) for c in node.children]
        cost = parts[0].cost
        shape = parts[0].shape
        copied = 0.0
        for op, part in zip(node.ops, parts[1:], strict=True):
            cost += part.cost + 1.0
            if op == "+":
                copied += shape.total + part.shape.total
                shape = concat(shape, part.shape)
            elif op == "in":
                right = part.shape
                cost += right.size * (1.0 + min(shape.total, right.item().total))
                shape = SCALAR
            elif op in ("==", "!=", "<", "<=", ">", ">="):
                cost += min(shape.total, part.shape.total)
                shape = SCALAR
            else:  # && || - * / %
                shape = SCALAR
        why = self._dearest(parts)
        if copied and self.explain and copied > max(p.cost for p in parts):
            why = f"'+' copying about {_count(copied * BYTES_PER_STEP)} bytes"
        return Result(cost + copied, shape, why)

    def _call(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        name = node.text
        args = node.children
        if node.method and name in _MACROS and len(args) in (3, 4) and args[1].kind == "ident":
            return self._comprehension(node, scope)
        parts = [self.run(c, scope) for c in args]
        cost = 1.0 + sum(p.cost for p in parts)
        why = self._dearest(parts)
        if name in self.regex_names:
            return Result(cost + CALL_STEPS + sum(p.shape.total for p in parts), SCALAR, why)
        if name in _TEXT_FUNCTIONS:
            return Result(cost + sum(p.shape.total for p in parts), SCALAR, why)
        if name in _CONSTANT_FUNCTIONS:
            return Result(cost, SCALAR, why)
        if name in _CONVERSIONS:  # reads its operand: a string parsed, at most
            return Result(cost + sum(p.shape.total for p in parts), SCALAR, why)
        if name in ("string", "bytes"):
            size = max((p.shape.size for p in parts), default=0.0)
            converted = sum(p.shape.total for p in parts)
            return Result(cost + converted, text_shape(max(size, converted * BYTES_PER_STEP, 64.0)), why)
        shape = join_all(p.shape for p in parts)  # dyn, optional.of(x).value(), orValue: an operand
        return Result(cost, shape if shape is not EMPTY else SCALAR, why)

    def _comprehension(self, node: Node, scope: Mapping[str, Shape]) -> Result:
        name = node.text
        over, variable, *body = node.children
        source = self.run(over, scope)
        each = join(source.shape.item(), source.shape.keys())
        inner = {**scope, variable.text: each}
        parts = [self.run(b, inner) for b in body]
        n = source.shape.size
        per_item = 1.0 + sum(p.cost for p in parts)
        cost = source.cost + 1.0 + n * per_item
        if name in ("map", "filter"):
            kept = parts[-1].shape if name == "map" else each
            shape: Shape = Repeated(n, kept)
            # The library builds the result as ``result + [item]`` each round: a deep copy of the
            # list so far, so a map costs n^2/2 item copies (measured: 400 lists of 400 numbers, 3 s).
            cost += n * max(n - 1.0, 0.0) / 2.0 * (1.0 + kept.total)
        else:
            shape = SCALAR
        why = ""
        if self.explain:
            if source.cost >= n * per_item:
                why = source.why
            else:
                inside = self._dearest(parts)
                why = f".{name}() over {_count(n)} items" + (f", each running {inside}" if inside else "")
        return Result(cost, shape, why)


class Estimate:
    """An expression's cost bound: ``steps`` with one-item data (what compile time can know), whether
    it depends on the data (``dynamic``), the biggest part of it in words (``why``), and
    :meth:`steps_for` one entry's activation.

    ``safe_size``: the largest probe (every list, map and string of that size, at every level) under
    :data:`MAX_STEPS`. No value decoded from an entry is larger, in items or bytes, than the entry's
    own bytes (a JSON or msgpack item takes at least a byte, a decoded string is no longer than its
    encoding), so an entry no bigger than this needs no measuring: the caller skips :meth:`steps_for`,
    whose walk would cost more than most evaluations (``bench/search.py``)."""

    __slots__ = ("dynamic", "regex_names", "safe_size", "steps", "tree", "why")

    def __init__(self, tree: Node, roots: tuple[str, ...], regex_names: frozenset[str] = frozenset()) -> None:
        self.tree = tree
        self.regex_names = regex_names
        small = _Estimator(dict.fromkeys(roots, Probe(1.0)), explain=True, regex_names=regex_names)
        found = small.run(tree, {})
        self.steps, self.why = found.cost, found.why
        self.dynamic = self._probe(roots, 1e9) > self.steps
        self.safe_size = 1e9 if not self.dynamic else self._largest_safe(roots)

    def _probe(self, roots: tuple[str, ...], n: float) -> float:
        estimator = _Estimator(dict.fromkeys(roots, Probe(n)), explain=False, regex_names=self.regex_names)
        return estimator.run(self.tree, {}).cost

    def _largest_safe(self, roots: tuple[str, ...]) -> float:
        """The largest probe size under the bound (the cost grows with it: bisection)."""
        low, high = 0.0, 1e9
        if self._probe(roots, high) <= MAX_STEPS:
            return high
        while high - low > 1:
            middle = (low + high) // 2
            if self._probe(roots, middle) <= MAX_STEPS:
                low = middle
            else:
                high = middle
        return low

    def steps_for(self, activation: Mapping[str, object]) -> float:
        """The bound for one entry: its activation's actual sizes (only when ``dynamic``)."""
        if not self.dynamic:
            return self.steps
        estimator = _Estimator(runtime_shapes(activation), explain=False, regex_names=self.regex_names)
        return estimator.run(self.tree, {}).cost


def seconds_per_entry(estimate: Estimate | None) -> float:
    """What one entry's evaluation costs by the expression alone, at :data:`WORST_NS_PER_STEP`: its
    steps on one-item data (the data may add more, up to :data:`MAX_STEPS`, which the per-entry check
    caps). None (plain text, which reads at most a value's first 64 KiB once) costs nothing here."""
    if estimate is None:
        return 0.0
    return min(estimate.steps, MAX_STEPS) * WORST_NS_PER_STEP / 1e9
