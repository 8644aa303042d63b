"""The metrics package keeps one module per job a sample has, each small enough to read at once.

Taking snapshots, whether they keep up, scheduling the mirror, rollups, pruning and the series charts
read each have a module of their own, and none re-exports another's names: a caller imports the owner.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

METRICS = Path(__file__).resolve().parents[3] / "streams_app" / "metrics"
#: module -> the public names it owns
OWNERS = {
    "snapshots": {"snapshot_tick_for", "snapshot_take", "snapshot_take_guarded", "snapshot_resume_due"},
    "health": {"SnapshotHealth", "snapshot_health"},
    "mirror_schedule": {"mirror_full_due", "mirror_sync_guarded"},
    "mirror_pass": {"mirror_pass_part"},
    "rollups": {"samples_downsample", "rollup_grace", "rolled_until", "rollups_until"},
    "pruning": {"samples_prune", "PRUNE_BATCH"},
    "series": {"series", "series_resolution", "SERIES_METRICS"},
}


def test_each_job_of_the_samples_has_its_own_module() -> None:
    for name, owned in OWNERS.items():
        module = importlib.import_module(f"streams_app.metrics.{name}")
        assert owned <= set(vars(module)), (name, owned - set(vars(module)))
        lines = len((METRICS / f"{name}.py").read_text().splitlines())
        assert lines < 300, (name, lines)


def test_no_module_of_the_split_re_exports_another() -> None:
    """A name is defined where it is used from: ``snapshots`` no longer hands out the mirror's sync."""
    for name in OWNERS:
        tree = ast.parse((METRICS / f"{name}.py").read_text())
        assert not [n for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)], name
        others = {n for other, names in OWNERS.items() if other != name for n in names}
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        public = {n for n in imported & others if not n.startswith("_")}
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert public <= used, (name, public - used)  # imported to be used, not to be handed on
    snapshots = importlib.import_module("streams_app.metrics.snapshots")
    assert not hasattr(snapshots, "mirror_sync") and not hasattr(snapshots, "SyncResult")
