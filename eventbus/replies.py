"""The shapes of stream replies on a client that does not decode (every client of the bus).

redis-py types a reply as ``bytes | str | None`` whatever the client, as it cannot know
``decode_responses``; the bus never sets it, so an XRANGE reply is rows of bytes and an XREAD or
XREADGROUP reply one (key, rows) pair per stream. Callers ``cast`` a reply to these at the call.
"""

from __future__ import annotations

Fields = dict[bytes, bytes]
Rows = list[tuple[bytes, Fields]]
StreamsReply = list[tuple[bytes, Rows]]
