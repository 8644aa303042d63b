"""The console's two pagers.

- :func:`newest_first`, for lists of console records shown newest first (audit events, jobs, alerts):
  keyset paging on an increasing field (the primary key). The next page is "older than the last row
  shown", so a page costs the same at any depth of a long list and stays stable while new rows arrive
  at the top.
- :func:`ranked_window`, for the lists Redis only answers whole (a stream's groups, a group's
  consumers): the list is read once per request, ordered by the chosen figure and cut into numbered
  pages. A keyset cursor cannot work there: the order is by figures that change between requests.

Cursors and page numbers come from validated form fields, never from ``int(request.GET[...])``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar, cast

from django import forms
from django.db.models import Model, QuerySet
from django.http import QueryDict

from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.reads.groups import RankedRow, RowsPage
from streams_app.redis_ops.reads.limits import DEFAULT_PAGE

M = TypeVar("M", bound=Model)

#: Rows per page of a ranked list (the API takes ``count`` instead).
PAGE_SIZE = DEFAULT_PAGE
#: The highest page number taken: far past any real list, small enough to stay an ordinary integer.
MAX_PAGE_NUMBER = 10**7


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


# ------------------------------------------------------------------------------ ranked lists


class RankForm(forms.Form):
    """``sort``, ``order`` and ``page`` of one ranked list.

    A page showing two lists names this one's parameters with a prefix (``groups_sort``...): the
    stream page's entries already take ``order``. Django's own prefix joins with a hyphen, which the
    ``{% query %}`` tag cannot take as a keyword, hence :meth:`add_prefix`.
    """

    sort = forms.ChoiceField(required=False)
    order = forms.ChoiceField(required=False, choices=[("", "default"), ("desc", "descending"),
                                                       ("asc", "ascending")])
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE_NUMBER)

    def __init__(self, data: QueryDict, *, sorts: Mapping[str, str], prefix: str | None = None) -> None:
        super().__init__(data, prefix=prefix)
        cast(forms.ChoiceField, self.fields["sort"]).choices = [("", "default"), *((name, name) for name in sorts)]

    def add_prefix(self, field_name: str) -> str:
        return f"{self.prefix}_{field_name}" if self.prefix else field_name


class Ranking(NamedTuple):
    sort: str
    order: str | None  # None: the sort's own direction
    page: int


def ranking(data: QueryDict, *, sorts: Mapping[str, str], prefix: str | None = None) -> Ranking:
    """The validated ``sort``/``order``/``page`` of a list: a bad value is a 400 naming the parameter as
    sent (``groups_page: ...``), which is why this does not go through ``forms.validated``. None of them
    given (most pages) is the defaults, without building the form."""
    if not any((f"{prefix}_{name}" if prefix else name) in data for name in RankForm.base_fields):
        return Ranking(next(iter(sorts)), None, 1)
    form = RankForm(data, sorts=sorts, prefix=prefix)
    if not form.is_valid():
        raise InvalidArgument("; ".join(f"{form.add_prefix(name)}: {' '.join(map(str, errors))}"
                                        for name, errors in form.errors.items()))
    cleaned = form.cleaned_data
    return Ranking(cleaned["sort"] or next(iter(sorts)), cleaned["order"] or None, cleaned["page"] or 1)


@dataclass(frozen=True)
class Window(Generic[RankedRow]):
    """One numbered page of a ranked list as a page shows it: "showing 51-100 of 10,000", the page
    links, and per sortable column the order its header link asks for and its mark."""

    ranked: RowsPage[RankedRow]
    number: int
    pages: int
    columns: dict[str, dict[str, Any]]

    @property
    def rows(self) -> tuple[RankedRow, ...]:
        return self.ranked.rows

    @property
    def total(self) -> int:
        return self.ranked.total

    @property
    def sort(self) -> str:
        return self.ranked.sort

    @property
    def order(self) -> str:
        return self.ranked.order

    @property
    def first(self) -> int:
        """The place of the first row shown, from 1 (0 for an empty list)."""
        return self.ranked.offset + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.ranked.offset + len(self.rows)

    @property
    def prev(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None


def ranked_window(
    rows: Sequence[RankedRow], params: Ranking, *, sorts: Mapping[str, str], size: int = PAGE_SIZE
) -> Window[RankedRow]:
    """Page ``params.page`` of ``rows`` ordered by ``params``; a page past the end shows the last page
    (the list may have shrunk since the link was made), an empty list one empty page."""
    pages = max(1, -(-len(rows) // size))
    number = min(params.page, pages)
    page = group_reads.ranked(rows, sorts=dict(sorts), sort=params.sort, order=params.order,
                        offset=(number - 1) * size, count=size)
    columns: dict[str, dict[str, Any]] = {}
    for name, default in sorts.items():
        if name == page.sort:
            flipped = "asc" if page.order == "desc" else "desc"
            columns[name] = {"order": None if flipped == default else flipped,
                             "mark": "▼" if page.order == "desc" else "▲",
                             "aria": "descending" if page.order == "desc" else "ascending"}
        else:
            columns[name] = {"order": None, "mark": "", "aria": "none"}
    return Window(ranked=page, number=number, pages=pages, columns=columns)
