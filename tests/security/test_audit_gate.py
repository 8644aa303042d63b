"""Every audit row of an attempt is written by the one gate, ``streams_app/services/audit.py``.

The gate checks the role of ``ACTION_ROLES`` (and read-only mode) before it writes a row, so a module
that writes rows itself can leave a row for something nobody checked, or a row of another shape. This
walks every module of ``streams_app`` with ``ast`` (independently of the code it checks) and fails on:

* an ``AuditEvent`` row made anywhere but its one writer, ``streams_app/audit/records.py``;
* the writer (``audit_write``) or a hand-built row (``ActionRecord(...)``) reached from outside the gate;
* the system writer (``audit_write_system``) used by anything but the rows no role decides: a background
  job's end (the request that started it was the gated attempt) and a login (who a user is, before any
  role);
* a private name of the gate imported elsewhere, and a gate block with nothing in it (a refusal written
  through an empty ``with action_audit(...): pass``: the gate has ``action_check`` for that).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "streams_app"
GATE = "streams_app/services/audit.py"
WRITER = "streams_app/audit/records.py"
#: Rows written after the request, or before anyone has a role: what they record, and why no role applies.
SYSTEM_WRITERS = {
    "streams_app/jobs/runner.py": "a background job's finished row; its start was the gated attempt",
    "streams_app/views/auth.py": "a directory login (login.ldap): who a user is, before any role",
    "streams_app/views/oidc.py": "a single sign-on login (login.oidc): who a user is, before any role",
}
_ROW_MAKERS = {"create", "bulk_create", "get_or_create", "update_or_create"}
_GATE_BLOCKS = {"action_audit"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text(), filename=str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
    ]


def _name_of(node: ast.expr) -> str:
    """The last name of a call's target: ``records.audit_write`` and ``audit_write`` are both the writer."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _row_made(node: ast.Call) -> bool:
    """``AuditEvent(...)`` or ``AuditEvent.objects.create(...)`` (and the other ways a manager makes rows)."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "AuditEvent":
        return True
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _ROW_MAKERS
        and isinstance(func.value, ast.Attribute)
        and isinstance(func.value.value, ast.Name)
        and func.value.value.id == "AuditEvent"
    )


def _uses(tree: ast.Module) -> dict[str, list[int]]:
    """Where a module names each writer (imported, called or passed on) or builds a row, by line."""
    found: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Name | ast.Attribute):
            names = [_name_of(node)]
        elif isinstance(node, ast.Call) and _name_of(node.func) == "ActionRecord":
            names = ["ActionRecord()"]  # a row built by hand (the type itself may be named anywhere)
        for name in names:
            if name in ("audit_write", "audit_write_system", "ActionRecord()"):
                found.setdefault(name, []).append(node.lineno)  # type: ignore[attr-defined]  # every node matched above (an import, a name, a call) has a line
    return found


def test_only_the_gate_writes_audit_rows() -> None:
    problems: list[str] = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _row_made(node) and module != WRITER:
                problems.append(f"{module}:{node.lineno} makes an AuditEvent row itself")
        uses = _uses(tree)
        if module not in (GATE, WRITER):
            for name in ("audit_write", "ActionRecord()"):
                problems += [f"{module}:{line} uses {name} outside the gate" for line in uses.get(name, [])]
        if module not in (WRITER, *SYSTEM_WRITERS):
            problems += [
                f"{module}:{line} writes a system row (audit_write_system): go through the gate"
                for line in uses.get("audit_write_system", [])
            ]
    assert problems == []


def test_the_gate_keeps_its_privates_and_has_no_empty_blocks() -> None:
    problems: list[str] = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == GATE[:-3].replace("/", ".") and module != GATE:
                problems += [f"{module}:{node.lineno} imports the gate's private {a.name}"
                             for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.With | ast.AsyncWith) and all(isinstance(s, ast.Pass) for s in node.body):
                calls = [i.context_expr for i in node.items if isinstance(i.context_expr, ast.Call)]
                if any(_name_of(c.func) in _GATE_BLOCKS for c in calls):
                    problems.append(f"{module}:{node.lineno} opens an empty gate block to write a refusal")
    assert problems == []


def test_the_system_writers_still_exist() -> None:
    """The exceptions above name real modules that use the system writer (a stale entry is an open door)."""
    modules = dict(_modules())
    for module in SYSTEM_WRITERS:
        assert "audit_write_system" in _uses(modules[module]), module
