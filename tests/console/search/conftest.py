"""The interop fixtures (the libraries' own venv and a starter for their scripts, the monitored
database's URL), shared with ``tests/console/interop/`` so the search is tested on data the real
libraries wrote."""

from __future__ import annotations

from tests.console.interop.conftest import interop_python, library, run_library, url

__all__ = ["interop_python", "library", "run_library", "url"]
