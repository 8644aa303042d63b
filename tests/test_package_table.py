"""The table of who may import whom, in streams_app/README.md, holds for every import.

The README's table is the one source: this file parses it and checks every import of the repository
(read as :mod:`tests.import_graph` reads them) against its rows, the table itself for names that do not
exist, names in two rows and circles, and the README's prose for a second statement of the rule.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.import_graph import IMPORTS, MODULES, PACKAGES, ROOT, find_cycles, imports_of

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
        imports[name] = list(imports_of(name, path))
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
