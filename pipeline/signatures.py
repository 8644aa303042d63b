"""Error signatures in plain Python: the rules that make two error messages "the same failure".

Two errors are the same failure when they differ only in the values they mention: an order number,
an object ID, a quoted SKU. :func:`normalize_error` states the rules and is the readable specification;
:func:`pipeline.failures.signature_column` applies the very same regular expressions (:data:`STEPS`) in
Spark. This module imports no Spark, so the console can use :func:`search_text` when it loads the
rollups without starting a JVM, and :mod:`pipeline.failures` keeps everything that needs one.
"""

from __future__ import annotations

import re

SIGNATURE_MAX = 300
SEARCH_MAX = 200
NO_ERROR = "(no error recorded)"

# Written to mean the same in Python's re and Java's java.util.regex: explicit ASCII classes only
# (no \w, \d, \s or \b, whose Unicode behaviour differs between the two).
CLASS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*(?=:( |$))"
STEPS: tuple[tuple[str, str], ...] = (
    (r"""(?<![A-Za-z0-9_])'[^']*'|"[^"]*\"""", "<str>"),
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    (
        r"0[xX][0-9a-fA-F]+|(?<![A-Za-z0-9_])(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}"
        r"(?![A-Za-z0-9_])",
        "<hex>",
    ),
    (r"[0-9]+(?:\.[0-9]+)?", "<num>"),
    (r"[ \t\r\n\f\x0b]+", " "),
)
_COMPILED = [(re.compile(pattern), replacement) for pattern, replacement in STEPS]
_CLASS_RE = re.compile(CLASS_PATTERN)
_PLACEHOLDER = re.compile(r"<(?:str|uuid|hex|num)>")


def normalize_error(error: str | None) -> str:
    """The signature of an error message: what stays the same across occurrences of one failure.

    Rules, in order:

    1. A leading exception class (``ValueError`` or ``pkg.mod.Error`` followed by ``": "`` or the end,
       the shape the bus writes as ``dlq_error``) is kept exactly as it is, digits included.
    2. In the message after it:
       a. quoted strings become ``<str>``: ``'...'`` (the opening quote not preceded by a letter, digit
       or ``_``, so the apostrophe of "can't" is not a quote) and ``"..."``;
       b. UUIDs (8-4-4-4-12 hex digits) become ``<uuid>``;
       c. hex IDs become ``<hex>``: ``0x...``, or a standalone run of 8+ hex digits holding at least
       one digit and one letter a-f (a Mongo ObjectID, a SHA), but not a plain word or number;
       d. numbers (digit runs, with an optional decimal part) become ``<num>``, also inside words
       (``user42`` -> ``user<num>``);
       e. runs of whitespace become one space, and the ends are trimmed of spaces.
    3. The result is ``Class: message`` (``Class`` alone when the message is empty), cut to
       :data:`SIGNATURE_MAX` characters; a missing or blank error is :data:`NO_ERROR`.
    """
    if error is None or not error.strip(" \t\r\n\f\x0b"):
        return NO_ERROR
    match = _CLASS_RE.search(error)
    head = match.group(0) if match else ""
    message = error[len(head) + 1 :] if head else error
    for pattern, replacement in _COMPILED:
        message = pattern.sub(replacement, message)
    message = message.strip(" ")
    if not head:
        return (message or NO_ERROR)[:SIGNATURE_MAX]
    return (f"{head}: {message}" if message else head)[:SIGNATURE_MAX]


def search_text(signature: str) -> str:
    """The longest literal part of a signature: text every matching raw error contains.

    The DLQ page filters entries by a case-insensitive substring of their error, so this is what a link
    from a signature to its dead letters searches for (placeholders never occur in the raw text).
    Whitespace collapsed by rule 2e may keep it from matching an error with runs of spaces.
    """
    if signature == NO_ERROR:
        return ""
    parts = [part.strip(" ") for part in _PLACEHOLDER.split(signature)]
    best = max(parts, key=len, default="")
    return best[:SEARCH_MAX]
