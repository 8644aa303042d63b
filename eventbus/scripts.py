"""The Lua scripts in ``lua/``, registered on a client.

Each script documents its own contract. They exist where a step must be atomic for crash safety
(ack + schedule a retry, ack + dead-letter, re-add + remove a due retry) or must check ownership
before acting (heartbeats, releases). redis-py's ``Script`` objects send EVALSHA and fall back to
loading the source after a NOSCRIPT (a restarted or failed-over server).

Lua sees all its keys on one server: on Redis Cluster every script's keys must share a hash slot.
They do: each script touches one stream and at most one of its companion keys, which
:mod:`eventbus.keys` names into the stream's slot (``orders`` -> ``{orders}:retry``...). Progress
streams have their own one-key script (``progress_write``), registered by :mod:`eventbus.progress`.

Redis scripts cannot load one another, so a function two scripts call is kept once, in a file of
``lua/`` that is no script of its own (it defines a local function and nothing else), and
:func:`source` joins it in front of each script that calls it (:data:`PRELUDES`). Redis sees, and
EVALSHA hashes, the joined text. A program with scripts of its own that move entries the bus's way
reads them through :func:`source` too, and so calls the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

NAMES = ("schedule_retry", "pump_retries", "dead_letter", "touch", "delete_consumer", "publish_unique")

PRELUDES = {"requeue": ("add_then_remove",), "move_add": ("hset_many",)}
"""The shared functions each script calls, by the name of their file in ``lua/``."""


def lua(name: str) -> str:
    """The text of ``lua/<name>.lua`` as it is, a script without its preludes or a prelude itself."""
    return resources.files(__package__).joinpath("lua", f"{name}.lua").read_text()


@cache
def source(name: str) -> str:
    """The script ``name`` as Redis runs it: its preludes, then its own text."""
    return "".join(lua(prelude) for prelude in PRELUDES.get(name, ())) + lua(name)


@dataclass(frozen=True, slots=True)
class Scripts:
    """Script handles bound to one client (sync or asyncio: both have ``register_script``)."""

    schedule_retry: Any
    pump_retries: Any
    dead_letter: Any
    touch: Any
    delete_consumer: Any
    publish_unique: Any

    @classmethod
    def register(cls, client: Any) -> Scripts:
        return cls(**{name: client.register_script(source(name)) for name in NAMES})
