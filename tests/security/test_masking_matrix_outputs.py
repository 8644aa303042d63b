"""The masking matrix beyond pages (docs/api.md#masking): every export format and job download, the
websocket tail and the progress SSE endpoint, and the console's command line (``manage.py bus``, called
and from a shell) show no canary to any role, with the canaries and rules of
``tests/security/masking_world.py`` in the route matrix's world.
"""

from __future__ import annotations

import asyncio
import io
import json

import pyarrow.parquet as pq
import pytest
from django.contrib.auth.models import User

from streams_app.jobs import runner
from tests.conftest import session_cookie
from tests.console.conftest import logged_in
from tests.console.helpers import CONN
from tests.security import masking_world
from tests.security.masking_world import CANARIES, MASK, body_of, leaked, shows_masked
from tests.security.routes import SIGNED_IN, World
from tests.security.routes import world as route_world  # noqa: F401 - the fixture

FORMATS = ("ndjson", "csv", "parquet")


def export_text(body: bytes, fmt: str) -> str:
    if fmt == "parquet":  # compressed: read the cells back
        return json.dumps(pq.read_table(io.BytesIO(body)).to_pylist(), default=repr, ensure_ascii=False)
    return body.decode("utf-8", "replace")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("role", SIGNED_IN)
def test_every_export_format_and_job_download_is_masked(world: World, role: str, fmt: str, settings, tmp_path) -> None:
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path)
    settings.BUSCONSOLE_JOBS_PER_USER = 10  # the route matrix's world already holds a job of each user
    client = logged_in(world.users[role])
    for path in (f"/api/v1/c/{CONN}/streams/orders/export", f"/c/{CONN}/streams/orders/export/"):
        response = client.get(path, {"format": fmt})
        assert response.status_code == 200, (path, response.content[:200])
        text = export_text(body_of(response), fmt)
        assert not leaked(text) and shows_masked(text), (path, fmt)
    started = client.post(
        f"/api/v1/c/{CONN}/streams/orders/export", json.dumps({"format": fmt}), content_type="application/json"
    )
    assert started.status_code in (200, 202), started.content
    job = runner.job_run(started.json()["job"])
    assert job.state == "done", job.error
    download = client.get(f"/jobs/{job.pk}/download/")
    assert download.status_code == 200
    text = export_text(body_of(download), fmt)
    assert not leaked(text) and shows_masked(text)


@pytest.mark.parametrize("role", SIGNED_IN)
def test_the_tail_and_the_progress_stream_are_masked(world: World, role: str, asgi_server, r) -> None:
    import httpx

    from tests.console.live.helpers import entries_until, open_tail

    user: User = world.users[role]
    cookies = session_cookie(user)
    newest = r.xrevrange("orders", count=1)[0][0].decode()

    async def tail_frames() -> list:
        frames: list = []
        async with open_tail(asgi_server, cookies, b"orders", after="0-0") as ws:
            await entries_until(ws, newest, frames=frames)
        return frames

    frames = json.dumps(asyncio.run(tail_frames()), ensure_ascii=False)
    assert not leaked(frames) and shows_masked(frames)
    for query in ("", "?unmasked=1"):  # a stream of events never reveals
        with httpx.Client(cookies=cookies, timeout=30) as http:
            response = http.get(f"{asgi_server.url}/c/{CONN}/progress/orders/events/{query}")
        assert response.status_code == 200
        assert not leaked(response.text) and MASK in response.text


#: The command line's screens that print entries or what is parsed from them, as ``manage.py bus`` runs
#: them; ``python -m eventbus`` shows the bytes as stored, to whoever holds the Redis URL (README).
CLI = [
    ["inspect", "orders", "--limit", "20"],
    ["inspect", "orders", "--search", "t1"],
    ["inspect", "orders:dlq"],
    ["dlq", "orders:dlq", "--limit", "20"],
    ["dlq"],
]


def bus_command(capsys, *argv: str) -> tuple[int, str]:
    from django.core.management import CommandError, call_command

    try:
        call_command("bus", *argv)
        status = 0
    except CommandError as exc:
        status = exc.returncode
    out = capsys.readouterr().out
    return status, out + ("\n" + out.encode().decode("unicode_escape", "replace") if "\\u" in out else "")


@pytest.mark.parametrize("argv", CLI, ids=" ".join)
def test_the_console_command_line_is_masked(world: World, argv: list[str], capsys) -> None:
    for json_flag in ([], ["--json"]):
        status, text = bus_command(capsys, *argv, *json_flag)
        assert status == 0 and not leaked(text), (argv, json_flag, text[:300])
    if argv[0] == "inspect" and argv[1] == "orders" and len(argv) == 4 and argv[2] == "--limit":
        assert shows_masked(text)
# The matrix's world with the canaries written in (tests/security/masking_world.py), as this module's fixture.
world = masking_world.world


def test_the_console_command_line_finds_no_canary(world: World, capsys) -> None:
    for needle in CANARIES:
        status, text = bus_command(capsys, "inspect", "orders", "--search", needle, "--json")
        assert status == 1 and json.loads(text)["entries"] == []  # nothing found: exit 1


def test_the_console_command_line_from_a_shell_is_masked(world: World, capsys) -> None:
    """``manage.py bus ...`` as a shell runs it (run_from_argv: the bus's options reach the bus whole)."""
    from streams_app.management.commands.bus import Command

    with pytest.raises(SystemExit) as exit_:
        Command().run_from_argv(["manage.py", "bus", "inspect", "orders", "--limit", "20", "--json"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and not leaked(out) and shows_masked(out.encode().decode("unicode_escape"))
