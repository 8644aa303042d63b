"""The API reference page (/api/v1/docs/) in headless Chromium: every operation of the OpenAPI
document is drawn, under the console's strict Content-Security-Policy, with no console error.

The operation count is the document's own (the document itself is checked against the routes and
the validator in tests/security/test_openapi.py)."""

from __future__ import annotations

import pytest

from streams_app.views.api.openapi import openapi_document
from tests.browser.conftest import login_through_form


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_reference_page_renders_every_operation_under_the_csp(page, asgi_server, viewer) -> None:
    problems: list[str] = []  # CSP violations are reported as console errors by Chromium
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    failed: list[str] = []
    page.on("response", lambda r: failed.append(r.url) if r.status >= 400 and "/favicon.ico" not in r.url else None)
    login_through_form(page, viewer, asgi_server)
    page.goto("/api/v1/docs/")
    page.wait_for_selector(".opblock-summary")
    operations = sum(len(ops) for ops in openapi_document()["paths"].values())
    page.wait_for_function(f"document.querySelectorAll('.opblock').length >= {operations}")
    page.locator(".opblock-summary").first.click()
    page.wait_for_selector(".opblock-body")
    assert page.locator(".opblock").count() == operations
    assert "busconsole API" in page.inner_text(".info")
    assert failed == []
    # The browser's own favicon request answers 404, which it also logs as a console error.
    assert [p for p in problems if not p.startswith("Failed to load resource")] == [], problems
