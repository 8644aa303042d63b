"""The shipped nginx configuration in front of the console's real ASGI server: Debian's nginx, started here.

Through the proxy, over TLS: a page, a login with its CSRF check, the live tail's websocket (entries
arrive), a progress stream (an event arrives while the stream is still open: nothing buffered), a range
downloaded through the exports' location, static files from disk, the API's body limit (the same answer as the console's own), the client's address as the
console sees it, and plain HTTP sent to https. Then the same with the web process as the image runs it,
DEBUG=0: secure cookies, HSTS, hashed static files, and the scheme decided by SECURE_PROXY_SSL_HEADER.

What is expected comes from elsewhere: entry IDs from XADD, progress events from XRANGE, static bytes
from the files on disk, the API's answer from the console without the proxy, the counter's key from the
client address the test chose. Nothing is timed; clients' timeouts only turn a hang into a failure.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis
from django.conf import settings
from websockets.asyncio.client import connect

from eventbus import Bus
from tests.conftest import session_cookie
from tests.console.conftest import PASSWORD, make_user
from tests.console.helpers import seg
from tests.console.live.helpers import cookie_header, entries_until, until_live
from tests.console.views.test_progress_sse import messages, read, stored
from tests.deploy.nginx import Nginx
from tests.deploy.production import WebProcess, production_env

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = httpx.Timeout(30.0)
API_LIMIT = 256 * 1024  # the API's documented body limit (README, OpenAPI)


@pytest.fixture
def proxy(asgi_server) -> Iterator[Nginx]:
    server = Nginx(upstream_port=asgi_server.port, static_root=ROOT / "static").start()
    yield server
    server.stop()


def client(proxy: Nginx, **kwargs) -> httpx.Client:
    return httpx.Client(base_url=proxy.url, verify=proxy.ssl_context(), timeout=TIMEOUT, **kwargs)


def log_in(http: httpx.Client, proxy: Nginx, username: str) -> httpx.Response:
    """The login form as a browser sends it: the form's token, the cookie, and the page's Origin."""
    page = http.get("/login/")
    assert page.status_code == 200, page.text[:500]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return http.post("/login/", data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
                     headers={"Origin": proxy.url})


def test_a_page_and_a_login_with_csrf_through_the_proxy(proxy: Nginx, viewer) -> None:
    with client(proxy) as http:
        assert http.get("/").status_code == 302  # not signed in yet: to the login page
        forged = http.post("/login/", data={"username": viewer.username, "password": PASSWORD},
                           headers={"Origin": proxy.url})
        assert forged.status_code == 403  # no CSRF token: refused through the proxy too
        signed_in = log_in(http, proxy, viewer.username)
        assert signed_in.status_code == 302 and signed_in.headers["Location"] == "/", signed_in.text[:500]
        overview = http.get("/")
        assert overview.status_code == 200
        assert viewer.username in overview.text
        assert http.get("/readyz").json()["ready"] is True
    # Plain HTTP is sent to https.
    plain = httpx.get(f"http://127.0.0.1:{proxy.http_port}/login/?next=/", timeout=TIMEOUT)
    assert plain.status_code == 301
    assert plain.headers["Location"] == "https://127.0.0.1/login/?next=/"


def test_the_live_tail_websocket_through_the_proxy(proxy: Nginx, viewer, r: redis.Redis) -> None:
    key = b"orders/eu"  # a slash: its %2F must reach the console as sent
    r.xadd(key, {"n": "0"})
    url = f"wss://127.0.0.1:{proxy.https_port}/ws/c/default/streams/{seg(key)}/tail/"
    cookies = cookie_header(session_cookie(viewer))

    async def scenario() -> tuple[list[str], list[str]]:
        async with connect(url, ssl=proxy.ssl_context(), origin=proxy.url,
                           additional_headers={"Cookie": cookies},
                           proxy=None, compression=None) as ws:
            await until_live(ws)
            written = [r.xadd(key, {"n": str(i)}).decode() for i in range(1, 4)]
            got = await entries_until(ws, written[-1])
            return written, [entry["id"] for entry in got]

    written, received = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert received[-len(written):] == written


def test_a_progress_stream_is_not_buffered_by_the_proxy(proxy: Nginx, viewer, r: redis.Redis) -> None:
    bus = Bus.from_url(settings.BUS_REDIS_URL)
    try:
        task = bus.progress("report/7")
        key = b"progress:report/7"
        task.start({"steps": 3})
        with client(proxy, cookies=session_cookie(viewer)) as http, http.stream(
            "GET", f"/c/default/progress/{seg(key)}/events/"
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = messages(response)
            first = read(events, 1)
            task.delta({"step": 1})  # written while the response is open
            second = read(events, 1)
            assert [(m.id, m.event, m.data) for m in first + second] == stored(r, key)
            task.done({"rows": 3})
            rest = list(events)  # the console ends the response after the terminal event
        assert [(m.id, m.event, m.data) for m in first + second + rest] == stored(r, key)
        assert rest[-1].event == "done"
    finally:
        bus.close()


def test_a_direct_download_streams_through_the_proxy(proxy: Nginx, viewer, r: redis.Redis) -> None:
    key = b"orders/eu"
    written = [r.xadd(key, {"n": str(i)}).decode() for i in range(50)]
    with client(proxy) as http:
        log_in(http, proxy, viewer.username)
        with http.stream("POST", f"/c/default/streams/{seg(key)}/export/", headers={"Origin": proxy.url},
                         data={"format": "ndjson", "from": "-", "to": "+",
                               "csrfmiddlewaretoken": http.cookies["csrftoken"]}) as response:
            assert response.status_code == 200, response.read()[:300]
            lines = [json.loads(line) for line in response.iter_lines() if line]
    assert [line["id"] for line in lines] == written


def test_static_files_come_from_the_disk(proxy: Nginx) -> None:
    with client(proxy) as http:
        page = http.get("/login/").text
        href = re.search(r'<link rel="stylesheet" href="(/static/[^"]+)"', page).group(1)
        response = http.get(href)
    assert response.status_code == 200
    assert response.content == (ROOT / "static" / href.removeprefix("/static/")).read_bytes()
    assert response.headers["Cache-Control"] == "max-age=3600"  # nginx's `expires 1h`, not WhiteNoise


def test_the_api_body_limit_is_the_apis_own_answer(proxy: Nginx, asgi_server, operator, api_token) -> None:
    headers = {"Authorization": f"Bearer {api_token(operator)}", "Content-Type": "application/json"}
    path = "/api/v1/c/default/streams/limits/entries/"

    def body(size: int) -> bytes:
        head, tail = b'{"fields": {"pad": "', b'"}}'
        return head + b"x" * (size - len(head) - len(tail)) + tail

    for size in (API_LIMIT, API_LIMIT + 1):
        with client(proxy) as http:
            through = http.post(path, content=body(size), headers=headers)
        direct = httpx.post(asgi_server.url + path, content=body(size), headers=headers, timeout=TIMEOUT)
        assert through.status_code == direct.status_code, (size, through.text[:300], direct.text[:300])
        assert (through.status_code == 413) == (size > API_LIMIT)
        if size > API_LIMIT:
            assert through.headers["Content-Type"].startswith("application/json")
            assert through.json() == direct.json()
            # nginx refused it before the console read a byte: none of the console's own headers
            assert "X-Frame-Options" in direct.headers and "X-Frame-Options" not in through.headers


def test_the_console_sees_the_clients_address_not_the_proxys(proxy: Nginx, viewer) -> None:
    """Failed logins are counted per client address (REMOTE_ADDR): through the proxy it must be the
    client's (127.0.0.2 here), whatever X-Forwarded-For the client itself sends."""
    console = redis.Redis.from_url(settings.REDIS_URL)

    def counter(ip: str) -> bytes:  # streams_app/accounts/login.py's key, computed here
        return f"busconsole:login-fail:ip:{hashlib.sha256(ip.encode()).hexdigest()[:32]}".encode()

    transport = httpx.HTTPTransport(local_address="127.0.0.2", verify=proxy.ssl_context())
    with httpx.Client(base_url=proxy.url, transport=transport, timeout=TIMEOUT) as http:
        page = http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        refused = http.post("/login/", data={"username": viewer.username, "password": "wrong",
                                             "csrfmiddlewaretoken": token},
                            headers={"Origin": proxy.url, "X-Forwarded-For": "10.9.9.9"})
    assert refused.status_code == 200  # the form again, with its error
    assert console.get(counter("127.0.0.2")) == b"1"
    assert console.get(counter("10.9.9.9")) is None
    assert console.get(counter("127.0.0.1")) is None
    console.close()


# ------------------------------------------------------------------ the web process as the image runs it


@pytest.mark.parametrize("proxy_headers", ["--proxy-headers", "--no-proxy-headers"])
@pytest.mark.slow
def test_production_settings_behind_the_proxy(transactional_db, settings, static_root, proxy_headers) -> None:
    """DEBUG=0 behind nginx: secure cookies, HSTS, a login, hashed static files with long caching; the
    web process itself redirects a request without X-Forwarded-Proto and serves one with it. With
    ``--no-proxy-headers`` uvicorn ignores the header, so Django's SECURE_PROXY_SSL_HEADER alone decides."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # what the process knows
    user = make_user("petra-prod", groups=("viewer",))
    env = production_env(database=settings.DATABASES["default"]["NAME"], static_root=static_root)
    web = WebProcess(env, proxy_headers).start()
    proxy = Nginx(upstream_port=web.port, static_root=static_root).start()
    try:
        with client(proxy) as http:
            page = http.get("/login/")
            assert page.status_code == 200
            assert page.headers["Strict-Transport-Security"].startswith("max-age=")
            assert "secure" in page.headers["Set-Cookie"].lower()  # the CSRF cookie
            signed_in = log_in(http, proxy, user.username)
            assert signed_in.status_code == 302, signed_in.text[:500]
            session = [c for c in signed_in.headers.get_list("Set-Cookie") if c.startswith("sessionid=")]
            assert session and "secure" in session[0].lower()
            assert user.username in http.get("/").text

            href = re.search(r'<link rel="stylesheet" href="(/static/[^"]+)"', page.text).group(1)
            assert re.search(r"\.[0-9a-f]{12}\.css$", href), href  # a hashed name
            css = http.get(href, headers={"Accept-Encoding": "identity"})
            on_disk = (static_root / href.removeprefix("/static/")).read_bytes()
            assert css.content == on_disk
            assert "immutable" in css.headers["Cache-Control"]
            packed = http.get(href, headers={"Accept-Encoding": "gzip"})
            assert packed.headers["Content-Encoding"] == "gzip"  # collectstatic's .gz, sent by gzip_static
            assert packed.content == on_disk  # httpx decodes it
        direct = httpx.get(f"{web.url}/login/", timeout=TIMEOUT)
        assert direct.status_code == 301 and direct.headers["Location"] == f"https://127.0.0.1:{web.port}/login/"
        forwarded = httpx.get(f"{web.url}/login/", headers={"X-Forwarded-Proto": "https"}, timeout=TIMEOUT)
        assert forwarded.status_code == 200
        assert httpx.get(f"{web.url}/readyz", timeout=TIMEOUT).json() == {
            "ready": True, "checks": {"database": "ok", "redis": "ok", "migrations": "ok"}}
    finally:
        proxy.stop()
        web.stop()


# ------------------------------------------------------------------ what the file says, against the code


def proxy_read_timeouts() -> dict[str, int]:
    """Each location's proxy_read_timeout in seconds (the server's own where a location sets none)."""
    text = (ROOT / "deploy" / "nginx" / "busconsole.conf").read_text()
    server = text[text.index("listen 443 ssl;"):]
    default = int(re.search(r"^    proxy_read_timeout (\d+)s;", server, re.M).group(1))
    found = {}
    for match in re.finditer(r"^    location ([^{]+)\{(.*?)^    \}", server, re.M | re.S):
        own = re.search(r"proxy_read_timeout (\d+)s;", match.group(2))
        found[match.group(1).strip()] = int(own.group(1)) if own else default
    return found


def test_the_timeouts_outlast_the_keepalives() -> None:
    """nginx closes a response silent for proxy_read_timeout: the tail's socket is pinged by uvicorn
    (its own default interval), a progress stream writes a comment after each idle block."""
    import uvicorn

    from streams_app.redis_ops.progress import BLOCK_MS

    timeouts = proxy_read_timeouts()
    assert timeouts["/ws/"] > 2 * uvicorn.Config("busconsole.asgi:application").ws_ping_interval
    assert timeouts["~ ^/c/[^/]+/progress/.+/events/$"] > 2 * BLOCK_MS / 1000
    assert timeouts["/"] > settings.BUSCONSOLE_EXPORT_STREAM_BUDGET_S  # a direct download's longest think
