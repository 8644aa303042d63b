"""TLS to Redis, configured one way for every client of the project: on the URL.

A ``rediss://`` URL and up to five query parameters, redis-py's own names, configure TLS for each
client that takes a URL: the event bus (``python -m eventbus``, ``Bus.from_url``) and whatever else a
program connects with a URL (a monitoring application's connections, a Celery broker, a channel layer, a
cache):

``ssl_ca_certs``
    the CA certificates (PEM) the server's certificate must chain to; default: the system's.
``ssl_certfile``, ``ssl_keyfile``
    the client's certificate and key (PEM), for a server with ``tls-auth-clients yes``.
``ssl_cert_reqs``
    ``required`` (the default), ``optional`` or ``none``: whether the server's certificate is verified.
``ssl_check_hostname``
    ``true`` (the default) or ``false``: whether the server's certificate must name the URL's host.

Why this module rather than redis-py's URL parsing alone (which reads the same parameters):

- redis-py before 6.0 does not check the host name unless told, 6.0 and later do: the defaults are
  given here, so the same URL is verified the same way on every version;
- Celery (kombu) ignores the URL's ``ssl_*`` parameters and, for a bare ``rediss://``, connects with
  ``CERT_NONE`` (it only warns); channels-redis and Django's cache take their options beside the URL:
  :func:`tls_options` is the one dict each of them is given;
- a misspelt parameter, one on a ``redis://`` URL, or a file that is not there would only surface at
  the first connection, as an error naming none of them: :func:`tls_problem` says it at start-up.

:func:`tls_reason` finds the TLS failure behind a connection error (redis-py words them all as
"Error 1 connecting to ...") and says it for a person, for the command line's messages and any program's
error pages. Standard library only: a program may read its settings with it before it loads redis.
"""

from __future__ import annotations

import os
import ssl
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

#: The TLS parameters a URL may carry, and only these: every client of the project honours them.
TLS_PARAMETERS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname")
_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
_CERT_REQS = ("required", "optional", "none")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _query(url: str) -> list[tuple[str, str]]:
    return parse_qsl(urlsplit(url).query, keep_blank_values=True)


def is_tls(url: str) -> bool:
    return url.lower().startswith("rediss://")


def tls_problem(url: str) -> str | None:
    """What is wrong with the TLS parameters of ``url``, said for a person; None when nothing is.

    Refused: an ``ssl_*`` parameter this module does not list (a typo, or one some client would drop),
    any ``ssl_*`` parameter on a URL that is not ``rediss://``, a value out of range, a certificate or
    key file that cannot be read, and a client certificate without its key (or the other way round).
    """
    given = {key: unquote(value) for key, value in _query(url) if key.startswith("ssl_")}
    unknown = sorted(set(given) - set(TLS_PARAMETERS))
    if unknown:
        return f"has {', '.join(unknown)}: the TLS parameters are {', '.join(TLS_PARAMETERS)}"
    if given and not is_tls(url):
        return f"has {', '.join(sorted(given))} but is not a rediss:// URL (TLS needs rediss://)"
    reqs = given.get("ssl_cert_reqs")
    if reqs is not None and reqs.lower() not in _CERT_REQS:
        return f"has ssl_cert_reqs={reqs!r}: expected required, optional or none"
    check = given.get("ssl_check_hostname")
    if check is not None and check.lower() not in _TRUE + _FALSE:
        return f"has ssl_check_hostname={check!r}: expected true or false"
    for name in _FILES:
        path = given.get(name)
        if path is not None and not os.access(path, os.R_OK):
            return f"has {name}={path}, a file that does not exist or cannot be read"
    if ("ssl_certfile" in given) != ("ssl_keyfile" in given):
        return "has only one of ssl_certfile and ssl_keyfile: a client certificate needs both"
    return None


def tls_options(url: str) -> dict[str, Any]:
    """redis-py's keyword arguments for ``url``'s TLS: {} unless ``rediss://``.

    The defaults verify the server's certificate and its name (``ssl_cert_reqs=required``,
    ``ssl_check_hostname=True``); the URL's own parameters win. Give these to every client built on
    the URL: ``redis.Redis.from_url(url, **tls_options(url))``, a kombu ``broker_use_ssl``, a
    channels-redis host, a Django cache's ``OPTIONS``.
    """
    if not is_tls(url):
        return {}
    given = {key: unquote(value) for key, value in _query(url) if key in TLS_PARAMETERS}
    options: dict[str, Any] = {"ssl_cert_reqs": "required", "ssl_check_hostname": True}
    for name in _FILES:
        if given.get(name):
            options[name] = given[name]
    if "ssl_cert_reqs" in given:
        options["ssl_cert_reqs"] = given["ssl_cert_reqs"].lower()
    if "ssl_check_hostname" in given:
        options["ssl_check_hostname"] = given["ssl_check_hostname"].lower() in _TRUE
    if options["ssl_cert_reqs"] == "none":
        options["ssl_check_hostname"] = False  # Python's ssl refuses a name check without verification
    return options


def without_tls(url: str) -> str:
    """``url`` without its TLS parameters (for a client given them by :func:`tls_options` instead)."""
    parts = urlsplit(url)
    kept = [(key, value) for key, value in _query(url) if key not in TLS_PARAMETERS]
    return urlunsplit(parts._replace(query=urlencode(kept)))


def _ssl_error(exc: BaseException | None) -> ssl.SSLError | None:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ssl.SSLError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def tls_reason(exc: BaseException, url: str) -> str | None:
    """Why the TLS connection behind ``exc`` failed, for a person; None when it is no TLS failure.

    A certificate the client refused (wrong CA, expired, another host's name) names the check that
    failed, and so does an alert the server sent about the client's certificate. In TLS 1.3 a server
    that wants a client certificate and got none, or one it does not trust, often just closes the
    connection after the handshake (an EOF in the TLS layer, or a reset): on a ``rediss://`` URL that is
    said as the likely cause, since a close for another reason reads the same.
    """
    if not is_tls(url):
        return None
    failure = _ssl_error(exc)
    with_cert = any(key == "ssl_certfile" for key, _ in _query(url))
    if isinstance(failure, ssl.SSLCertVerificationError):
        message = (failure.verify_message or failure.reason or str(failure)).rstrip(".")
        if "expired" in message:
            return f"the server's certificate has expired ({message})"
        if "mismatch" in message or "not valid for" in message:
            return (f"the server's certificate does not name this host ({message}); "
                    "connect by one of its names")
        if "issuer" in message or "self-signed" in message or "self signed" in message:
            return (f"the server's certificate is not signed by a trusted CA ({message}); "
                    "set ssl_ca_certs to the CA that signed it")
        return f"the server's certificate was refused ({message})"
    reason = (failure.reason or str(failure)).replace("_", " ").lower() if failure is not None else ""
    if "certificate required" in reason:
        return "the server requires a client certificate (tls-auth-clients): set ssl_certfile and ssl_keyfile on the URL"
    if "unknown ca" in reason or "bad certificate" in reason:
        return ("the server refused the client certificate: ssl_certfile must be signed by a CA the server "
                "trusts (its tls-ca-cert-file)")
    if isinstance(failure, ssl.SSLEOFError | ssl.SSLZeroReturnError) or (failure is None and _reset(exc)):
        # TLS 1.3: a refused client certificate is not announced to the client, the server just closes.
        if not with_cert:
            return ("the server closed the TLS connection; if it requires a client certificate "
                    "(tls-auth-clients), set ssl_certfile and ssl_keyfile on the URL")
        return ("the server closed the TLS connection; if it checks client certificates, ssl_certfile must be "
                "signed by a CA it trusts (its tls-ca-cert-file)")
    if failure is None:
        return None
    if "wrong version" in reason or "record layer" in reason or "packet length" in reason:
        return f"the server does not speak TLS on this port ({reason}); use redis:// or its TLS port"
    return f"the TLS handshake failed ({reason})"


def _reset(exc: BaseException | None) -> bool:
    """Whether the connection behind ``exc`` was reset by the server."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ConnectionResetError) or "reset by peer" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False
