"""The web process freezes its start-up heap: checked in a fresh interpreter (freezing this one would
change what the rest of the suite's collector sees), by CPython's own count of frozen objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import gc, json, sys
before = gc.get_freeze_count()
import {module}
print(json.dumps({{"before": before, "after": gc.get_freeze_count(),
                   "urlconf": "streams_app.urls" in sys.modules, "garbage": len(gc.garbage)}}))
"""


@pytest.mark.parametrize("module", ["busconsole.asgi", "busconsole.wsgi"])
@pytest.mark.slow
def test_the_web_entry_points_freeze_the_loaded_project(module: str, tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", "DEBUG": "1",
           "BUSCONSOLE_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3"}
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == 0
    assert seen["urlconf"]  # the views were imported before the freeze, not on the first request
    assert seen["after"] > 10_000  # the project's objects, frozen (Django alone is tens of thousands)
    assert seen["garbage"] == 0
