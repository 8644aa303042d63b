"""The server's own facts for the overview: INFO server, memory and clients, and DBSIZE, per primary.

Raw figures only: how they are shown (bytes in Redis's ``1.50M`` style) is the page's business
(``templatetags/figures.py``).
"""

from __future__ import annotations

import redis

from ..client import is_cluster, primaries, primary_failed
from ..errors import Unreachable, translated


def server_overview(conn: str) -> dict[str, object]:
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
    answers: list[tuple[dict, int | None]] = []
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
        info: dict = {}
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

    memory = total("used_memory")
    sizes = [size for _, size in answers if size is not None]
    return {
        "redis_version": first.get("redis_version"),
        "used_memory_human": first.get("used_memory_human") if len(nodes) == 1 or memory is None
        else _human_bytes(memory),
        "connected_clients": total("connected_clients"),
        "uptime_in_seconds": first.get("uptime_in_seconds"),
        "dbsize": sum(sizes) if sizes else None,
        "nodes": len(nodes),
        "missed": tuple(missed),
        "unavailable": tuple(refused),
        "unavailable_reason": next(iter(refused.values()), None),
    }


#: The INFO sections the overview reads, each its own command so that one refused costs only its figures.
_OVERVIEW_SECTIONS = ("server", "memory", "clients")


def _human_bytes(size: int) -> str:
    """Redis's own ``used_memory_human`` style (1.50M) for a sum over nodes."""
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.2f}{unit}" if unit != "B" else f"{size}B"
        value /= 1024
    return f"{size}B"
