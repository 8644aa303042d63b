"""The event bus is a library: it reads none of the console's settings and does not know the console.

The console (``streams_app``, ``busconsole``) builds on ``eventbus``; never the other way round. So
``eventbus/`` holds no ``BUSCONSOLE_`` name (the console reads its own settings and hands the values
in), names no console module, and what both need has one copy: the console imports it from the bus
rather than through a module of its own that only passes the names on.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUS = ROOT / "eventbus"
CONSOLE = ("streams_app", "busconsole")

#: Key names the bus writes to Redis and keeps as they were, so that a move begun before an upgrade is
#: still found after it: data, not a reference to the console.
_KEPT_KEY_NAMES = (b"busconsole:requeue-lease:", b"busconsole:requeued:")


def _bus_files() -> list[Path]:
    return sorted(p for p in BUS.rglob("*") if p.is_file() and p.suffix in (".py", ".lua", ".md", ".txt"))


def test_the_bus_reads_no_console_setting() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _bus_files()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "BUSCONSOLE_" in line
    ]
    assert found == [], "eventbus/ names the console's settings:\n" + "\n".join(found)


def test_the_bus_does_not_know_the_console() -> None:
    """No word of the console in the bus's code, comments or texts (the kept key names aside)."""
    word = re.compile(r"console|busconsole|streams_app", re.IGNORECASE)
    found = []
    for path in _bus_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            text = line
            for kept in _KEPT_KEY_NAMES:
                text = text.replace(kept.decode(), "")
            if word.search(text):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == [], f"eventbus/ mentions the console ({len(found)} lines):\n" + "\n".join(found)


def test_the_bus_imports_nothing_of_the_console() -> None:
    found = []
    for path in BUS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in CONSOLE]
    assert found == []


#: Modules that only passed the bus's names on to the console; the console imports the owner instead.
_GONE = ("streams_app/redis_ops/glob.py", "streams_app/redis_ops/decoding.py", "streams_app/search/query.py",
         "streams_app/search/analysis.py")


def test_no_module_only_passes_the_bus_on() -> None:
    assert [name for name in _GONE if (ROOT / name).exists()] == []
    gone = {name.removesuffix(".py").replace("/", ".") for name in _GONE}
    users = []
    for tree in ("streams_app", "busconsole", "tests", "bench", "scripts", "pipeline"):
        for path in (ROOT / tree).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    named = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    named = [node.module or "", *(f"{node.module}.{alias.name}" for alias in node.names)]
                else:
                    continue
                users += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}" for name in named if name in gone]
    assert users == []


def test_one_reading_of_a_urls_cluster_argument() -> None:
    """``?cluster=yes|no|auto`` is read by eventbus.connection alone; the console's client and settings use it."""
    readers = sorted({
        str(path.relative_to(ROOT))
        for tree in ("streams_app", "busconsole", "eventbus", "scripts")
        for path in (ROOT / tree).rglob("*.py")
        if re.search(r"""key\s*==\s*["']cluster["']""", path.read_text())
    })
    assert readers == ["eventbus/connection.py"]


def test_the_console_passes_no_bus_name_on() -> None:
    """A console module imports from the bus only what it uses itself: no module re-exports the bus's
    names (its users import the owner)."""
    found = []
    for path in sorted((ROOT / "streams_app").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        imported = {
            (alias.asname or alias.name): node.lineno
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "eventbus"
            for alias in node.names
        }
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
        found += [f"{path.relative_to(ROOT)}:{line} passes on {name}" for name, line in imported.items() if name not in used]
    assert found == [], "console modules re-exporting the bus's names:\n" + "\n".join(found)


_ID_SPLIT = re.compile(r"""\.(?:partition|split)\(b?["']-["']""")


def test_one_split_of_an_entry_id() -> None:
    """``<ms>-<seq>`` is cut in two in eventbus.text alone (``id_ms``, ``id_order``)."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for tree in ("streams_app", "busconsole", "eventbus")
        for path in sorted((ROOT / tree).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _ID_SPLIT.search(line) and path != BUS / "text.py"
    ]
    assert found == [], "entry IDs split outside eventbus/text.py:\n" + "\n".join(found)
