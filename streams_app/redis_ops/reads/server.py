"""The server's own facts for the overview: INFO server, memory and clients, and DBSIZE, per primary.

Raw figures only: how they are shown (bytes in Redis's ``1.50M`` style) is the page's business
(``templatetags/figures.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from ..client import is_cluster, primaries, primary_failed
from ..errors import Unreachable, translated


@dataclass(frozen=True, slots=True)
class ServerOverview:
    """What the overview shows of one connection; None where the server did not say (a section refused)."""

    redis_version: str | None  # the first primary's
    used_memory: int | None  # bytes, summed over the primaries that answered
    used_memory_human: str | None  # the first primary's own text of its used_memory (Redis's 1.50M)
    connected_clients: int | None  # summed over the primaries
    uptime_in_seconds: int | None  # the first primary's
    dbsize: int | None  # keys, summed over the primaries
    nodes: int  # primaries asked
    missed: tuple[str, ...]  # primaries (host:port) that did not answer: the sums are partial
    unavailable: tuple[str, ...]  # what the server refused ("INFO memory", "DBSIZE")
    unavailable_reason: str | None  # Redis's reason for the first refusal


def server_overview(conn: str) -> ServerOverview:
    """A few INFO facts for the overview page: INFO server, memory and clients, and DBSIZE, per primary.

    INFO and DBSIZE answer for one node, so on a cluster keys, memory and clients are summed over
    the primaries that answered; ``missed`` names the others (and the figures are then partial).
    Managed services rename INFO away or refuse some of its sections to the console's user: each
    section is its own command, and one refused leaves its figures None and is named in
    ``unavailable`` (``("INFO memory", ...)``, with Redis's reason in ``unavailable_reason``).
    """
    with translated(conn):
        nodes = primaries(conn)
    cluster = is_cluster(conn)
    answers: list[tuple[dict[Any, Any], int | None]] = []
    missed: list[str] = []
    refused: dict[str, str] = {}
    for node in nodes:
        try:
            with translated(conn):
                pipe = node.client.pipeline(transaction=False)
                for section in _OVERVIEW_SECTIONS:
                    pipe.info(section)
                pipe.dbsize()
                *sections, dbsize = pipe.execute(raise_on_error=False)
        except Unreachable:
            if not cluster:
                raise
            primary_failed(conn)  # a replica promoted in its place is asked from the next overview on
            missed.append(node.name)
            continue
        info: dict[Any, Any] = {}
        for name, reply in zip((*_OVERVIEW_SECTIONS, "DBSIZE"), (*sections, dbsize), strict=True):
            if isinstance(reply, redis.ResponseError):
                refused.setdefault(name if name == "DBSIZE" else f"INFO {name}", str(reply))
            elif isinstance(reply, Exception):
                with translated(conn):
                    raise reply
            elif name != "DBSIZE":
                info.update(reply)
        answers.append((info, None if isinstance(dbsize, Exception) else int(dbsize)))
    if not answers:
        raise Unreachable(f"No primary of {conn!r} answers: {', '.join(missed)}.", conn=conn)
    first = answers[0][0]

    def total(field: str) -> int | None:
        values = [info[field] for info, _ in answers if field in info]
        return sum(int(value or 0) for value in values) if values else None

    sizes = [size for _, size in answers if size is not None]
    version, human, uptime = (first.get(name) for name in ("redis_version", "used_memory_human", "uptime_in_seconds"))
    return ServerOverview(
        redis_version=None if version is None else str(version),
        used_memory=total("used_memory"),
        used_memory_human=None if human is None else str(human),
        connected_clients=total("connected_clients"),
        uptime_in_seconds=None if uptime is None else int(uptime),
        dbsize=sum(sizes) if sizes else None,
        nodes=len(nodes),
        missed=tuple(missed),
        unavailable=tuple(refused),
        unavailable_reason=next(iter(refused.values()), None),
    )


#: The INFO sections the overview reads, each its own command so that one refused costs only its figures.
_OVERVIEW_SECTIONS = ("server", "memory", "clients")
