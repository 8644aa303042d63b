"""Masking of dead letters: a rule naming a DLQ's own fields hides the parsed error and
traceback on the DLQ page, the dead letter's page, the DLQ API and the DLQ search; and an origin's rule
reaches the original message nested in an OmniDaemon dead letter (``data.failed_message``).

Redis holds the unmasked entries, written here in our convention (``dlq_*`` fields) and OmniDaemon's
(one JSON ``data`` field). The secrets, the masked form and the expected hash are the test's own (the hash
is spelled out with ``hmac``/``hashlib`` in :func:`expected_hash`, not computed with the console's helper).
"""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from tests.console.helpers import dlq_url, seg, stream_api, stream_url
from tests.console.masking.test_masked_paths import MASK, SECRET, expected_hash

ERROR = "TimeoutError: card 4000-1234 of bob.hidden@example.com refused"
TRACE = 'Traceback (most recent call last):\n  File "pay.py", line 9\nValueError: pin 8842-secret'
SECRETS = ("bob.hidden@example.com", "8842-secret")
OMNI_KEY = "omni-dlq:group:orders:billing"


def use_rules(settings, *rules: dict[str, str]) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(list(rules)))


def ours(r: redis.Redis) -> str:
    """Our event bus's dead letter of ``orders`` (docs/architecture.md#conventions-of-other-buses), in ``orders:dlq``."""
    fields = {"n": "1", "dlq_original_stream": "orders", "dlq_original_id": "5-0", "dlq_group": "billing"}
    return r.xadd("orders:dlq", {**fields, "dlq_error": ERROR, "dlq_traceback": TRACE}).decode()


def omni(r: redis.Redis, message: dict | None = None) -> str:
    """An OmniDaemon dead letter: the original message under ``failed_message`` in the one ``data`` field."""
    doc = {
        "topic": "orders",
        "original_stream": "omni-stream:orders",
        "original_id": "5-0",
        "failed_message": message if message is not None else {"content": {"n": 1}},
        "error": ERROR,
        "retry_count": 3,
        "failed_at": 1700000000.5,
    }
    return r.xadd(OMNI_KEY, {"data": json.dumps(doc)}).decode()


def assert_hidden(body: bytes) -> None:
    for secret in SECRETS:
        assert secret.encode() not in body, secret


def shown(body: bytes, text: str) -> bool:
    """Whether the page or the JSON reply carries ``text`` (JSON escapes ``•``)."""
    return text in body.decode() or json.dumps(text)[1:-1] in body.decode()


def api_entries(client: Client, key: str, **query: str) -> list[dict]:
    response = client.get(f"/api/v1/c/default/dlq/{seg(key)}/", query)
    assert response.status_code == 200, response.content[:300]
    assert_hidden(response.content)
    return response.json()["entries"]


# ------------------------------------------------------------------------------------- the DLQ page


@pytest.mark.parametrize("action", ["mask", "hash", "remove"])
def test_dlq_page_shows_the_error_as_the_rule_says(action, settings, db, viewer_client: Client, r) -> None:
    use_rules(
        settings,
        {"stream": "orders:dlq", "field": "dlq_error", "action": action},
        {"stream": "orders:dlq", "field": "dlq_traceback", "action": "remove"},
    )
    ours(r)
    response = viewer_client.get(dlq_url("orders:dlq"))
    assert response.status_code == 200
    assert_hidden(response.content)
    body = response.content.decode()
    cell = body[body.index('class="error-cell"') :].split("</td>", 1)[0]
    if action == "mask":
        assert f'<span class="bad-text">{MASK}</span>' in cell
    elif action == "hash":
        assert f'<span class="bad-text">{expected_hash(ERROR)}</span>' in cell
    else:
        assert "bad-text" not in cell  # no error at all: the row says so
    assert "Traceback" not in cell


def test_dlq_page_error_filter_cannot_find_a_masked_error(settings, db, viewer_client: Client, r) -> None:
    use_rules(settings, {"stream": "orders:dlq", "field": "dlq_error", "action": "mask"})
    ours(r)
    found = viewer_client.get(dlq_url("orders:dlq"), {"error": "bob.hidden"}).content.decode()
    assert "No entry with" in found and 'class="error-cell"' not in found
    # the filter runs on what the page shows: the masked form is what it finds
    masked = viewer_client.get(dlq_url("orders:dlq"), {"error": MASK}).content.decode()
    assert masked.count('class="error-cell"') == 1


def test_dlq_page_of_omnidaemon_masks_data_error_and_the_nested_message(
    settings, db, viewer_client: Client, r
) -> None:
    use_rules(
        settings,
        {"stream": "omni-dlq:*", "field": "data.error", "action": "mask"},
        {"stream": "omni-stream:orders", "field": "data.customer.email", "action": "mask"},
    )
    omni(r, {"customer": {"email": SECRET, "name": "Alice"}})
    response = viewer_client.get(dlq_url(OMNI_KEY))
    assert response.status_code == 200
    assert SECRET.encode() not in response.content
    assert_hidden(response.content)
    assert f'<span class="bad-text">{MASK}</span>' in response.content.decode()
    assert b"Alice" in response.content  # only the rule's path is hidden


# ----------------------------------------------------------------------------- the dead letter's page


def test_dead_letter_page_hides_error_and_traceback(settings, db, viewer_client: Client, r) -> None:
    use_rules(
        settings,
        {"stream": "orders:dlq", "field": "dlq_error", "action": "hash"},
        {"stream": "orders:dlq", "field": "dlq_traceback", "action": "mask"},
    )
    entry_id = ours(r)
    response = viewer_client.get(f"{dlq_url('orders:dlq')}entries/{entry_id}/")
    assert response.status_code == 200
    assert_hidden(response.content)
    body = response.content.decode()
    assert f'data-fact="error">{expected_hash(ERROR)}</p>' in body
    assert f'id="dead-letter-traceback">{MASK}</pre>' in body


def test_dead_letter_page_of_omnidaemon(settings, db, viewer_client: Client, r) -> None:
    use_rules(
        settings,
        {"stream": "omni-dlq:*", "field": "data.error", "action": "remove"},
        {"stream": "omni-stream:orders", "field": "data.customer.email", "action": "hash"},
    )
    entry_id = omni(r, {"customer": {"email": SECRET}})
    response = viewer_client.get(f"{dlq_url(OMNI_KEY)}entries/{entry_id}/")
    assert response.status_code == 200
    assert_hidden(response.content)
    assert SECRET.encode() not in response.content
    body = response.content.decode()
    assert "The entry names no error." in body
    assert expected_hash(SECRET) in body


# --------------------------------------------------------------------------------------- the DLQ API


@pytest.mark.parametrize(
    ("action", "error"), [("mask", MASK), ("hash", expected_hash(ERROR)), ("remove", None)]
)
def test_dlq_api_error(action, error, settings, db, viewer_client: Client, r) -> None:
    use_rules(settings, {"stream": "orders:dlq", "field": "dlq_error", "action": action})
    ours(r)
    (entry,) = api_entries(viewer_client, "orders:dlq")
    assert entry["error"] == error
    assert entry["payload"] == [{"name": "n", "format": "text", "value": "1", "truncated": False}]
    assert api_entries(viewer_client, "orders:dlq", error="bob.hidden") == []


def test_dlq_api_of_omnidaemon(settings, db, viewer_client: Client, r) -> None:
    use_rules(
        settings,
        {"stream": "omni-dlq:*", "field": "data.error", "action": "mask"},
        {"stream": "omni-stream:orders", "field": "data.customer.email", "action": "mask"},
    )
    omni(r, {"customer": {"email": SECRET, "name": "Alice"}})
    (entry,) = api_entries(viewer_client, OMNI_KEY)
    assert entry["error"] == MASK
    assert entry["payload"][0]["value"] == {"customer": {"email": MASK, "name": "Alice"}}


def test_dlq_api_reveal_shows_the_error_to_an_unmasked_role(settings, db, admin_client_: Client, r) -> None:
    """The control: the same entry, revealed, carries the secret (so the masked tests can fail)."""
    settings.BUSCONSOLE_UNMASKED_ROLES = ["admin"]
    use_rules(settings, {"stream": "orders:dlq", "field": "dlq_error", "action": "mask"})
    ours(r)
    response = admin_client_.get(f"/api/v1/c/default/dlq/{seg('orders:dlq')}/", {"unmasked": "1"})
    assert response.status_code == 200
    assert response.json()["entries"][0]["error"] == ERROR


# ----------------------------------------------------------------------------------------- the search


def search(client: Client, key: str, q: str) -> list[str]:
    response = client.get(stream_api(key, "search/"), {"q": q})
    assert response.status_code == 200, response.content[:300]
    assert_hidden(response.content)
    return [m["id"] for m in response.json()["matches"]]


def test_search_cannot_find_a_masked_error(settings, db, viewer_client: Client, r) -> None:
    use_rules(
        settings,
        {"stream": "orders:dlq", "field": "dlq_error", "action": "mask"},
        {"stream": "orders:dlq", "field": "dlq_traceback", "action": "mask"},
        {"stream": "omni-dlq:*", "field": "data.error", "action": "mask"},
    )
    kept, kept_omni = ours(r), omni(r)
    for key in ("orders:dlq", OMNI_KEY):
        assert search(viewer_client, key, 'error.contains("bob.hidden")') == []
        assert search(viewer_client, key, "bob.hidden") == []
    assert search(viewer_client, "orders:dlq", f'error == "{MASK}"') == [kept]
    assert search(viewer_client, OMNI_KEY, f'error == "{MASK}"') == [kept_omni]


def test_search_finds_the_error_when_no_rule_names_it(settings, db, viewer_client: Client, r) -> None:
    """The control of the test above: with the rule on another stream the same query finds the entry."""
    use_rules(settings, {"stream": "payments:dlq", "field": "dlq_error", "action": "mask"})
    kept = ours(r)
    response = viewer_client.get(stream_api("orders:dlq", "search/"), {"q": 'error.contains("bob.hidden")'})
    assert [m["id"] for m in response.json()["matches"]] == [kept]


# ------------------------------------------------------- the raw OmniDaemon dead letter on its stream page


def test_raw_omnidaemon_dead_letter_follows_its_origin(settings, db, viewer_client: Client, r) -> None:
    use_rules(settings, {"stream": "omni-stream:orders", "field": "data.customer.email", "action": "mask"})
    omni(r, {"customer": {"email": SECRET, "name": "Alice"}})
    for url in (stream_url(OMNI_KEY), stream_api(OMNI_KEY, "entries/")):
        response = viewer_client.get(url)
        assert response.status_code == 200
        assert SECRET.encode() not in response.content
        assert shown(response.content, MASK) and b"Alice" in response.content
    (entry,) = viewer_client.get(stream_api(OMNI_KEY, "entries/")).json()["entries"]
    doc = json.loads(entry["fields"]["data"])
    assert doc["failed_message"] == {"customer": {"email": MASK, "name": "Alice"}}
    assert doc["error"] == ERROR  # no rule names it: the rest of the entry is as stored
    assert search(viewer_client, OMNI_KEY, SECRET) == []


def test_omnidaemon_whole_data_rule_of_the_origin_hides_the_whole_message(
    settings, db, viewer_client: Client, r
) -> None:
    use_rules(settings, {"stream": "omni-stream:*", "field": "data", "action": "remove"})
    omni(r, {"customer": {"email": SECRET}})
    (entry,) = viewer_client.get(stream_api(OMNI_KEY, "entries/")).json()["entries"]
    doc = json.loads(entry["fields"]["data"])
    assert "failed_message" not in doc and doc["topic"] == "orders"
    (dead,) = viewer_client.get(f"/api/v1/c/default/dlq/{seg(OMNI_KEY)}/").json()["entries"]
    assert dead["payload"] == [] and dead["error"] == ERROR  # the DLQ's own fields are as stored
