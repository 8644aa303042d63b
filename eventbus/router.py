"""Which function handles which event type, for which stream and consumer group.

A *logical group* is a consumer group: every group sees every entry of its streams once, and
its handlers pick the types they care about. A process runs all groups (a monolith) or a subset
(split services); either way each group's handlers must all live in the processes that run it,
because an entry whose type has no handler in its group is acknowledged and skipped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .retry import RetryPolicy

#: the type a catch-all handler is registered for
ANY_TYPE = "*"

HandlerFn = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Handler:
    fn: HandlerFn
    type: str
    stream: str
    group: str
    retry: RetryPolicy
    is_async: bool
    #: seconds an async handler may run before it is cancelled and counted as failed
    timeout: float | None = None

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))


@dataclass(slots=True)
class Subscription:
    """One consumer group on one stream, and its handlers by event type."""

    stream: str
    group: str
    #: where the group starts when it is created: "0" (the whole stream) or "$" (new entries only)
    start: str
    handlers: dict[str, Handler] = field(default_factory=dict)

    def handler_for(self, type_: str) -> Handler | None:
        return self.handlers.get(type_) or self.handlers.get(ANY_TYPE)


class Router:
    """The registry behind ``@bus.on``."""

    def __init__(self) -> None:
        self._subscriptions: dict[tuple[str, str], Subscription] = {}

    def add(
        self,
        fn: HandlerFn,
        *,
        type: str,
        stream: str,
        group: str,
        start: str,
        retry: RetryPolicy,
        timeout: float | None = None,
    ) -> Handler:
        if start not in ("0", "$"):
            # Other IDs are valid for XGROUP CREATE but almost always a mistake in code.
            raise ValueError(f"start must be '0' (whole stream) or '$' (new entries), not {start!r}")
        sub = self._subscriptions.get((stream, group))
        if sub is None:
            sub = self._subscriptions[(stream, group)] = Subscription(stream=stream, group=group, start=start)
        elif sub.start != start:
            raise ValueError(
                f"Group {group!r} on {stream!r} is declared with start {sub.start!r} and {start!r}."
            )
        if type in sub.handlers:
            existing = sub.handlers[type].name
            raise ValueError(f"{type!r} on {stream!r} already has a handler in group {group!r}: {existing}.")
        handler = Handler(
            fn=fn,
            type=type,
            stream=stream,
            group=group,
            retry=retry,
            is_async=inspect.iscoroutinefunction(fn),
            timeout=timeout,
        )
        sub.handlers[type] = handler
        return handler

    def groups(self) -> set[str]:
        return {group for _, group in self._subscriptions}

    def subscriptions(self, groups: Iterable[str] | None = None) -> list[Subscription]:
        """The subscriptions of ``groups`` (all when ``None``); unknown names are an error."""
        if groups is None:
            return list(self._subscriptions.values())
        wanted = set(groups)
        unknown = wanted - self.groups()
        if unknown:
            raise ValueError(f"No handlers are registered for group(s) {sorted(unknown)}.")
        return [sub for (_, group), sub in self._subscriptions.items() if group in wanted]
