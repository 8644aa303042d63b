"""Unknown addresses answer the console's own 404 (a page, or the API's JSON error), with DEBUG on as
under ``make run``: never Django's debug page, which lists every URL pattern of the project."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize("debug", [True, False])
def test_an_unknown_page_is_the_console_s_404(settings, viewer_client: Client, debug: bool) -> None:
    settings.DEBUG = debug
    response = viewer_client.get("/no/such/page/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "There is nothing at this address." in body
    assert "URLconf" not in body and "api/v1/" not in body  # Django's debug page names the patterns


def test_an_unknown_api_address_is_the_json_error_with_debug_on(settings, viewer_client: Client) -> None:
    settings.DEBUG = True
    response = viewer_client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_a_404_a_view_answers_keeps_its_own_message_with_debug_on(settings, viewer_client: Client, r) -> None:
    settings.DEBUG = True
    response = viewer_client.get("/c/default/streams/no-such-stream/")
    assert response.status_code == 404
    assert "No such stream." in response.content.decode()
