"""Reading one journey on the three surfaces: the page (its rows' data attributes), the API and
``manage.py bus journey --json``; each gives the steps as dicts of kind, entry_id, group and state."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from django.core.management import call_command
from django.test import Client

from tests.console.helpers import api

_ROW = re.compile(r'<tr data-kind="(\w+)" data-entry="([^"]*)" data-group="([^"]*)" data-state="([^"]*)">'
                  r'(.*?)</tr>', re.S)  # fmt: skip


def page_steps(client: Client, q: str, stream: str, **extra: str) -> tuple[list[dict[str, Any]], str]:
    response = client.get("/c/default/journey/", {"q": q, "stream": stream, **extra})
    assert response.status_code == 200, response.content[:500]
    body = response.content.decode()
    steps = [
        {"kind": k, "entry_id": e or None, "group": html.unescape(g) or None, "state": s or None,
         "text": re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", cells))).strip()}
        for k, e, g, s, cells in _ROW.findall(body)
    ]  # fmt: skip
    return steps, body


def api_doc(client: Client, q: str, stream: str, **extra: str) -> dict[str, Any]:
    response = client.get(api("/c/default/journey/"), {"q": q, "stream": stream, **extra})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def cli_doc(capsys, q: str, stream: str) -> dict[str, Any]:
    capsys.readouterr()
    call_command("bus", "journey", q, "--stream", stream, "--json")
    return json.loads(capsys.readouterr().out)


def surfaces(client: Client, capsys, q: str, stream: str) -> dict[str, list[dict[str, Any]]]:
    """The steps of one journey as the page, the API and the console's command line show them."""
    return {"page": page_steps(client, q, stream)[0], "api": api_doc(client, q, stream)["steps"],
            "cli": cli_doc(capsys, q, stream)["steps"]}  # fmt: skip
