"""Spark options given as text: ``--conf key=value`` on a command line, ``BUSCONSOLE_SPARK_CONF`` in settings.

No pyspark here: the console's settings parse ``BUSCONSOLE_SPARK_CONF`` when Django starts, in processes
(the web server) that must not load Spark, and a typo should stop them at start-up with a message that
names the variable rather than surface hours later as a failed nightly run.

A key must start with ``spark.``: Spark only warns ("Ignoring non-Spark config property") and goes on
without an option spelled ``sparkk.executor.memory`` or ``executor.memory``, which is the mistake this
catches. Hadoop options are ``spark.hadoop.*`` keys like any other.
"""

from __future__ import annotations

from collections.abc import Iterable


class ConfError(ValueError):
    """A Spark option that is not ``spark.<name>=<value>``; the message says which and why."""


def parse_items(items: Iterable[str], *, source: str = "--conf") -> dict[str, str]:
    """``["k=v", ...]`` as a dict (a later key wins, as with ``spark-submit --conf``)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfError(f"{source}: {item!r} is not key=value (for example spark.executor.memory=4g)")
        if not key.startswith("spark.") or key == "spark.":
            raise ConfError(f"{source}: {key!r} is not a Spark option: Spark's keys start with 'spark.' "
                            "(Hadoop's are spark.hadoop.<key>)")
        out[key] = value.strip()
    return out


def parse_list(raw: str, *, source: str = "BUSCONSOLE_SPARK_CONF") -> dict[str, str]:
    """``"k=v,k=v"`` (commas or new lines between options) as a dict; ``""`` is no options.

    Some values are lists themselves (``spark.jars=a.jar,b.jar``, ``spark.jars.packages=g:a:v,g:a:v``),
    so a piece without ``=`` continues the value before it rather than being an error:
    ``spark.jars=a.jar,b.jar,spark.executor.cores=2`` is two options.
    """
    items: list[str] = []
    for line in raw.splitlines():
        for piece in line.split(","):
            if not piece.strip():
                continue
            if "=" not in piece and items:
                items[-1] += "," + piece.strip()
            else:
                items.append(piece.strip())
    return parse_items(items, source=source)
