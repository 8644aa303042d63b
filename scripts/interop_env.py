"""The interop tests' own virtualenv, ``.venv-interop``, built from ``requirements-interop.txt``.

The other buses' client libraries (taskiq + taskiq-redis, streaQ + coredis, OmniDaemon, FastStream)
pin redis-py and coredis versions of their own. They are test tools, so they live apart from the
console's venv and can never hold one of its runtime dependencies back: each interop test runs its
library here, in a subprocess that writes to the test's redis-server, and reads the result through
the console in the main venv (tests/console/interop/).

``make test`` runs this before pytest; the interop tests' conftest runs it too, so a bare ``pytest``
on a fresh clone works. It rebuilds only when the requirements file changed (its hash is kept in the
stamp) or the venv is gone, under a file lock, and prints the venv's python. Run as::

    python3 scripts/interop_env.py        # builds if needed, prints .venv-interop/bin/python
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REQUIREMENTS = REPO / "requirements-interop.txt"
VENV = REPO / ".venv-interop"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".installed"


def _wanted() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def is_current() -> bool:
    return PYTHON.exists() and STAMP.exists() and STAMP.read_text().strip() == _wanted()


def ensure(base_python: str | None = None) -> Path:
    """Build or refresh ``.venv-interop`` unless it matches the requirements; return its python."""
    if is_current():
        return PYTHON
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(REPO / ".venv-interop.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another pytest or make may be building it: wait for that one
        if is_current():
            return PYTHON
        started = time.monotonic()
        print("interop_env: building .venv-interop from requirements-interop.txt", file=sys.stderr, flush=True)
        if VENV.exists():
            shutil.rmtree(VENV)
        subprocess.run([base_python or sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
            check=True,
        )
        STAMP.write_text(_wanted() + "\n")
        print(f"interop_env: built in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return PYTHON


if __name__ == "__main__":
    print(ensure(sys.argv[1] if len(sys.argv) > 1 else None))
