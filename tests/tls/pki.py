"""Certificates for the TLS tests, made by ``openssl`` as an operator would: a CA, a server certificate
naming 127.0.0.1 and localhost, a client certificate, an expired server certificate, one naming another
host, and a second, unrelated CA (with a client certificate of its own).

``openssl req -x509`` and ``openssl x509 -req`` cannot date a certificate in the past (OpenSSL 3.0), so
the expired one is signed with ``openssl ca``, which takes explicit start and end dates.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
_CA_CONFIG = """\
[ ca ]
default_ca = test
[ test ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = none
[ any ]
commonName = supplied
[ leaf ]
subjectAltName = DNS:localhost,IP:127.0.0.1
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth
"""


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Path  # the CA that signed the server and client certificates
    other_ca: Path  # a CA nobody here trusts
    server: Pair  # SANs: DNS:localhost, IP:127.0.0.1
    client: Pair
    expired: Pair  # a server certificate of the right CA and names, valid only on 1-2 January 2020
    wrong_name: Pair  # a server certificate of the right CA naming only redis.elsewhere.test
    stranger: Pair  # a client certificate of the other CA


def _run(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str, subject: str) -> Path:
    _run(directory, "req", "-x509", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "3",
         "-subj", f"/CN={subject}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return directory / f"{name}.pem"


def _leaf(directory: Path, name: str, *, ca: str, san: str, usage: str) -> Pair:
    _run(directory, "req", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    (directory / f"{name}.ext").write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n")
    _run(directory, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
         "-CAcreateserial", "-out", f"{name}.pem", "-days", "3", "-extfile", f"{name}.ext")
    return Pair(directory / f"{name}.pem", directory / f"{name}.key")


def _expired(directory: Path) -> Pair:
    (directory / "ca.cnf").write_text(_CA_CONFIG)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("1000\n")
    _run(directory, "req", *_EC, "-keyout", "expired.key", "-out", "expired.csr", "-subj", "/CN=expired")
    _run(directory, "ca", "-batch", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key", "-in",
         "expired.csr", "-out", "expired.pem", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
         "-extensions", "leaf", "-notext")
    return Pair(directory / "expired.pem", directory / "expired.key")


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = _ca(directory, "ca", "busconsole test CA")
    other = _ca(directory, "other-ca", "an unrelated CA")
    return Pki(
        directory=directory,
        ca=ca,
        other_ca=other,
        server=_leaf(directory, "server", ca="ca", san="DNS:localhost,IP:127.0.0.1", usage="serverAuth"),
        client=_leaf(directory, "client", ca="ca", san="DNS:busconsole-client", usage="clientAuth"),
        expired=_expired(directory),
        wrong_name=_leaf(directory, "wrong-name", ca="ca", san="DNS:redis.elsewhere.test", usage="serverAuth"),
        stranger=_leaf(directory, "stranger", ca="other-ca", san="DNS:stranger", usage="clientAuth"),
    )
