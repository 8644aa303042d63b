"""Turn stream field values (arbitrary bytes) into something a person can read: the console's names for
:mod:`eventbus.decoding`.

The decoder is Django-free so that the bus's command line searches and shows entries exactly as the
console does; it lives in :mod:`eventbus.decoding` (the formats, their order and the heuristics are in
its docstring) and every name the console imports from here is re-exported unchanged.
"""

from __future__ import annotations

from eventbus.decoding import (  # noqa: F401  (re-exported: the console's names)
    BIDI_CONTROLS,
    FASTSTREAM_MAGIC,
    HEX_LINE,
    PREVIEW_LIMIT,
    Decoded,
    DecodedField,
    as_bytes,
    decode_fields,
    decode_value,
    decoded_value,
    display_text,
    escape_bidi,
)
