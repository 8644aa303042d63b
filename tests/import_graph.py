"""The repository's import graph, read with :mod:`ast`, for the architecture tests.

Every import counts, including those inside functions and under ``if TYPE_CHECKING:``, so a
function-local import cannot hide a circle. ``from pkg import mod`` counts as an import of the
submodule when ``mod`` is one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("streams_app", "busconsole", "eventbus", "pipeline")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def imports_of(name: str, path: Path) -> Iterable[tuple[str, int]]:
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


IMPORTS = {name: sorted(set(imports_of(name, path))) for name, path in MODULES.items()}


def edges() -> dict[str, dict[str, int]]:
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


def forbidden_imports(where: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    """``module:line imports target`` for each import of a ``forbidden`` tree from the ``where`` trees."""
    def under(name: str, trees: tuple[str, ...]) -> bool:
        return any(name == tree or name.startswith(tree + ".") for tree in trees)

    return [
        f"{name}:{line} imports {target}"
        for name, imports in IMPORTS.items() if under(name, where) and not under(name, allowed)
        for target, line in imports if under(target, forbidden)
    ]
