"""The image's HEALTHCHECK, run as Docker runs it (its own command, from the Dockerfile) against the web
process as the image starts it with DEBUG=0: healthy when ready, unhealthy when the console's Redis is gone.

Only the port is changed (the image's 8000 to a free one). Whether Redis is gone is Redis's own word.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import redis
from django.conf import settings

from tests.deploy.production import WebProcess, production_env
from tests.servers import RedisServer

ROOT = Path(__file__).resolve().parents[2]


def healthcheck_command(port: int) -> list[str]:
    line = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("HEALTHCHECK"))
    argv = json.loads(line.split(" CMD ", 1)[1])
    assert sum(arg.count("127.0.0.1:8000/") for arg in argv) == 1, argv
    return [re.sub(r"127\.0\.0\.1:8000/", f"127.0.0.1:{port}/", arg) for arg in argv]


def healthy(web: WebProcess) -> bool:
    argv = healthcheck_command(web.port)
    assert argv[0] == "python"
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), *argv[1:]], env=web.env, capture_output=True,
                          text=True, timeout=30)
    return done.returncode == 0


@pytest.mark.parametrize("allowed_hosts", ["127.0.0.1", ".example.com,127.0.0.1"])
@pytest.mark.slow
def test_the_image_healthcheck_follows_readiness(transactional_db, static_root, allowed_hosts) -> None:
    own = RedisServer().start()
    env = production_env(database=settings.DATABASES["default"]["NAME"], static_root=static_root,
                         ALLOWED_HOSTS=allowed_hosts, REDIS_URL=own.url(1))
    web = WebProcess(env).start()
    try:
        assert healthy(web)
        own.stop()
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(own.url(1), socket_connect_timeout=2).ping()
        assert not healthy(web)
    finally:
        web.stop()
        own.cleanup()
