#!/usr/bin/env python3
"""A batch tidelog encodes, decoded by a real Kafka client library (kafka-python).

Run from the repository root (needs cargo and kafka-python):

    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install kafka-python
    /tmp/venv/bin/python tests/interop/record_roundtrip.py

It runs the Rust test `emit_batch_for_kafka_python` (tests/record_interop.rs) with
TIDELOG_INTEROP_OUT set, so the bytes come from the current BatchBuilder, then decodes
them with kafka.record.default_records.DefaultRecordBatch, checks the CRC and every
header and record field against interop_records.RECORDS, re-builds the same records
with kafka-python's DefaultRecordBatchBuilder to compare the bytes, and decodes with
kafka.record.MemoryRecords what a read of a tidelog log holding the batch returns. Exit status 0 on
success, 1 with a message on any mismatch, 2 if kafka-python is not installed.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

from interop_records import BASE_SEQUENCE, PRODUCER_EPOCH, PRODUCER_ID, RECORDS  # noqa: E402

try:
    from kafka.record.default_records import (  # noqa: E402
        DefaultRecordBatch, DefaultRecordBatchBuilder)
except ImportError:
    print("record_roundtrip: kafka-python is not installed (pip install kafka-python)",
          file=sys.stderr)
    sys.exit(2)


def fail(msg):
    print("record_roundtrip: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(what, got, want):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def tidelog_bytes():
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "tidelog-batch.bin")
        env = dict(os.environ, TIDELOG_INTEROP_OUT=out)
        subprocess.run(
            ["cargo", "test", "--quiet", "--test", "record_interop",
             "emit_batch_for_kafka_python", "--", "--exact"],
            cwd=ROOT, env=env, check=True)
        with open(out, "rb") as f:
            built = f.read()
        with open(out + ".fetched", "rb") as f:
            fetched = f.read()
        with open(out + ".markers", "rb") as f:
            markers = f.read()
        return built, fetched, markers


def main():
    data, fetched, markers = tidelog_bytes()
    batch = DefaultRecordBatch(data)
    if not batch.validate_crc():
        fail("kafka-python rejects the CRC-32C of tidelog's batch")
    check("size_in_bytes", batch.size_in_bytes, len(data))
    check("magic", batch.magic, 2)
    check("base_offset", batch.base_offset, 0)
    check("leader_epoch", batch.leader_epoch, -1)
    check("compression_type", batch.compression_type, 0)
    check("timestamp_type", batch.timestamp_type, 0)
    check("is_transactional", batch.is_transactional, False)
    check("is_control_batch", batch.is_control_batch, False)
    check("producer_id", batch.producer_id, PRODUCER_ID)
    check("producer_epoch", batch.producer_epoch, PRODUCER_EPOCH)
    check("base_sequence", batch.base_sequence, BASE_SEQUENCE)
    check("last_offset_delta", batch.last_offset_delta, len(RECORDS) - 1)
    check("first_timestamp", batch.first_timestamp, RECORDS[0][0])
    check("max_timestamp", batch.max_timestamp, max(r[0] for r in RECORDS))
    check("records_count", batch.records_count, len(RECORDS))
    records = list(batch)
    check("records decoded", len(records), len(RECORDS))
    for i, (rec, (ts, key, value, headers)) in enumerate(zip(records, RECORDS)):
        check("record %d offset" % i, rec.offset, i)
        check("record %d timestamp" % i, rec.timestamp, ts)
        check("record %d key" % i, rec.key, key)
        check("record %d value" % i, rec.value, value)
        check("record %d headers" % i, rec.headers, headers)

    # kafka-python's own encoding of the same records: identical apart from the
    # partitionLeaderEpoch (bytes 12..16) that it leaves 0 and tidelog sets to -1.
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH, base_sequence=BASE_SEQUENCE, batch_size=1 << 20)
    for delta, (ts, key, value, headers) in enumerate(RECORDS):
        b.append(delta, timestamp=ts, key=key, value=value, headers=headers)
    theirs = bytes(b.build())
    check("bytes 0..12", data[:12], theirs[:12])
    check("bytes 16..", data[16:], theirs[16:])

    # What a consumer fetches from a tidelog log: two batches, ours stamped at offset 3.
    from kafka.record.memory_records import MemoryRecords
    mem = MemoryRecords(fetched)
    first = mem.next_batch()
    second = mem.next_batch()
    if first is None or second is None or mem.next_batch() is not None:
        fail("kafka-python does not find exactly two batches in a tidelog read")
    for b in (first, second):
        if not b.validate_crc():
            fail("kafka-python rejects the CRC of a batch read from a tidelog log")
    first_records = [(r.offset, r.value) for r in first]
    check("first fetched batch", first_records, [(0, b"\x00"), (1, b"\x01"), (2, b"\x02")])
    check("second fetched batch base_offset", second.base_offset, 3)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in second]
    want = [(3 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(RECORDS)]
    check("second fetched batch records", got, want)

    # Transaction markers (control batches) as a consumer fetches them: kafka-python
    # reads them as ControlRecords (it builds none: only brokers write them).
    mem = MemoryRecords(markers)
    txn, commit, abort = mem.next_batch(), mem.next_batch(), mem.next_batch()
    if abort is None or mem.next_batch() is not None:
        fail("kafka-python does not find exactly three batches in a tidelog transaction")
    check("transactional batch", (txn.is_transactional, txn.is_control_batch), (True, False))
    for b, offset, kind in ((commit, 1, 1), (abort, 2, 0)):
        what = "marker at %d" % offset
        if not b.validate_crc():
            fail("kafka-python rejects the CRC of a tidelog " + what)
        check(what + " bits", (b.is_transactional, b.is_control_batch), (True, True))
        check(what + " producer", (b.producer_id, b.producer_epoch, b.base_sequence),
              (PRODUCER_ID, PRODUCER_EPOCH, -1))
        check(what + " size", b.size_in_bytes, 78)
        recs = list(b)
        check(what + " records", len(recs), 1)
        r = recs[0]
        check(what + " offset", r.offset, offset)
        check(what + " key", (r.version, r.type, r.commit, r.abort), (0, kind, kind == 1, kind == 0))
        check(what + " value (version 0, coordinator epoch 7)", r.value, b"\x00\x00\x00\x00\x00\x07")
        check(what + " timestamp", r.timestamp, 1_700_000_000_001)
    print("record_roundtrip: OK: kafka-python decoded tidelog's %d-byte batch of %d records"
          " and its COMMIT and ABORT markers" % (len(data), len(records)))


if __name__ == "__main__":
    main()
