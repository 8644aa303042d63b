"""Logic written once: the search page and the search API make one call, an export job states its
progress in one place. Checked on the source with :mod:`ast`, as tests/test_architecture.py does."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "streams_app"


def _calls(path: Path, name: str) -> list[int]:
    return [
        node.lineno for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and (node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)) == name
    ]


def test_the_search_page_and_the_search_api_share_one_search_call() -> None:
    calls = {str(path.relative_to(APP)): lines for path in (APP / "views").rglob("*.py")
             if (lines := _calls(path, "search_page"))}
    assert list(calls) == ["views/api/search.py"] and len(calls["views/api/search.py"]) == 1, calls


def test_an_export_job_states_its_saved_progress_in_one_place() -> None:
    tree = ast.parse((APP / "exports" / "files.py").read_text())
    states = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict)
              and any(isinstance(k, ast.Constant) and k.value == "cursor" for k in node.keys)]
    assert len(states) == 1, states
