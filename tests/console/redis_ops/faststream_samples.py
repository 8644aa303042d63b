"""FastStream envelopes as bytes: hex dumps of what FastStream 0.6.7's own encoder produced.

Each constant was made by ``faststream.redis.BinaryMessageFormatV1.encode`` with the arguments written
above it, so the decoder is checked against the library's bytes rather than against a construction of our
own. ``test_decoding_faststream.py`` decodes them; ``test_decoding.py`` uses them as seeds for its fuzzing.
"""

from __future__ import annotations

# encode(message={"order_id": 7, "items": ["a", "b"]}, reply_to=None, headers=None, correlation_id="cid-1")
FS_JSON_DICT = bytes.fromhex(
    "8942494e0d0a1a0a0001000000120000004b0002000e636f7272656c6174696f6e5f696400056369642d31000c636f6e74656e"
    "742d7479706500106170706c69636174696f6e2f6a736f6e7b226f726465725f6964223a20372c20226974656d73223a205b"
    "2261222c202262225d7d"
)
# encode(message="hello world", reply_to="replies", headers={"x-trace": "t1"}, correlation_id="cid-2")
FS_TEXT = bytes.fromhex(
    "8942494e0d0a1a0a000100000012000000650004000e636f7272656c6174696f6e5f696400056369642d32000c636f6e74656e"
    "742d74797065000a746578742f706c61696e00087265706c795f746f00077265706c6965730007782d74726163650002743168"
    "656c6c6f20776f726c64"
)
# encode(message=b"\x00\x01\xff", reply_to=None, headers=None, correlation_id="cid-3")
FS_BYTES = bytes.fromhex(
    "8942494e0d0a1a0a0001000000120000002b0001000e636f7272656c6174696f6e5f696400056369642d330001ff"
)
# encode(message=None, reply_to=None, headers=None, correlation_id="cid-4")
FS_EMPTY = bytes.fromhex(
    "8942494e0d0a1a0a0001000000120000002b0001000e636f7272656c6174696f6e5f696400056369642d34"
)
# encode(message=[1, 2, 3], reply_to=None, headers=None, correlation_id="c6")
FS_LIST = bytes.fromhex(
    "8942494e0d0a1a0a000100000012000000480002000e636f7272656c6174696f6e5f696400026336000c636f6e74656e742d74"
    "7970650010"
    "6170706c69636174696f6e2f6a736f6e5b312c20322c20335d"
)
# encode(message=msgpack.packb({"k": 1}), reply_to=None, headers={"content-type": "application/msgpack"},
#        correlation_id="c7")
FS_MSGPACK_BODY = bytes.fromhex(
    "8942494e0d0a1a0a0001000000120000004b0002000e636f7272656c6174696f6e5f696400026337000c636f6e74656e742d74"
    "797065001361"
    "70706c69636174696f6e2f6d73677061636b81a16b01"
)
# encode(message={"name": "café"}, reply_to=None, headers={"who": "café"}, correlation_id="c5"): FastStream
# writes the header's length in characters (4) while "café" is 5 bytes; FastStream's parser gives up on it.
FS_NON_ASCII_HEADER = bytes.fromhex(
    "8942494e0d0a1a0a000100000012000000540003000e636f7272656c6174696f6e5f696400026335000c636f6e74656e742d74"
    "7970650010"
    "6170706c69636174696f6e2f6a736f6e000377686f0004636166c3a97b226e616d65223a20226361665c75"
    "30306539227d"
)
