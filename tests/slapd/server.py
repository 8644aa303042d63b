"""A real LDAP directory for the tests: Debian's ``slapd`` on 127.0.0.1 and a free port, in a temporary
directory, with an MDB database under ``dc=example,dc=test``: people in ``ou=people`` (inetOrgPerson, each
with a password), groups in ``ou=groups`` (groupOfNames). Tests change memberships between logins through
the directory's own protocol (python-ldap, bound as its root), never by editing files.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import ldap
import ldap.modlist

from tests.servers import free_port

SLAPD = "/usr/sbin/slapd"
SUFFIX = "dc=example,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "directory-root-7d"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
PASSWORD = "ldap-password-2e"
#: The account the console searches with (read access to people and groups, as a real deployment's).
SERVICE_DN = f"cn=busconsole,{SUFFIX}"
SERVICE_PASSWORD = "service-password-91"

CONFIG = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
pidfile {dir}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 104857600
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {dir}/data
access to attrs=userPassword by anonymous auth by self write by * none
access to * by dn.exact="{service_dn}" read by users read by * none
"""


@dataclass
class SlapdServer:
    port: int = field(default_factory=free_port)
    dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="busconsole-slapd-")))
    process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    def start(self) -> SlapdServer:
        if not Path(SLAPD).exists():
            raise RuntimeError(f"{SLAPD} is missing: run `make setup` (installs Debian's slapd)")
        (self.dir / "data").mkdir()
        (self.dir / "slapd.conf").write_text(CONFIG.format(
            dir=self.dir, suffix=SUFFIX, root_dn=ROOT_DN, root_password=ROOT_PASSWORD, service_dn=SERVICE_DN,
        ))
        # -d 0: in the foreground, so the process is ours to stop; -h: only this address and port.
        self.process = subprocess.Popen(
            [SLAPD, "-d", "0", "-f", str(self.dir / "slapd.conf"), "-h", self.uri],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                self.root().unbind_s()
                break
            except ldap.SERVER_DOWN:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"slapd did not start: {self.process.stderr.read().decode()}") from None
                time.sleep(0.05)
        self._seed()
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def root(self) -> ldap.ldapobject.LDAPObject:
        conn = ldap.initialize(self.uri)
        conn.set_option(ldap.OPT_NETWORK_TIMEOUT, 5)
        conn.simple_bind_s(ROOT_DN, ROOT_PASSWORD)
        return conn

    def _seed(self) -> None:
        conn = self.root()
        try:
            entries = [
                (SUFFIX, {"objectClass": [b"dcObject", b"organization"], "dc": [b"example"], "o": [b"Example"]}),
                (SERVICE_DN, {"objectClass": [b"person"], "cn": [b"busconsole"], "sn": [b"service"],
                              "userPassword": [SERVICE_PASSWORD.encode()]}),
                (PEOPLE, {"objectClass": [b"organizationalUnit"], "ou": [b"people"]}),
                (GROUPS, {"objectClass": [b"organizationalUnit"], "ou": [b"groups"]}),
            ]
            for dn, attrs in entries:
                conn.add_s(dn, ldap.modlist.addModlist(attrs))
        finally:
            conn.unbind_s()

    # ------------------------------------------------------------------------------ what tests change

    def add_person(self, uid: str, *, password: str = PASSWORD) -> str:
        dn = f"uid={uid},{PEOPLE}"
        attrs = {
            "objectClass": [b"inetOrgPerson"], "uid": [uid.encode()], "cn": [uid.title().encode()],
            "sn": [b"Tester"], "givenName": [uid.title().encode()], "mail": [f"{uid}@example.test".encode()],
            "userPassword": [password.encode()],
        }
        conn = self.root()
        try:
            conn.add_s(dn, ldap.modlist.addModlist(attrs))
        finally:
            conn.unbind_s()
        return dn

    def set_groups(self, uid: str, groups: list[str]) -> None:
        """Make ``uid`` a member of exactly ``groups`` (groupOfNames, made on first use)."""
        member = f"uid={uid},{PEOPLE}".encode()
        conn = self.root()
        try:
            existing = {
                attrs["cn"][0].decode(): (dn, attrs.get("member", []))
                for dn, attrs in conn.search_s(GROUPS, ldap.SCOPE_ONELEVEL, "(objectClass=groupOfNames)", ["cn", "member"])
            }
            for name in groups:
                if name not in existing:
                    conn.add_s(f"cn={name},{GROUPS}", ldap.modlist.addModlist(
                        {"objectClass": [b"groupOfNames"], "cn": [name.encode()], "member": [member]}))
                elif member not in existing[name][1]:
                    conn.modify_s(existing[name][0], [(ldap.MOD_ADD, "member", [member])])
            for name, (dn, members) in existing.items():
                if name not in groups and member in members:
                    if members == [member]:  # groupOfNames needs a member: the root stands in
                        conn.modify_s(dn, [(ldap.MOD_REPLACE, "member", [ROOT_DN.encode()])])
                    else:
                        conn.modify_s(dn, [(ldap.MOD_DELETE, "member", [member])])
        finally:
            conn.unbind_s()
