"""Failure analytics: dead letters grouped by a normalized error signature, and a retries histogram.

Two errors are "the same failure" when they differ only in the values they mention: an order number,
an object ID, a quoted SKU. :func:`normalize_error` states the rules; :func:`signature_column` applies
the very same regular expressions in Spark (Java regex), so the rollup runs without a Python UDF and the
Python function can be the readable specification the tests check both against.
"""

from __future__ import annotations

import re

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

SIGNATURE_MAX = 300
SEARCH_MAX = 200
NO_ERROR = "(no error recorded)"

# Written to mean the same in Python's re and Java's java.util.regex: explicit ASCII classes only
# (no \w, \d, \s or \b, whose Unicode behaviour differs between the two).
_CLASS = r"^[A-Za-z_][A-Za-z0-9_.]*(?=:( |$))"
_STEPS: tuple[tuple[str, str], ...] = (
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
_COMPILED = [(re.compile(pattern), replacement) for pattern, replacement in _STEPS]
_CLASS_RE = re.compile(_CLASS)
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


def signature_column(error: Column) -> Column:
    """:func:`normalize_error` as a Spark expression over the column ``error``."""
    head = F.regexp_extract(error, _CLASS, 0)
    message = F.when(head != "", error.substr(F.length(head) + 2, F.lit(1 << 30))).otherwise(error)
    for pattern, replacement in _STEPS:
        message = F.regexp_replace(message, pattern, replacement)
    message = F.trim(message)
    signature = (
        F.when(head != "", F.when(message != "", F.concat(head, F.lit(": "), message)).otherwise(head))
        .otherwise(F.when(message != "", message).otherwise(F.lit(NO_ERROR)))
    )
    blank = error.isNull() | (F.regexp_replace(error, r"[ \t\r\n\f\x0b]", "") == "")
    return F.when(blank, F.lit(NO_ERROR)).otherwise(F.substring(signature, 1, SIGNATURE_MAX))


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


def error_signatures(dead: DataFrame) -> DataFrame:
    """Dead letters per stream, DLQ and signature: count, first and last seen, an example, a rank.

    The stream is where the entry came from (the DLQ key when no convention says); the time is when it
    failed (the DLQ entry ID's time when unknown). ``rank`` orders a stream's signatures by count
    (ties by signature), so "top signatures per stream" is ``rank <= n``. The example is the latest
    entry's raw error and DLQ entry ID.
    """
    when = F.coalesce(F.col("failed_at"), F.col("ts"))
    rows = dead.select(
        "conn",
        F.coalesce(F.col("stream"), F.col("dlq")).alias("stream"),
        F.coalesce(F.col("stream_text"), F.col("dlq_text")).alias("stream_text"),
        "dlq",
        "dlq_text",
        signature_column(F.col("error")).alias("signature"),
        F.coalesce(F.col("error"), F.lit("")).alias("error"),
        "entry_id",
        when.alias("when"),
        F.struct(when.alias("t"), F.col("ms"), F.col("entry_id")).alias("order"),
    )
    grouped = rows.groupBy("conn", "stream", "stream_text", "dlq", "dlq_text", "signature").agg(
        F.count(F.lit(1)).alias("count"),
        F.min("when").alias("first_seen"),
        F.max("when").alias("last_seen"),
        F.max_by("error", "order").alias("example_error"),
        F.max_by("entry_id", "order").alias("example_entry_id"),
    )
    ranking = Window.partitionBy("conn", "stream").orderBy(F.col("count").desc(), F.col("signature"))
    return grouped.withColumn("rank", F.row_number().over(ranking))


def retries_histogram(dead: DataFrame) -> DataFrame:
    """Dead letters per stream by how many retries they had (-1: the entry does not say)."""
    return (
        dead.select(
            "conn",
            F.coalesce(F.col("stream"), F.col("dlq")).alias("stream"),
            F.coalesce(F.col("stream_text"), F.col("dlq_text")).alias("stream_text"),
            F.coalesce(F.col("retries"), F.lit(-1)).cast("int").alias("retries"),
        )
        .groupBy("conn", "stream", "stream_text", "retries")
        .agg(F.count(F.lit(1)).alias("count"))
    )
