"""The deployment tests use the console's standing users and fixtures.

``import *`` skips names starting with an underscore, so the console's autouse fixtures (fresh
console state, fast hashing, a clean login throttle) are imported by name.
"""

from tests.console.conftest import *  # noqa: F403
from tests.console.conftest import (  # noqa: F401
    _clean_login_throttle,
    _fast_password_hashing,
    _fresh_console_state,
)
