"""Every page of the console on a phone (390 px) and on a wide screen (1600 px), in headless Chromium.

Why: at 390 px pages once scrolled sideways, the nav ran off its bar and the overview cut off
the DLQ depths. For each width this test opens every page (a hand list plus what a crawl of the nav
and the overview reaches, same-origin GET links only, bounded) with data that stresses a layout
(``tests/browser/layout_data.py``, which makes it and the hand list): keys and IDs with no place to
break, a binary key, a long group and consumer name, pending entries, a DLQ, a job, an open alert,
report rollups. It fails when

* the document is wider than the viewport (``scrollWidth > innerWidth``: the page scrolls sideways);
* a link or button of the top bar is not visible and clickable: its box lies inside the viewport and
  ``elementFromPoint`` at its centre is the link or inside it (at 390 px after opening the menu);
* on the overview, a DLQ's depth is not shown in full inside its block (the figure Redis reports);
* at 1600 px the content does not span the screen (a narrow fixed ``max-width``);
* a page answers 5xx.

Screenshots of the overview, a stream, a group and a DLQ at both widths go to ``artifacts/layout/``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis

from tests.browser.conftest import login_through_form
from tests.browser.layout_data import API_DOCS, DLQ, make_layout_data

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "layout"
WIDTHS = {"phone": (390, 844), "wide": (1600, 1000)}
MAX_PAGES = 60


# Paths the crawl never opens: logging out and what is not an HTML page (downloads, the scrape
# endpoint, the JSON API, Server-Sent Events). Django's admin is opened where the console links to it.
SKIP_PREFIXES = ("/logout/", "/static/", "/metrics", "/healthz")
SKIP_PARTS = ("/raw/", "/events/", "openapi.json")

OVERFLOW = """
() => {
  const width = window.innerWidth;
  const wide = [];
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    if (box.width && box.right > width + 0.5 && ![...el.children].some((c) => c.getBoundingClientRect().right > width + 0.5)) {
      const cls = typeof el.className === "string" && el.className ? "." + el.className.trim().split(/\\s+/).join(".") : "";
      wide.push(`<${el.tagName.toLowerCase()}${cls}> right=${Math.round(box.right)}`);
    }
  }
  return {scroll: document.documentElement.scrollWidth, inner: width, culprits: wide.slice(0, 6)};
}
"""

# Each link or button of the top bar: visible, inside the viewport, and the topmost element at its centre.
NAV_CHECK = """
() => {
  const problems = [];
  const items = document.querySelectorAll(".topbar a[href], .topbar button");
  for (const el of items) {
    const name = (el.textContent || "").trim() || el.getAttribute("href");
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) { problems.push(`${name}: not displayed`); continue; }
    if (box.left < 0 || box.top < 0 || box.right > window.innerWidth || box.bottom > window.innerHeight) {
      problems.push(`${name}: outside the viewport (${Math.round(box.left)},${Math.round(box.top)})-(${Math.round(box.right)},${Math.round(box.bottom)})`);
      continue;
    }
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    if (!hit || !(hit === el || el.contains(hit))) {
      problems.push(`${name}: covered by <${hit ? hit.tagName.toLowerCase() + "." + hit.className : "nothing"}>`);
    }
  }
  return {count: items.length, problems};
}
"""

DLQ_DEPTHS = """
() => [...document.querySelectorAll(".overview-activity .activity-block")]
  .filter((b) => (b.querySelector("h3") || {}).textContent.includes("Dead-letter"))
  .flatMap((block) => [...block.querySelectorAll("tr")].map((tr) => {
    const fig = tr.querySelector(".spark-last");
    fig.scrollIntoView({block: "center"});
    const outer = block.getBoundingClientRect(), box = fig.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    return {key: tr.querySelector("a").title, text: fig.textContent.trim(),
            inside: box.width > 0 && box.left >= outer.left && box.right <= outer.right && box.right <= window.innerWidth,
            clipped: fig.scrollWidth > fig.clientWidth + 1, topmost: !!hit && fig.contains(hit)};
  }))
"""



def crawlable(url: str, origin: str) -> str | None:
    """The path (and query) to open for a link, or None when the crawl must not follow it."""
    parts = urlsplit(url)
    if f"{parts.scheme}://{parts.netloc}" != origin:
        return None
    path = parts.path
    if path.startswith(SKIP_PREFIXES) or any(p in path for p in SKIP_PARTS):
        return None
    if path.startswith("/api/") and path != API_DOCS:
        return None
    return path + (f"?{parts.query}" if parts.query else "")


def page_kind(url: str) -> str:
    """A link's path with entry IDs and numbers blanked: one entry page per stream, one job page, etc."""
    return re.sub(r"/\d+(-\d+)?/", "/N/", urlsplit(url).path)


def links(page, selector: str, origin: str) -> list[str]:
    hrefs = page.eval_on_selector_all(selector, "els => els.map((a) => a.href)")
    return [p for p in (crawlable(h, origin) for h in hrefs) if p]


def check_every_page(page, hand: dict[str, str], origin: str, width: int) -> tuple[dict[str, str], list[str]]:
    """The hand list, then what the nav and the overview link to, then one more hop (one URL per kind),
    each checked by :func:`page_problems`; returns the pages and the problems found.

    Each page is opened once: the links of a page the crawl follows are read as it is checked.
    """
    found = dict(hand)
    seen = {page_kind(u) for u in found.values()}
    problems: list[str] = []
    opened: set[str] = set()

    def add(paths: list[str]) -> list[str]:
        added = []
        for p in paths:
            if len(found) >= MAX_PAGES or page_kind(p) in seen:
                continue
            seen.add(page_kind(p))
            found[f"crawled {p}"] = p
            added.append(p)
        return added

    def open_and_check(path: str, *, follow: bool) -> list[str]:
        response = page.goto(path)
        new = []
        if follow and response and "text/html" in response.headers.get("content-type", ""):
            new = add(links(page, ".topbar a[href], main a[href]", origin))
        name = next((n for n, p in found.items() if p == path), path)
        problems.extend(page_problems(page, response, name, path, width))
        opened.add(path)
        return new

    first_hop = open_and_check("/", follow=True)
    for p in [*first_hop, *hand.values()]:
        if len(found) >= MAX_PAGES:
            break
        if p.startswith("/admin/"):  # checked where the console links to it, not crawled: Django's own pages
            continue
        if p not in opened:
            open_and_check(p, follow=True)
    for path in found.values():
        if path not in opened:
            open_and_check(path, follow=False)
    return found, problems


def open_menu(page) -> None:
    """At a phone's width the nav sits behind its menu toggle: open it like a person would."""
    toggle = page.locator(".topbar .nav-menu > summary")
    if toggle.count() and toggle.is_visible():
        toggle.click()


def layout_problems(page, name: str, path: str, width: int) -> list[str]:
    return page_problems(page, page.goto(path), name, path, width)


def page_problems(page, response, name: str, path: str, width: int) -> list[str]:
    """What is wrong with the layout of ``path``, just opened in ``page`` with ``response``."""
    assert response is not None, f"{name} ({path}): no response"
    if "text/html" not in response.headers.get("content-type", ""):
        return []
    where = f"{name} ({path if len(path) < 70 else path[:40] + '...' + path[-25:]}) at {width} px"
    problems = [f"{where}: answered {response.status}"] if response.status >= 500 else []
    found = page.evaluate(OVERFLOW)
    if found["scroll"] > found["inner"]:
        problems.append(
            f"{where}: the document is {found['scroll']} px wide in a {found['inner']} px viewport; "
            f"widest: {', '.join(found['culprits'])}"
        )
    if page.locator(".topbar").count():
        open_menu(page)
        nav = page.evaluate(NAV_CHECK)
        problems += [f"{where}: nav {p}" for p in nav["problems"]]
        if (
            page.locator(".nav-menu").count() and nav["count"] < 9
        ):  # brand, a server, 5 links, Tokens, Log out
            problems.append(f"{where}: the top bar has only {nav['count']} links and buttons")
    return problems


@pytest.mark.parametrize("screen", WIDTHS)
def test_every_page_fits_the_screen_and_keeps_its_nav_reachable(
    screen, page, admin_user, asgi_server, r: redis.Redis
) -> None:
    width, height = WIDTHS[screen]
    hand = make_layout_data(r, admin_user)
    page.set_viewport_size({"width": width, "height": height})
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    problems = layout_problems(page, "login", "/login/", width)
    login_through_form(page, admin_user, asgi_server)
    to_check, crawl_problems = check_every_page(page, hand, asgi_server.url, width)
    assert len(to_check) > len(hand), "the crawl found no page beyond the hand list"
    problems += crawl_problems
    (ARTIFACTS / f"pages-{width}.txt").write_text("".join(f"{n}\t{p}\n" for n, p in to_check.items()))

    # The overview's key figures: each DLQ's depth, whole, inside its block, the number Redis holds.
    page.goto("/")
    depths = {row["key"]: row for row in page.evaluate(DLQ_DEPTHS)}
    expected = {k.decode(): str(r.xlen(k)) for k in (DLQ, b"orders:dlq")}
    assert {k: v["text"] for k, v in depths.items()} == expected
    problems += [
        f"overview at {width} px: DLQ depth of {k} cut off or covered: {v}"
        for k, v in depths.items()
        if not (v["inside"] and v["topmost"] and not v["clipped"])
    ]

    if screen == "wide":  # the width is used: the content spans most of the screen, not a narrow column
        used, room = page.evaluate(
            "[document.querySelector('main').getBoundingClientRect().width, "
            "document.documentElement.clientWidth]"
        )
        if used < 0.95 * room:
            problems.append(f"overview at {width} px: main is only {used:.0f} px wide of {room} px")

    for name in ("overview", "stream", "group", "dlq"):
        page.goto(hand[name])
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)

    assert problems == [], "\n".join(problems)


def test_the_menu_opens_and_closes_without_javascript(browser, asgi_server, admin_user) -> None:
    """The fold is a <details>: no script to load or to be refused by the CSP, and none needed."""
    context = browser.new_context(
        base_url=asgi_server.url,
        java_script_enabled=False,
        viewport={"width": WIDTHS["phone"][0], "height": WIDTHS["phone"][1]},
    )
    page = context.new_page()
    try:
        login_through_form(page, admin_user, asgi_server)
        links = page.locator(".topbar nav a, .topbar .who a, .topbar .who button")
        assert links.count() >= 6
        assert not any(link.is_visible() for link in links.all())  # folded behind "Menu"

        page.click(".nav-menu > summary")
        assert page.evaluate(NAV_CHECK)["problems"] == []
        page.click("text=Audit")
        page.wait_for_url(f"{asgi_server.url}/audit/")

        page.click(".nav-menu > summary")
        page.click(".nav-menu > summary")  # and folds again
        assert not any(link.is_visible() for link in links.all())

        page.set_viewport_size({"width": WIDTHS["wide"][0], "height": WIDTHS["wide"][1]})
        assert not page.locator(".nav-menu > summary").is_visible()  # a wide screen shows the links in a row
        assert page.evaluate(NAV_CHECK)["problems"] == []
    finally:
        context.close()
