"""The import graph keeps its shape: no circles, one door to Redis, a Django-free bus, no Spark at boot.

The graph is :mod:`tests.import_graph`'s (every import, function-local and TYPE_CHECKING ones included);
the table of who may import whom is checked by ``tests/test_package_table.py``.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import subprocess
import sys

import pytest

from tests.import_graph import MODULES, ROOT, edges, find_cycles, forbidden_imports


def test_cycle_finder_sees_a_planted_cycle() -> None:
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": [], "e": ["a", "f"], "f": ["e"]}
    assert sorted(find_cycles(graph)) == [(["a", "b", "c", "a"], ["a", "b", "c"]), (["e", "f", "e"], ["e", "f"])]
    assert find_cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_no_import_cycles() -> None:
    graph = edges()
    cycles = [
        " -> ".join(f"{a}:{graph[a][b]}" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[0]}"
        + (f"\n    (one of {len(members)} modules in a circle: {', '.join(members)})" if len(members) > 2 else "")
        for cycle, members in find_cycles(graph)
    ]
    assert not cycles, "import cycles (module:line of the import):\n" + "\n".join(cycles)


def test_only_redis_ops_imports_redis() -> None:
    offenders = forbidden_imports(("streams_app",), ("redis",), allowed=("streams_app.redis_ops",))
    assert not offenders, "redis imported outside streams_app/redis_ops/:\n" + "\n".join(offenders)


def test_bus_and_pipeline_are_django_free() -> None:
    offenders = forbidden_imports(("eventbus", "pipeline"), ("django", "channels", "celery", "streams_app", "busconsole"))
    assert not offenders, "eventbus/pipeline import the console's stack:\n" + "\n".join(offenders)


#: Top-level modules of streams_app that wire the screen into Django, and so may import views.
SCREEN_GLUE = ("urls", "api_urls", "routing", "middleware", "admin", "apps", "context_processors")


def test_lower_layers_do_not_know_the_screen() -> None:
    screen = ("streams_app.views", *(m for m in MODULES if m.rpartition(".")[2] in {"forms", "action_forms", "presenters"}))
    offenders = forbidden_imports(("streams_app.redis_ops",), screen) + forbidden_imports(("streams_app.live",), ("streams_app.views",))
    assert not offenders, "redis_ops imports views/forms/presenters, or live imports views:\n" + "\n".join(offenders)
    # Only the screen itself and Django's glue around it may build on views: a model, a report or a
    # job that imports views.links has learnt the page's URLs, which are the view's to make.
    screen_side = ("streams_app.views", "streams_app.templatetags", *(f"streams_app.{m}" for m in SCREEN_GLUE))
    below = forbidden_imports(("streams_app",), ("streams_app.views",), allowed=screen_side)
    assert not below, "modules below the screen import streams_app.views:\n" + "\n".join(below)


# Runs in a fresh interpreter: records the stack of repository files that first asked for pyspark.
_PROBE = """
import importlib, json, os, sys, traceback
import django
chain = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" and not chain:
            chain.extend(f"{os.path.relpath(f.filename)}:{f.lineno}" for f in traceback.extract_stack()
                         if f.filename.startswith(os.getcwd()) and "/.venv/" not in f.filename)
sys.meta_path.insert(0, Spy())
django.setup()
importlib.import_module(sys.argv[1])
print(json.dumps({"pyspark": "pyspark" in sys.modules, "chain": chain}))
"""


@pytest.mark.parametrize("module", ["busconsole.urls", "busconsole.asgi"])
def test_loading_the_site_does_not_load_spark(module: str) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run([sys.executable, "-c", _PROBE, module], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, f"importing {module} failed:\n{done.stderr[-3000:]}"
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert not seen["pyspark"], f"importing {module} loads pyspark via:\n" + "\n".join(seen["chain"])


# ------------------------------------------------------------------------- the one masked reader

#: What a read that hands out entry bytes returns (an annotation naming one of these).
_ENTRY_TYPES = ("Entry", "EntryPage", "RawEntry", "ProgressEvent", "RetryPage", "DlqEntry", "Journey")
#: redis_ops modules that only parse bytes they are given (no Redis read): their functions take no mask.
_PARSERS = ("streams_app.redis_ops.parsers", "streams_app.redis_ops.conventions", "streams_app.redis_ops.types")
#: Calls that read entry bytes with ``mask=None`` on purpose, and why (nowhere else may pass None itself).
_UNMASKED_CALLS = {
    # a search-driven replay reads back the stored bytes it copies inside Redis: no reader sees them, and
    # the copy's target was checked to mask them as the source does (streams_app.masking.copies)
    "streams_app.search.replay",
}


def _entry_reads() -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every public function of redis_ops that reads entries and is called from outside redis_ops."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for name, path in MODULES.items():
        if not name.startswith("streams_app.redis_ops") or name in _PARSERS:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                returns = ast.unparse(node.returns) if node.returns else ""
                if set(re.findall(r"\w+", returns)) & set(_ENTRY_TYPES):
                    found[f"{name}.{node.name}"] = node
    outside = _calls_outside_redis_ops()
    return {qualified: node for qualified, node in found.items() if node.name in {c.name for c in outside}}


class _Call:
    def __init__(self, module: str, name: str, node: ast.Call) -> None:
        self.module, self.name, self.node = module, name, node


def _calls_outside_redis_ops() -> list[_Call]:
    calls = []
    for module, path in MODULES.items():
        if module.startswith(("streams_app.redis_ops", "eventbus", "pipeline")):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                calls.append(_Call(module, name, node))
    return calls


def test_every_entry_read_takes_the_readers_mask() -> None:
    """An entry read of redis_ops cannot be called without saying how its entries are masked:
    ``mask`` is keyword-only and has no default (None only says "no rule applies", as search_mask does)."""
    reads = _entry_reads()
    assert {"streams_app.redis_ops.reads.entries.entries_page", "streams_app.redis_ops.progress.progress_follow",
            "streams_app.redis_ops.ranges.range_pages", "streams_app.redis_ops.retries.retry_page"} <= set(reads)
    missing = []
    for qualified, node in reads.items():
        kwonly = {a.arg: d for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)}
        if "mask" not in kwonly or kwonly["mask"] is not None:
            missing.append(qualified)
    assert missing == [], "entry reads without a required keyword-only mask"


def test_every_call_of_an_entry_read_passes_a_mask() -> None:
    """Every call from above redis_ops names ``mask=`` itself (no ``**kwargs`` hiding it), and passes the
    literal None only where :data:`_UNMASKED_CALLS` says why."""
    names = {node.name for node in _entry_reads().values()}
    wrong = []
    for call in _calls_outside_redis_ops():
        if call.name not in names:
            continue
        given = {k.arg: k.value for k in call.node.keywords}
        where = f"{call.module}:{call.node.lineno} {call.name}"
        if "mask" not in given:
            wrong.append(f"{where}: no mask=")
        elif isinstance(given["mask"], ast.Constant) and given["mask"].value is None and call.module not in _UNMASKED_CALLS:
            wrong.append(f"{where}: mask=None")
    assert wrong == []
