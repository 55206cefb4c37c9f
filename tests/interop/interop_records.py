"""The records shared by the tidelog <-> kafka-python interop checks.

tests/record_interop.rs builds the very same records with tidelog's BatchBuilder; keep
the two lists in sync (the Rust test compares against the committed fixture bytes, so a
drift shows up as a failing test rather than silently).
"""

PRODUCER_ID = 4242
PRODUCER_EPOCH = 3
BASE_SEQUENCE = 17

# (timestamp_ms, key, value, [(header_key, header_value)])
RECORDS = [
    (1700000000000, b"key-0", b"hello", [("trace-id", b"abc123"), ("empty", b"")]),
    (1700000000005, None, b"no key", []),
    # Earlier than the first record: a negative timestamp delta (zigzag varlong).
    (1699999999990, b"k2", None, [("null-value", None)]),
    # 300-byte value: a two-byte varint length; a non-ASCII header key.
    (1700000000123, b"big", bytes(i % 251 for i in range(300)), [("h\u00e9ader", b"\x00\xff")]),
    (1700000000100, b"", b"", []),
]
