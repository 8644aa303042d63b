"""The import graph keeps its shape: no circles, one door to Redis, a Django-free bus, no Spark at boot.

Read with :mod:`ast` (every import, including those inside functions and under ``if TYPE_CHECKING:``),
so a function-local import cannot hide a circle. ``from pkg import mod`` counts as an import of the
submodule when ``mod`` is one.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("streams_app", "busconsole", "eventbus", "pipeline")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def _imports(name: str, path: Path) -> Iterable[tuple[str, int]]:
    """(imported module, line) for every import statement of one module, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                yield (f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base), node.lineno


IMPORTS = {name: sorted(set(_imports(name, path))) for name, path in MODULES.items()}


def _edges() -> dict[str, dict[str, int]]:
    """Internal module -> {internal module it imports: line of the first such import}."""
    return {
        name: {target: line for target, line in reversed(imports) if target in MODULES and target != name}
        for name, imports in IMPORTS.items()
    }


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[tuple[list[str], list[str]]]:
    """(one shortest cycle, first node repeated; all members) per strongly connected component (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = {stack.pop()}
            while node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append((_shortest_cycle(graph, min(component), component), sorted(component)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _shortest_cycle(graph: Mapping[str, Iterable[str]], start: str, within: set[str]) -> list[str]:
    paths, frontier = {start: [start]}, [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*paths[node], start]
            if nxt in within and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                frontier.append(nxt)
    raise AssertionError(f"{start} is in a component but on no cycle")


def _offenders(where: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    """``module:line imports target`` for each import of a ``forbidden`` tree from the ``where`` trees."""
    def under(name: str, trees: tuple[str, ...]) -> bool:
        return any(name == tree or name.startswith(tree + ".") for tree in trees)

    return [
        f"{name}:{line} imports {target}"
        for name, imports in IMPORTS.items() if under(name, where) and not under(name, allowed)
        for target, line in imports if under(target, forbidden)
    ]


def test_cycle_finder_sees_a_planted_cycle() -> None:
    graph = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": [], "e": ["a", "f"], "f": ["e"]}
    assert sorted(find_cycles(graph)) == [(["a", "b", "c", "a"], ["a", "b", "c"]), (["e", "f", "e"], ["e", "f"])]
    assert find_cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_no_import_cycles() -> None:
    graph = _edges()
    cycles = [
        " -> ".join(f"{a}:{graph[a][b]}" for a, b in itertools.pairwise(cycle)) + f" -> {cycle[0]}"
        + (f"\n    (one of {len(members)} modules in a circle: {', '.join(members)})" if len(members) > 2 else "")
        for cycle, members in find_cycles(graph)
    ]
    assert not cycles, "import cycles (module:line of the import):\n" + "\n".join(cycles)


def test_only_redis_ops_imports_redis() -> None:
    offenders = _offenders(("streams_app",), ("redis",), allowed=("streams_app.redis_ops",))
    assert not offenders, "redis imported outside streams_app/redis_ops/:\n" + "\n".join(offenders)


def test_bus_and_pipeline_are_django_free() -> None:
    offenders = _offenders(("eventbus", "pipeline"), ("django", "channels", "celery", "streams_app", "busconsole"))
    assert not offenders, "eventbus/pipeline import the console's stack:\n" + "\n".join(offenders)


#: Top-level modules of streams_app that wire the screen into Django, and so may import views.
SCREEN_GLUE = ("urls", "api_urls", "routing", "middleware", "admin", "apps", "context_processors")


def test_lower_layers_do_not_know_the_screen() -> None:
    screen = ("streams_app.views", *(m for m in MODULES if m.rpartition(".")[2] in {"forms", "action_forms", "presenters"}))
    offenders = _offenders(("streams_app.redis_ops",), screen) + _offenders(("streams_app.live",), ("streams_app.views",))
    assert not offenders, "redis_ops imports views/forms/presenters, or live imports views:\n" + "\n".join(offenders)
    # Only the screen itself and Django's glue around it may build on views: a model, a report or a
    # job that imports views.links has learnt the page's URLs, which are the view's to make.
    screen_side = ("streams_app.views", "streams_app.templatetags", *(f"streams_app.{m}" for m in SCREEN_GLUE))
    below = _offenders(("streams_app",), ("streams_app.views",), allowed=screen_side)
    assert not below, "modules below the screen import streams_app.views:\n" + "\n".join(below)


# ------------------------------------------------------------------------- the package table

#: The map whose table of allowed imports the tests below enforce (one source: this file reads it).
README = ROOT / "streams_app" / "README.md"
_TABLE_HEADER = "| package | may import |"
#: Package roots that need no row while their ``__init__`` imports nothing of the project.
_ROOTS = ("streams_app", "busconsole")


@dataclass(frozen=True)
class Row:
    """One row of the table: the modules it names (and what is under them), and what they may import."""

    names: tuple[str, ...]
    may: tuple[str, ...]

    @property
    def label(self) -> str:
        return self.names[0].removeprefix("streams_app.")


def _full(name: str) -> str:
    return name if name.split(".")[0] in PACKAGES else f"streams_app.{name}"


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def parse_table(text: str) -> list[Row]:
    """The rows of the ``| package | may import |`` table: the backticked names of each cell, made whole."""
    lines = [line.strip() for line in text.splitlines()]
    assert _TABLE_HEADER in lines, f"no {_TABLE_HEADER!r} table"
    rows = []
    for line in itertools.takewhile(lambda s: s.startswith("|"), lines[lines.index(_TABLE_HEADER) + 2 :]):
        cells = line.strip("|").split("|")
        assert len(cells) == 2, f"a row of the table is not two cells: {line}"
        names, may = (tuple(_full(n) for n in re.findall(r"`([^`]+)`", cell)) for cell in cells)
        assert names, f"a row of the table names no package: {line}"
        rows.append(Row(names, may))
    return rows


def row_of(module: str, rows: Iterable[Row]) -> Row | None:
    """The row naming the longest part of ``module``'s path (None when no row names any)."""
    named = [(len(name), row) for row in rows for name in row.names if _under(module, name)]
    return max(named, key=lambda found: found[0])[1] if named else None


def table_offenders(rows: list[Row], imports: Mapping[str, Iterable[tuple[str, int]]]) -> list[str]:
    """``module:line imports target`` for each import between rows the importer's row does not allow,
    and each module of the project no row names."""
    found = []
    for module, targets in sorted(imports.items()):
        internal = sorted((t, line) for t, line in targets if t.split(".")[0] in PACKAGES and t != module)
        own = row_of(module, rows)
        if own is None:
            if module not in _ROOTS or internal:
                found.append(f"{module}: no row of the table names it")
            continue
        for target, line in internal:
            theirs = row_of(target, rows)
            if theirs is not own and not any(_under(target, allowed) for allowed in own.may):
                found.append(f"{module}:{line} imports {target}")
    return found


def table_graph(rows: list[Row]) -> dict[str, list[str]]:
    """Row label -> the labels of the rows it may import from (a name covers the rows under it too)."""
    return {
        row.label: sorted({
            other.label for allowed in row.may for other in rows
            if other is not row and (row_of(allowed, rows) is other or any(_under(n, allowed) for n in other.names))
        })
        for row in rows
    }


TABLE = parse_table(README.read_text())


def test_table_check_sees_a_planted_violation(tmp_path: Path) -> None:
    """A table of three rows over modules written here: the imports read with ``ast`` (one inside a
    function, one under TYPE_CHECKING) that the table does not allow are named with their lines."""
    rows = parse_table(
        "intro\n\n| package | may import |\n|---|---|\n| `jobs` | `audit`, `eventbus.keys` |\n"
        "| `audit` (the trail) | — |\n| `eventbus` | — |\n\nafter\n"
    )
    assert [r.names for r in rows] == [("streams_app.jobs",), ("streams_app.audit",), ("eventbus",)]
    source = {
        "streams_app.jobs.runner": "from streams_app.audit import records\nfrom eventbus.keys import dlq\n"
                                   "def f():\n    from eventbus.codec import decode\n",
        "streams_app.audit.records": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                     "    from streams_app.jobs.runner import Job\nimport streams_app.audit.models\n",
        "streams_app.heap": "import gc\n",
    }
    imports = {}
    for name, text in source.items():
        (path := tmp_path / f"{name}.py").write_text(text)
        imports[name] = list(_imports(name, path))
    assert table_offenders(rows, imports) == [
        "streams_app.audit.records:3 imports streams_app.jobs.runner",
        "streams_app.heap: no row of the table names it",
        "streams_app.jobs.runner:4 imports eventbus.codec",
    ]
    assert find_cycles(table_graph(rows)) == []
    circle = [*rows[:1], Row(("streams_app.audit",), ("streams_app.jobs.runner",)), rows[2]]
    assert find_cycles(table_graph(circle)) == [(["audit", "jobs", "audit"], ["audit", "jobs"])]


#: Imports the table was written to refuse (each was in the code once): importer, imported.
_REFUSED = [
    ("streams_app.jobs.kinds", "streams_app.search.replay"),  # a circle: search's job bodies build on jobs
    ("streams_app.redis_ops.actions.dlq", "pipeline.signatures"),  # the door knowing the reports' rule
    ("streams_app.metrics.snapshots", "streams_app.signals"),  # a package reaching up into the glue
    ("streams_app.alerts.evaluation", "streams_app.signals"),
    ("streams_app.accounts.role_backend", "streams_app.compiled"),  # a top-level module no row names
    ("streams_app.views.errors", "streams_app.middleware"),
    ("streams_app.annotations.models", "streams_app.metrics.panels"),  # only metrics' models sit below
    ("busconsole.locks", "streams_app.accounts.roles"),  # busconsole's helpers sit below the console
]


@pytest.mark.parametrize(("importer", "imported"), _REFUSED)
def test_the_table_refuses_an_import_upward(importer: str, imported: str) -> None:
    assert table_offenders(TABLE, {importer: [(imported, 1)]}) == [f"{importer}:1 imports {imported}"]


def test_the_table_names_real_packages_once_and_has_no_circle() -> None:
    names = [name for row in TABLE for name in (*row.names, *row.may)]
    unknown = sorted({n for n in names if not any(_under(m, n) for m in MODULES)})
    assert unknown == [], "the table names what is not in the repository"
    owned = [name for row in TABLE for name in row.names]
    assert sorted({n for n in owned if owned.count(n) > 1}) == [], "names in two rows"
    cycles = [" -> ".join(cycle) for cycle, _members in find_cycles(table_graph(TABLE))]
    assert cycles == [], "the table allows a circle between packages"


def test_imports_follow_the_package_table() -> None:
    offenders = table_offenders(TABLE, IMPORTS)
    assert not offenders, "imports the table in streams_app/README.md does not allow:\n" + "\n".join(offenders)


def test_readme_says_may_import_only_in_the_table() -> None:
    """The prose describes each package; who may import whom is said once, in the table."""
    text = README.read_text()
    outside = [line for line in text.splitlines() if "may import" in line and not line.startswith(("|", "##"))]
    assert outside == [], "'may import' outside the table: say it in a row instead"


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
