"""The deployment tests use the console's standing users and fixtures.

``import *`` skips names starting with an underscore, so the console's autouse fixtures (fresh
console state, fast hashing, a clean login throttle) are imported by name.
"""

from pathlib import Path

import pytest

from tests.console.conftest import *  # noqa: F403
from tests.console.conftest import (  # noqa: F401
    _clean_login_throttle,
    _fast_password_hashing,
    _fresh_console_state,
)
from tests.deploy.production import collectstatic, production_env


@pytest.fixture(scope="session")
def static_root(tmp_path_factory) -> Path:
    """STATIC_ROOT after ``manage.py collectstatic`` with production settings (hashed, compressed files):
    pages rendered with DEBUG=0 link to these names, and nginx serves them."""
    root = tmp_path_factory.mktemp("staticfiles")
    collectstatic(production_env(), root)
    return root
