"""The metric names a PromQL expression reads, for checking the shipped rules and dashboard against what
``/metrics`` really exposes.

Written here because no PromQL parser is packaged for Python on this machine, and Prometheus 2.42's
own (``promtool``) has no command that prints a query's selectors; the tests also run every dashboard
query on a real Prometheus (``test_prometheus_server.py``), which would catch what this misses.
The tokenizer is small on purpose:

1. drop string literals (``"..."``, ``'...'``, `` `...` ``): label values, Grafana variables in matchers;
2. drop what brackets and braces hold: ``{label matchers}``, ``[range]``, ``[5m:1m]`` subqueries;
3. drop the label lists of ``by``, ``without``, ``on``, ``ignoring``, ``group_left`` and ``group_right``;
4. every identifier left (``[a-zA-Z_:][a-zA-Z0-9_:]*``, not glued to a digit, letter, ``$`` or ``.``,
   so ``15m``, ``1e3`` and ``$__rate_interval`` are not names) that is not called (``sum (``) and is not
   a keyword (``and``, ``bool``, ``offset`` ...) is a metric name.

Step 4 is the issue's rule (an identifier followed by ``{``, ``[``, whitespace or ``)`` that is not a
function or keyword) widened to any follower but ``(``, so ``a>0`` and ``a,`` count too.
"""

from __future__ import annotations

import re

KEYWORDS = frozenset({
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "atan2", "inf", "nan", "start", "end",
})
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACED = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE)
_IDENTIFIER = re.compile(r"(?<![\w:$.])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()")
#: Grafana's variable query ``label_values(<selector>, <label>)``: the selector's names are the metrics.
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*[a-zA-Z_]\w*\s*\)\s*$", re.DOTALL)


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (see the module docstring for the rules)."""
    text = _STRINGS.sub('""', expr)
    text = _BRACED.sub(" ", text)
    text = _LABEL_LISTS.sub(" ", text)
    return {name for name in _IDENTIFIER.findall(text) if name.lower() not in KEYWORDS}


def variable_metric_names(query: str) -> set[str]:
    """The metric names of a Grafana Prometheus variable query (``label_values(selector, label)`` or PromQL)."""
    match = _LABEL_VALUES.match(query)
    return metric_names(match.group(1) if match else query)
