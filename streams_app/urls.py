"""Console pages and the JSON API (SPEC section 4).

``<seg:key>`` and ``<seg:group>`` are byte strings carried as one percent-encoded path segment;
build their URLs with :mod:`streams_app.links`, not ``reverse()``.
"""

from __future__ import annotations

from django.urls import path, register_converter

from streams_app.links import BytesSegmentConverter, ConnConverter
from streams_app.views import group, overview, stream, streams
from streams_app.views.api import read as api_read

register_converter(BytesSegmentConverter, "seg")
register_converter(ConnConverter, "conn")


class EntryIdConverter:
    regex = r"[0-9]{1,20}-[0-9]{1,20}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(EntryIdConverter, "eid")

STREAM = "c/<conn:conn>/streams/<seg:key>/"
API_STREAM = "api/v1/" + STREAM

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("c/<conn:conn>/streams/", streams.streams_list, name="streams"),
    path(STREAM, stream.stream_detail, name="stream"),
    path(STREAM + "entries/<eid:entry_id>/", stream.entry_detail, name="entry"),
    path(STREAM + "entries/<eid:entry_id>/raw/", stream.entry_raw, name="entry-raw"),
    path(STREAM + "groups/<seg:group>/", group.group_detail, name="group"),
    # JSON API
    path("api/v1/connections/", api_read.connections, name="api-connections"),
    path("api/v1/c/<conn:conn>/streams/", api_read.streams, name="api-streams"),
    path(API_STREAM, api_read.stream, name="api-stream"),
    path(API_STREAM + "entries/", api_read.entries, name="api-entries"),
    path(API_STREAM + "groups/", api_read.groups, name="api-groups"),
    path(API_STREAM + "groups/<seg:group>/pending/", api_read.pending, name="api-pending"),
    path(API_STREAM + "groups/<seg:group>/consumers/", api_read.consumers, name="api-consumers"),
]
