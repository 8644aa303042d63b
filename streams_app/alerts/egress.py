"""Where alert webhooks may go: public addresses, plus the ranges an admin allows.

A webhook URL is typed by an admin, but the console POSTs to it from inside the network, so an
unchecked URL lets anyone who can edit a rule (or a DNS record) reach loopback services, the monitored
Redis, cloud metadata endpoints and private hosts, and read the answer back from the delivery error.
Two checks stand in the way:

- :func:`url_problem`, on the URL's text: http or https only, a host, no credentials, a port in range.
- :func:`addresses_checked`, on the addresses the host resolves to *now*: every one must be allowed,
  and the caller connects only to those (so a DNS answer that changes between the rule's save and the
  alert's send, or between this check and the connection, cannot swap in an internal address).

The rule form runs both at save time as a courteous first line; the delivery runs both again before
every send, and that is the check that counts. ``BUSCONSOLE_WEBHOOK_ALLOW`` (CIDRs, parsed at start-up)
opens ranges for on-premise receivers; an allowed range wins over the deny list.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network
from urllib.parse import urlsplit

Address = IPv4Address | IPv6Address
Network = IPv4Network | IPv6Network

SCHEMES = ("http", "https")

#: Ranges a webhook never reaches unless allowed, each with the word an error names it by. More
#: specific entries come first so the metadata endpoints are named as such. Anything else that is
#: not global unicast (documentation, benchmarking, IETF ranges...) is refused as "non-public" too.
DENIED: tuple[tuple[Network, str], ...] = tuple(
    (ip_network(cidr), what)
    for cidr, what in (
        ("169.254.169.254/32", "cloud metadata"),
        ("fd00:ec2::254/128", "cloud metadata"),
        ("0.0.0.0/8", "unspecified"),  # connecting to 0.0.0.0 reaches the local host on Linux
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "carrier-grade NAT"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),  # 255.255.255.255 included
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/96", "IPv4-compatible"),  # deprecated embedding of IPv4 addresses
        ("fc00::/7", "private"),  # unique local addresses
        ("fe80::/10", "link-local"),
        ("ff00::/8", "multicast"),
    )
)

#: The NAT64 well-known prefix: its addresses carry an IPv4 address in their last 32 bits.
_NAT64 = ip_network("64:ff9b::/96")


class WebhookRefused(Exception):
    """The webhook's URL, or an address its host resolves to, is not one the console posts to."""


class WebhookLookupFailed(Exception):
    """The webhook's host did not resolve (now): a delivery failure to retry, not a refusal."""


def url_problem(url: str) -> str | None:
    """What is wrong with ``url``'s text as a webhook (None: nothing); no name is resolved here."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "The webhook URL is malformed or its port is out of range (1-65535)."
    if parts.scheme.lower() not in SCHEMES:
        return "The webhook must be an http:// or https:// URL."
    if "@" in parts.netloc:
        return "The webhook URL must not carry a user name or password (put a secret in its path or query)."
    if not parts.hostname:
        return "The webhook URL names no host."
    if port is not None and not 1 <= port <= 65535:
        return "The webhook URL's port must be between 1 and 65535."
    return None


def address_problem(address: Address, allow: Iterable[Network]) -> str | None:
    """Why a webhook may not connect to ``address`` (None: it may).

    An IPv4-mapped or NAT64 address (``::ffff:127.0.0.1``) is judged as the IPv4 address it stands
    for, and IPv6 forms that tunnel to an embedded IPv4 address (6to4, Teredo) are refused when that
    address would be.
    """
    address = _unmapped(address)
    if _allowed(address, allow):
        return None
    what = _denied_as(address)
    if what is None:
        for embedded in _embedded_ipv4(address):
            if not _allowed(embedded, allow) and _denied_as(embedded) is not None:
                what = f"tunnel to {_a(_denied_as(embedded) or '')}"
                break
    if what is None:
        return None
    return f"{address} is {_a(what)} address; webhooks go to public addresses unless BUSCONSOLE_WEBHOOK_ALLOW lists it."


def addresses_checked(host: str, port: int, allow: Iterable[Network]) -> list[Address]:
    """Resolve ``host`` once and return its addresses, every one of them allowed; the caller connects
    only to these.

    Raises :class:`WebhookRefused` when any address is refused: a name that answers with an internal
    address among public ones is treated as pointing inside. Raises :class:`WebhookLookupFailed`
    when the name does not resolve.
    """
    allowed = tuple(allow)
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookLookupFailed(f"{host} did not resolve") from exc
    addresses: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = ip_address(str(sockaddr[0]).partition("%")[0])  # a scope id names an interface, not a host
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise WebhookLookupFailed(f"{host} did not resolve")
    for address in addresses:
        problem = address_problem(address, allowed)
        if problem:
            raise WebhookRefused(problem)
    return addresses


def url_refusal_at_save(url: str, allow: Iterable[Network]) -> str | None:
    """The rule form's check: the URL's text, and its host when that is an address or a local name.

    Names are not resolved here: a form must not wait on a slow resolver, and an answer now proves
    nothing about the answer at send time, which :func:`addresses_checked` checks before every POST.
    """
    problem = url_problem(url)
    if problem:
        return problem
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):  # RFC 6761: always loopback
        host = "127.0.0.1"
    try:
        address = ip_address(host.partition("%")[0])
    except ValueError:
        return None
    return address_problem(address, tuple(allow))


def _a(word: str) -> str:
    return f"an {word}" if word[:1].lower() in "aeiou" else f"a {word}"


def _unmapped(address: Address) -> Address:
    """The IPv4 address an IPv4-mapped or NAT64 address stands for (``::ffff:a.b.c.d``, ``64:ff9b::a.b.c.d``).

    NAT64 is unwrapped rather than refused: on an IPv6-only host with DNS64 every public receiver
    resolves into that prefix (which Python counts as reserved), and what it reaches is the IPv4 host.
    """
    if isinstance(address, IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _allowed(address: Address, allow: Iterable[Network]) -> bool:
    return any(address.version == net.version and address in net for net in allow)


def _denied_as(address: Address) -> str | None:
    for net, what in DENIED:
        if address.version == net.version and address in net:
            return what
    if not address.is_global or address.is_multicast or address.is_reserved:
        return "non-public"
    return None


def _embedded_ipv4(address: Address) -> list[IPv4Address]:
    if not isinstance(address, IPv6Address):
        return []
    embedded: list[IPv4Address] = []
    if address.sixtofour is not None:
        embedded.append(address.sixtofour)
    if address.teredo is not None:
        embedded.extend(address.teredo)
    return embedded
