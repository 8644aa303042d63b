"""The one pager for lists of console records shown newest first (audit events, jobs, alerts).

Keyset paging on an increasing field (the primary key): the next page is "older than the last row
shown", so a page costs the same at any depth of a long list and stays stable while new rows arrive
at the top. The cursor comes from a validated form field (an integer of at least 1), never from
``int(request.GET[...])``.
"""

from __future__ import annotations

from typing import Generic, NamedTuple, TypeVar

from django.db.models import Model, QuerySet

M = TypeVar("M", bound=Model)


class Page(NamedTuple, Generic[M]):
    """One page of rows and the cursor of the next (older) one, None when this is the last."""

    rows: list[M]
    older: int | None


def newest_first(rows: QuerySet[M], *, before: int | None, size: int, field: str = "pk") -> Page[M]:
    """Up to ``size`` rows of ``rows`` by ``field`` descending, only those below ``before`` if given.

    ``field`` is an integer field that only grows (the primary key). One row more than shown is read
    to learn whether an older page exists, so no COUNT is needed.
    """
    if before:
        rows = rows.filter(**{f"{field}__lt": before})
    page = list(rows.order_by(f"-{field}")[: size + 1])
    shown = page[:size]
    return Page(shown, getattr(shown[-1], field) if len(page) > size else None)
