"""The stream page's groups and the group page's consumers: one ranked page at a time.

Real redis-server, Django's test client. Each expected page is a slice of Redis's own XINFO GROUPS
or XINFO CONSUMERS reply sorted in plain Python (:mod:`tests.console.views.ranked_bus`); the pages
are walked by following the links the page itself offers.
"""

from __future__ import annotations

import html
import re

import pytest
import redis
from django.test import Client

from tests.console.helpers import group_url, stream_url
from tests.console.views.ranked_bus import (
    GROUP,
    N_CONSUMERS,
    N_GROUPS,
    STREAM,
    build_consumers,
    build_groups,
    sorted_by_name,
    sorted_rows,
    text,
)

PAGE = 50
STREAM_PAGE = stream_url(STREAM)
GROUP_PAGE = group_url(STREAM, GROUP)


def section(body: str, table_id: str) -> str:
    start = body.index(f'id="{table_id}"')
    return body[start : body.index("</table>", start)]


def group_rows(body: str) -> list[tuple[str, str]]:
    """(name, lag cell) of each row of the groups table."""
    rows = re.findall(r'<tr[^>]*>\s*<td[^>]*><a class="mono" href="[^"]*">([^<]*)</a></td>(.*?)</tr>',
                      section(body, "groups-table"), re.S)
    return [(html.unescape(name), re.findall(r'<td class="num"[^>]*>(.*?)</td>', cells, re.S)[-1]) for name, cells in rows]


def consumer_names(body: str) -> list[str]:
    return [html.unescape(n) for n in re.findall(r'<tr[^>]*>\s*<td class="mono[^"]*">([^<]*)</td>', section(body, "consumers-table"))]


def link(body: str, pager_id: str, rel: str) -> str | None:
    """The href of the ``rel`` link of a pager, unescaped, without its fragment (None when absent)."""
    match = re.search(rf'<div class="pager" id="{pager_id}">(.*?)</div>', body, re.S)
    found = match and re.search(rf'rel="{rel}" href="([^"]*)"', match.group(1))
    return html.unescape(found.group(1)).split("#")[0] if found else None


def walk(web: Client, path: str, first_query: str, pager_id: str, read) -> list[list]:
    """Every page from ``path + first_query`` on, following the "Next" links: what ``read`` finds on each."""
    pages, query = [], first_query
    for _ in range(50):
        response = web.get(path + query)
        assert response.status_code == 200, response.content[:300]
        body = response.content.decode()
        pages.append(read(body))
        query = link(body, pager_id, "next")
        if query is None:
            return pages
    raise AssertionError("the pager never ended")


def chunks(items: list, size: int = PAGE) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# ------------------------------------------------------------------------------------ groups


@pytest.fixture
def many_groups(r: redis.Redis) -> list[dict]:
    build_groups(r)
    groups = r.xinfo_groups(STREAM)
    assert len(groups) == N_GROUPS and any(g["lag"] is None for g in groups)
    return groups


@pytest.mark.parametrize(
    ("query", "field", "descending"),
    [
        ("", "pending", True),  # the default: most pending first
        ("?groups_sort=pending&groups_order=asc", "pending", False),
        ("?groups_sort=lag", "lag", True),
        ("?groups_sort=lag&groups_order=asc", "lag", False),
        ("?groups_sort=consumers&groups_order=asc", "consumers", False),
    ],
)
def test_groups_pages_follow_the_sorted_xinfo_reply(viewer_client: Client, many_groups, query, field, descending):
    expected = [text(g["name"]) for g in sorted_rows(many_groups, field, descending=descending)]
    pages = walk(viewer_client, STREAM_PAGE, query, "groups-pager", lambda b: [n for n, _ in group_rows(b)])
    assert pages == chunks(expected)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_groups_by_name_both_ways(viewer_client: Client, many_groups, order: str) -> None:
    expected = [text(g["name"]) for g in sorted_by_name(many_groups, descending=order == "desc")]
    pages = walk(viewer_client, STREAM_PAGE, f"?groups_sort=name&groups_order={order}", "groups-pager",
                 lambda b: [n for n, _ in group_rows(b)])
    assert pages == chunks(expected)


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_unknown_lag_is_last_and_shown_as_unknown_either_way(viewer_client: Client, many_groups, order) -> None:
    unknown = sorted(text(g["name"]) for g in many_groups if g["lag"] is None)
    body = viewer_client.get(f"{STREAM_PAGE}?groups_sort=lag&groups_order={order}&groups_page=3").content.decode()
    rows = group_rows(body)
    assert [name for name, _ in rows[-len(unknown):]] == unknown
    assert all("unknown" in cell for _, cell in rows[-len(unknown):])
    assert not any("unknown" in cell for _, cell in rows[: -len(unknown)])


def test_groups_count_line_and_page_past_the_end(viewer_client: Client, many_groups) -> None:
    body = viewer_client.get(STREAM_PAGE).content.decode()
    assert f"1–{PAGE} of {N_GROUPS}, most pending first" in body
    assert "Page 1 of 3" in body
    last = viewer_client.get(f"{STREAM_PAGE}?groups_page=999").content.decode()  # shows the last page
    expected = [text(g["name"]) for g in sorted_rows(many_groups, "pending", descending=True)][2 * PAGE :]
    assert [n for n, _ in group_rows(last)] == expected
    assert f"{2 * PAGE + 1}–{N_GROUPS} of {N_GROUPS}" in last and link(last, "groups-pager", "next") is None


def test_header_links_flip_the_order_and_keep_the_entries_view(viewer_client: Client, r, many_groups) -> None:
    body = viewer_client.get(f"{STREAM_PAGE}?order=asc&groups_sort=lag&groups_page=2").content.decode()
    head = section(body, "groups-table").split("</thead>")[0]
    lag_link = html.unescape(re.search(r'href="([^"]*)#groups"[^>]*>Lag', head).group(1))
    assert "groups_order=asc" in lag_link and "order=asc" in lag_link and "groups_page" not in lag_link
    assert 'aria-sort="descending"><a' in head and "Lag▼" in head
    # The entries keep their own order (oldest first here), whatever the groups' order.
    entries = re.findall(r'<td class="mono nowrap">(?:<input[^>]*> )?<a href="[^"]*">([0-9]+-[0-9]+)</a>', body)
    assert entries[:3] == [e[0].decode() for e in r.xrange(STREAM, count=3)]
    # The entries' "jump to" form carries the groups' view along.
    assert '<input type="hidden" name="groups_sort" value="lag">' in body
    assert '<input type="hidden" name="groups_page" value="2">' in body


@pytest.mark.parametrize("query", ["?groups_sort=bogus", "?groups_order=up", "?groups_page=0", "?groups_page=x"])
def test_bad_group_paging_is_a_400_naming_the_parameter(viewer_client: Client, many_groups, query: str) -> None:
    response = viewer_client.get(STREAM_PAGE + query)
    assert response.status_code == 400
    assert query[1:].split("=")[0] in response.content.decode()


def test_a_stream_without_groups_says_so(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd(STREAM, {"n": "1"})
    body = viewer_client.get(STREAM_PAGE).content.decode()
    assert "No consumer groups read this stream." in body and 'id="groups-pager"' not in body


# --------------------------------------------------------------------------------- consumers


@pytest.fixture
def many_consumers(r: redis.Redis) -> redis.Redis:
    build_consumers(r)
    assert len(r.xinfo_consumers(STREAM, GROUP)) == N_CONSUMERS
    return r


@pytest.mark.parametrize(
    ("query", "field", "descending"),
    [("", "pending", True), ("?sort=pending&order=asc", "pending", False), ("?sort=idle", "idle", True),
     ("?sort=idle&order=asc", "idle", False)],
)
def test_consumer_pages_follow_the_sorted_xinfo_reply(viewer_client, many_consumers, query, field, descending):
    pages = walk(viewer_client, GROUP_PAGE, query, "consumers-pager", consumer_names)
    # Read after the pages: idle times grow between the two reads, but all alike, so the order holds.
    rows = many_consumers.xinfo_consumers(STREAM, GROUP)
    assert pages == chunks([text(c["name"]) for c in sorted_rows(rows, field, descending=descending)])


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_consumers_by_name_and_pending_figures(viewer_client: Client, many_consumers, order: str) -> None:
    rows = sorted_by_name(many_consumers.xinfo_consumers(STREAM, GROUP), descending=order == "desc")
    pages = walk(viewer_client, GROUP_PAGE, f"?sort=name&order={order}", "consumers-pager", consumer_names)
    assert pages == chunks([text(c["name"]) for c in rows])
    body = viewer_client.get(f"{GROUP_PAGE}?sort=name&order={order}").content.decode()
    cells = re.findall(r'<tr[^>]*>\s*<td class="mono[^"]*">[^<]*</td>\s*<td class="num[^"]*"[^>]*>(\d+)</td>',
                       section(body, "consumers-table"))
    assert [int(c) for c in cells] == [c["pending"] for c in rows[:PAGE]]


def test_unknown_inactive_sorts_last_by_name(viewer_client: Client, many_consumers) -> None:
    """Redis 7.0 reports no ``inactive``: every consumer is unknown there, so the order is by name."""
    rows = many_consumers.xinfo_consumers(STREAM, GROUP)
    pages = walk(viewer_client, GROUP_PAGE, "?sort=inactive", "consumers-pager", consumer_names)
    assert pages == chunks([text(c["name"]) for c in sorted_rows(rows, "inactive", descending=True)])


def test_the_group_page_is_one_page_of_consumers_with_a_count(viewer_client: Client, many_consumers) -> None:
    body = viewer_client.get(GROUP_PAGE).content.decode()
    assert f"1–{PAGE} of {N_CONSUMERS}, most pending first" in body
    assert len(consumer_names(body)) == PAGE
    datalist = re.search(r'<datalist id="consumer-names">(.*?)</datalist>', body, re.S).group(1)
    assert datalist.count("<option") == PAGE  # the names shown, not every consumer


def test_pending_filter_and_links_keep_the_consumers_view(viewer_client: Client, many_consumers) -> None:
    body = viewer_client.get(f"{GROUP_PAGE}?sort=idle&order=asc&page=2").content.decode()
    shown = consumer_names(body)
    links = [html.unescape(h) for h in re.findall(r'href="([^"]*)#pending">Show its pending', body)]
    assert links and all("sort=idle" in h and "order=asc" in h and "page=2" in h for h in links)
    # Following one filters the pending entries to that consumer and keeps the same consumers page.
    owner = re.search(r"consumer=([^&]+)", links[0]).group(1)
    filtered = viewer_client.get(GROUP_PAGE + links[0]).content.decode()
    assert consumer_names(filtered) == shown
    pending = re.findall(r'<td class="mono"[^>]*>([^<]*)</td>\s*<td class="num" title="\d+ ms"[^>]*>', filtered)
    expected = many_consumers.xpending_range(STREAM, GROUP, "-", "+", 50, consumername=owner)
    assert pending == [owner] * len(expected) and expected
    form = body[body.index('<form method="get" class="filters compact">'):]
    form = form[: form.index("</form>")]
    for name, value in (("sort", "idle"), ("order", "asc"), ("page", "2")):
        assert f'<input type="hidden" name="{name}" value="{value}">' in form


def test_many_consumers_with_pending_get_a_text_filter_not_a_huge_select(viewer_client, many_consumers) -> None:
    owners = sum(1 for c in many_consumers.xinfo_consumers(STREAM, GROUP) if c["pending"])
    assert owners > 100
    body = viewer_client.get(GROUP_PAGE).content.decode()
    assert '<select name="consumer">' not in body
    assert '<input type="text" name="consumer"' in body and f"any ({owners} own entries)" in body


def test_few_consumers_keep_the_select(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd(STREAM, {"n": "1"})
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, "only-one", {STREAM: ">"})
    body = viewer_client.get(GROUP_PAGE).content.decode()
    assert '<select name="consumer">' in body and "only-one (1)" in body
    assert "1–1 of 1" in body and 'id="consumers-pager"' not in body


@pytest.mark.parametrize("query", ["?sort=lag", "?order=sideways", "?page=-1", "?page=99999999999"])
def test_bad_consumer_paging_is_a_400(viewer_client: Client, many_consumers, query: str) -> None:
    response = viewer_client.get(GROUP_PAGE + query)
    assert response.status_code == 400
    assert query[1:].split("=")[0] in response.content.decode()


def test_the_live_refresh_of_pending_entries_renders_without_the_consumers(viewer_client, many_consumers) -> None:
    response = viewer_client.get(GROUP_PAGE, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and body.lstrip().startswith('<section id="pending"')
    assert 'id="consumers-table"' not in body
