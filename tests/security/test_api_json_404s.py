"""A missing job, another user's private view and an unknown API address are JSON 404s
(``{"error": {"code": "not_found", ...}}``), with DEBUG on and off.
"""

from __future__ import annotations

import pytest
from django.test import Client

from streams_app.saved.models import SavedView


@pytest.fixture(params=[True, False], ids=["DEBUG", "no DEBUG"])
def debug(request, settings) -> bool:
    settings.DEBUG = request.param
    return request.param


def assert_json_404(reply) -> None:
    assert reply.status_code == 404
    assert reply["Content-Type"] == "application/json", reply.content[:200]
    error = reply.json()["error"]
    assert error["code"] == "not_found" and error["message"]


def test_a_missing_job_is_a_json_404(debug, viewer_client: Client, operator_client: Client) -> None:
    assert_json_404(viewer_client.get("/api/v1/jobs/99999"))
    assert_json_404(viewer_client.get("/api/v1/jobs/99999/"))
    assert_json_404(operator_client.post("/api/v1/jobs/99999/cancel", "{}", content_type="application/json"))


def test_another_users_private_view_is_a_json_404(debug, viewer_client: Client, operator) -> None:
    theirs = SavedView.objects.create(owner=operator, name="mine", path="/c/default/streams/", shared=False)
    assert_json_404(viewer_client.post(f"/api/v1/views/{theirs.pk}/delete", "{}", content_type="application/json"))
    assert SavedView.objects.filter(pk=theirs.pk).exists()


def test_an_unknown_api_address_is_a_json_404(debug, viewer_client: Client) -> None:
    assert_json_404(viewer_client.get("/api/v1/no/such/address/"))
