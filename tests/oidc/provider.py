"""A real OpenID provider for the tests: node's ``oidc-provider`` (provider.mjs beside this file) on
127.0.0.1 and a free port, its users and its ID-token mode in a JSON file the test rewrites between logins.

``npm ci`` runs here the first time (node_modules missing), from the pinned package-lock.json; Node and npm
come from ``make setup`` (scripts/ensure_system.sh). :meth:`OidcProvider.sign_in` walks the provider's
login the way a browser does, for tests that drive the console with Django's test client.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx

from streams_app.accounts.oidc_config import OidcSettings, parse_oidc_roles
from tests.servers import free_port

HERE = Path(__file__).resolve().parent
CLIENT_ID = "busconsole"
CLIENT_SECRET = "busconsole-test-secret-6f2b"
PASSWORD = "provider-password-3c"
ROLES = "admin=ops-admins,operator=ops;oncall,viewer=readers"
NAME = "Test IdP"


def npm_ready() -> None:
    """node_modules installed from the lock file, once, whichever test process gets here first."""
    if (HERE / "node_modules" / "oidc-provider" / "package.json").exists():
        return
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not on PATH: run `make setup` (installs Debian's nodejs and npm)")
    with open(HERE / ".npm-ci.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (HERE / "node_modules" / "oidc-provider" / "package.json").exists():
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, capture_output=True, timeout=300)


@dataclass
class OidcProvider:
    """One provider process; ``users`` maps a login (its subject) to its groups."""

    redirect_uris: list[str]
    post_logout_redirect_uris: list[str]
    claims_in_id_token: bool = False
    port: int = field(default_factory=free_port)
    users: dict[str, list[str]] = field(default_factory=dict)
    id_token: str = "valid"
    process: subprocess.Popen | None = None
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="busconsole-oidc-")))

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self, **changes) -> OidcSettings:
        """The console's settings for this provider (what BUSCONSOLE_OIDC_* would say)."""
        values = {
            "issuer": self.issuer, "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
            "roles": parse_oidc_roles(ROLES), "name": NAME,
        }
        return OidcSettings(**{**values, **changes})

    def start(self) -> OidcProvider:
        npm_ready()
        config = {
            "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET, "redirect_uris": self.redirect_uris,
            "post_logout_redirect_uris": self.post_logout_redirect_uris, "claims_in_id_token": self.claims_in_id_token,
        }
        (self.dir / "config.json").write_text(json.dumps(config))
        self._write_state()
        self.log = open(self.dir / "provider.log", "w+")  # noqa: SIM115 - read back when it fails
        self.process = subprocess.Popen(
            ["node", str(HERE / "provider.mjs"), str(self.port), str(self.dir / "config.json"), str(self.dir / "state.json")],
            cwd=HERE, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "NODE_ENV": "test"},
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.log.seek(0)
                raise RuntimeError(f"oidc-provider did not start:\n{self.log.read()}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ----------------------------------------------------------------------------- what tests change

    def set_user(self, login: str, groups: list[str]) -> None:
        self.users[login] = list(groups)
        self._write_state()

    def set_id_token(self, mode: str) -> None:
        """How the token endpoint's ID token comes out: "valid" or a forgery (provider.mjs lists them)."""
        self.id_token = mode
        self._write_state()

    def _write_state(self) -> None:
        users = {
            login: {"password": PASSWORD, "groups": groups, "email": f"{login}@example.test", "name": login.title()}
            for login, groups in self.users.items()
        }
        tmp = self.dir / "state.json.tmp"
        tmp.write_text(json.dumps({"users": users, "id_token": self.id_token}))
        tmp.replace(self.dir / "state.json")  # atomic: the provider reads it on every request

    # ------------------------------------------------------------------------- a browser, without one

    def sign_in(self, authorize_url: str, login: str, *, browser: httpx.Client, password: str = PASSWORD) -> str:
        """Follow ``authorize_url`` at the provider with ``browser``'s cookies, signing in as ``login`` if
        the provider asks; the URL it sends the browser back to (the console's callback)."""
        url, asked = authorize_url, False
        for _ in range(20):
            if not url.startswith(self.issuer):
                return url
            response = browser.get(url)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                continue
            form = re.search(r'<form method="post" action="(/interaction/[^"]+/login)"', response.text)
            if response.status_code != 200 or form is None or asked:
                raise AssertionError(f"the provider answered {response.status_code}: {response.text[:500]}")
            asked = True
            response = browser.post(urljoin(url, form.group(1)), data={"username": login, "password": password})
            assert response.status_code in (302, 303), response.text[:500]
            url = urljoin(url, response.headers["location"])
        raise AssertionError("the provider redirected in circles")

    def asks_for_password(self, authorize_url: str, *, browser: httpx.Client) -> bool:
        """Whether the provider shows its login form for ``authorize_url`` (no session of its own)."""
        url = authorize_url
        for _ in range(20):
            if not url.startswith(self.issuer):
                return False
            response = browser.get(url)
            if response.status_code in (302, 303):
                url = urljoin(url, response.headers["location"])
                continue
            return '<form method="post" action="/interaction/' in response.text
        raise AssertionError("the provider redirected in circles")

    def end_session(self, end_session_url: str, *, browser: httpx.Client) -> str:
        """Confirm RP-initiated logout as a person would ("Yes, sign me out"); where the provider sends back."""
        assert end_session_url.startswith(self.issuer), end_session_url
        page = browser.get(end_session_url)
        assert page.status_code == 200, page.text[:500]
        action = re.search(r'<form method="post" action="([^"]+)"[^>]*id="op.logoutForm"', page.text) or re.search(
            r'id="op.logoutForm"[^>]*action="([^"]+)"', page.text
        )
        xsrf = re.search(r'name="xsrf" value="([^"]+)"', page.text)
        assert action and xsrf, page.text[:1000]
        done = browser.post(urljoin(end_session_url, action.group(1)), data={"xsrf": xsrf.group(1), "logout": "yes"})
        assert done.status_code in (302, 303), done.text[:500]
        return urljoin(end_session_url, done.headers["location"])


def provider_browser() -> httpx.Client:
    """A cookie jar and no automatic redirects: the steps of a browser's visit to the provider, one by one."""
    return httpx.Client(follow_redirects=False, timeout=10)


def path_of(url: str) -> str:
    """``/oidc/callback/?code=...`` of a URL on the console, for Django's test client."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
