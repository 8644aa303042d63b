"""The private PostgreSQL that ``make test-postgres`` and ``bench/scale.py`` start (:mod:`tests.postgres`).

Skipped where Debian's ``postgresql`` is not installed (``make test`` does not need it; ``make
system-postgres`` installs it).
"""

from __future__ import annotations

import os
import socket

import pytest

from tests.postgres import DATABASE, SUPERUSER, PostgresServer, pg_bindir


def _have_postgres() -> bool:
    try:
        pg_bindir()
    except RuntimeError:
        return False
    return True


pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(not _have_postgres(), reason="no PostgreSQL server binaries (make system-postgres)"),
]


def test_starts_private_on_loopback_and_leaves_nothing_behind() -> None:
    import psycopg

    server = PostgresServer().start()
    try:
        with psycopg.connect(server.url()) as conn:
            row = conn.execute("SELECT current_user, current_database(), inet_server_addr()::text").fetchone()
            settings = dict(conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'port', 'unix_socket_directories')"
            ).fetchall())
        assert row == (SUPERUSER, DATABASE, "127.0.0.1/32")
        assert settings == {"fsync": "off", "port": str(server.port), "unix_socket_directories": server.directory}
        if os.geteuid() == 0:  # PostgreSQL refuses root: the data belongs to the account it runs as
            assert server.user and os.stat(server.datadir).st_uid != 0
    finally:
        server.cleanup()
    assert not os.path.exists(server.directory)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=1):
        pass
