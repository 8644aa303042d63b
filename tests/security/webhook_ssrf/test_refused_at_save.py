"""Alert webhooks cannot be pointed at internal addresses: a rule's webhook URL is checked when it is saved.

Loopback, private, link-local and odd spellings of them, and URLs with credentials, are form errors;
a public receiver, a name that does not resolve yet (checked again at send), and an address inside
the admin's allow list are saved.
"""

from __future__ import annotations

import ipaddress

import pytest
from django.test import Client

from streams_app.alerts.models import AlertRule
from tests.security.webhook_ssrf.helpers import PUBLIC_IP, FakeDns, Listener, assert_form_error, post_rule


def test_a_loopback_webhook_is_refused_at_save(admin_client_: Client, listener: Listener) -> None:
    response = post_rule(admin_client_, listener.url)
    assert_form_error(response)
    assert "loopback" in str(response.context["form"].errors["webhook_url"])
    assert listener.connections() == 0


@pytest.mark.parametrize("url", [
    "http://user:pw@example.test/",
    "http://[::1]:80/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://localhost/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://0.0.0.0:6379/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://[fe80::1]/",
    "http://example.com:70000/",
    "http://example.com:0/",
    "ftp://example.com/hook",
    "file:///etc/passwd",
])
def test_internal_odd_and_credentialed_webhooks_are_form_errors(admin_client_: Client, url: str) -> None:
    assert_form_error(post_rule(admin_client_, url))


def test_a_public_receiver_is_saved(admin_client_: Client, dns: FakeDns) -> None:
    dns.answers["hooks.example.test"] = [PUBLIC_IP]
    assert post_rule(admin_client_, "https://hooks.example.test/services/T00/secret").status_code == 302
    assert AlertRule.objects.get().webhook_url == "https://hooks.example.test/services/T00/secret"


def test_a_name_that_does_not_resolve_yet_is_saved_and_checked_when_sent(admin_client_: Client) -> None:
    assert post_rule(admin_client_, "https://not-yet.example.test/hook").status_code == 302


def test_the_allow_list_lets_an_on_premise_receiver_be_saved(admin_client_: Client, settings) -> None:
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network("10.0.0.0/8"),)
    assert post_rule(admin_client_, "http://10.1.2.3:8080/hook").status_code == 302
    assert post_rule(admin_client_, "http://192.168.1.1:8080/hook").status_code == 400  # outside the list
