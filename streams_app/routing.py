"""Websocket routes (the live tail arrives with its own issue)."""

from __future__ import annotations

websocket_urlpatterns: list = []
