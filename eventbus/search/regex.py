"""``matches`` on RE2, each pattern compiled once per query.

The CEL library's own ``x.matches(re)`` compiles its regular expression again at every call (for every
entry, and every iteration of a comprehension), on an engine of its own, and an oversized pattern costs
milliseconds to be refused each time. Registering a Python function named ``matches`` does not replace
that receiver-style built-in, so the query's tokens are rewritten instead (the choice, of the two the
issue offered, that keeps every pattern working): every call ``x.matches(re)`` and ``matches(x, re)``
becomes a call of :data:`FUNCTION`, registered for the query and backed by a :class:`Patterns` cache on
`google-re2 <https://pypi.org/project/google-re2/>`_, a linear-time engine that releases the GIL while
it matches. A pattern written as a literal is compiled when the query is, so an invalid or oversized
one is refused with RE2's message (a 400) instead of matching nothing; a pattern read from the entry is
compiled at its first use (at most :data:`CACHED` of them are kept).

Semantics: CEL's specification gives ``matches`` RE2 syntax, searched anywhere in the string (like
``re.search``); RE2 has no backreferences or lookaround (nor had the library's engine), and its
``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII (use ``\\pL``, ``\\p{N}`` for Unicode classes).
A non-string operand is an error, as with the built-in: the entry does not match.
The plain-Python evaluator (:mod:`.fast`) does not evaluate ``matches``: those entries always go to CEL,
so both paths give RE2's answers.
"""

from __future__ import annotations

import cel
import re2

from .analysis import Token

FUNCTION = "matches_re2"
"""The registered function the rewritten calls use (an identifier no CEL built-in has)."""

MAX_MEM = 8 << 20
"""RE2's memory budget for one pattern: its compiled program and its DFA cache (RE2's default)."""

CACHED = 64
"""Patterns read from entries that a query keeps compiled."""


class PatternError(ValueError):
    """A literal pattern RE2 cannot compile (the message is RE2's, with the pattern)."""


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False  # RE2 would print each refusal to stderr
    return options


_OPTIONS = _options()


def compile_pattern(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2; :class:`PatternError` with RE2's reason."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        reason = (
            exc.args[0].decode("utf-8", "replace")
            if exc.args and isinstance(exc.args[0], bytes)
            else str(exc)
        )
        raise PatternError(f"the regular expression {pattern[:80]!r} cannot be used: {reason}") from None


class Patterns:
    """One query's compiled patterns; :meth:`matches` is the function registered as :data:`FUNCTION`."""

    def __init__(self) -> None:
        self._compiled: dict[str, re2._Regexp] = {}
        self._literal = 0

    def add_literal(self, pattern: str) -> None:
        """Compile a literal pattern of the query now (:class:`PatternError` if RE2 refuses it)."""
        if pattern not in self._compiled:
            self._compiled[pattern] = compile_pattern(pattern)
            self._literal += 1

    def matches(self, text: object, pattern: object) -> bool:
        if type(text) is not str or type(pattern) is not str:
            raise TypeError("matches takes a string and a pattern string")
        compiled = self._compiled.get(pattern)
        if compiled is None:
            compiled = compile_pattern(pattern)  # a PatternError is CEL's error: no match
            if len(self._compiled) < self._literal + CACHED:
                self._compiled[pattern] = compiled
        return compiled.search(text) is not None


def _literal_value(token: Token) -> object:
    """A string literal's value, as the CEL library itself reads it (escapes, raw strings, quotes)."""
    return cel.compile(token.text).execute({})


def rewrite(tokens: list[Token], patterns: Patterns) -> str | None:
    """The expression with its ``matches`` calls pointed at :data:`FUNCTION` (literal patterns compiled
    into ``patterns``), or None when it has none. Tokens are joined by spaces: a string is one token,
    and CEL reads no other whitespace."""
    found = False
    out: list[str] = []
    for i, token in enumerate(tokens):
        if (
            token.kind == "ident"
            and token.text == "matches"
            and i + 1 < len(tokens)
            and tokens[i + 1].text == "("
        ):
            found = True
            out.append(FUNCTION)
            receiver = i > 0 and tokens[i - 1].text == "."
            arg = i + 2 if receiver else _second_argument(tokens, i + 2)
            if (
                arg is not None
                and arg + 1 < len(tokens)
                and tokens[arg].kind == "string"
                and tokens[arg + 1].text == ")"
            ):
                value = _literal_value(tokens[arg])
                if isinstance(value, str):
                    patterns.add_literal(value)
            continue
        out.append(token.text)
    return " ".join(out) if found else None


def _second_argument(tokens: list[Token], start: int) -> int | None:
    """The index of the token after the first top-level comma of a call's arguments from ``start``."""
    depth = 0
    for j in range(start, len(tokens)):
        text = tokens[j].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            if depth == 0:
                return None
            depth -= 1
        elif text == "," and depth == 0:
            return j + 1
    return None
