"""Set-up shared by the Django benchmarks (``make bench`` skips this file: its name starts with ``_``).

Every benchmark must measure the console against data it made itself and leave nothing behind, so it
gets a private redis-server on a free port and a throwaway directory for the SQLite database and the
lake, and points the settings at them through the environment *before* ``django.setup()`` reads it.
Variables the settings would otherwise take from the caller's shell (a real ``DATABASE_URL``,
``BUSCONSOLE_LAKE`` or ``BUS_REDIS_URLS``) are overridden or removed for the same reason.

Importing this module needs the repository root on ``sys.path`` (the scripts put it there first).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from tests.servers import RedisServer


@contextmanager
def django_bench(*, read_only: bool = False) -> Iterator[RedisServer]:
    """A private redis-server and a migrated throwaway database, Django set up on them; all removed after.

    Yields the server: db 0 is the monitored bus (``conn="default"``), db 1 the console's own Redis.
    DEBUG is 1 so that no production secrets are needed; ``read_only`` sets ``BUSCONSOLE_READ_ONLY``
    (a benchmark that only reads proves it by running with every action refused). Logging defaults to
    WARNING so that the figures are not lost among INFO lines.
    """
    server = RedisServer()
    var_dir = tempfile.mkdtemp(prefix="busconsole-bench-")
    try:
        server.start()
        setup_django(
            bus_url=server.url(0),
            console_url=server.url(1),
            database_url=f"sqlite:///{var_dir}/bench.sqlite3",
            var_dir=var_dir,
            read_only=read_only,
        )
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)


def setup_django(
    *, bus_url: str, console_url: str, database_url: str, var_dir: str, read_only: bool = False,
    bus_urls: str | None = None,
) -> None:
    """Point the settings at a benchmark's own servers and directory, set Django up and migrate.

    Used by :func:`django_bench` and by the benchmarks that measure each database in a child process of
    its own (``snapshot.py``, ``scale.py``). ``bus_urls`` sets ``BUS_REDIS_URLS`` (several connections:
    ``tls.py``'s plain and TLS ones); without it only ``bus_url``, as ``default``.
    """
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "busconsole.settings",
            "BUS_REDIS_URL": bus_url,
            "REDIS_URL": console_url,
            "BUSCONSOLE_VAR_DIR": var_dir,
            "BUSCONSOLE_LAKE": f"{var_dir}/lake",
            "DATABASE_URL": database_url,
            "DEBUG": "1",
            "BUSCONSOLE_READ_ONLY": "1" if read_only else "0",
        }
    )
    if bus_urls:
        os.environ["BUS_REDIS_URLS"] = bus_urls
    else:
        os.environ.pop("BUS_REDIS_URLS", None)
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
