"""confluent-kafka's consume-transform-produce loop on a three-node cluster: a group
consumer reads an input topic, a transactional producer writes a copy of each record to
an output topic and sends the consumer's positions to the same transaction
(send_offsets_to_transaction); every third transaction is aborted, and the consumer goes
back to the group's committed offsets to copy those records again. A read_committed
consumer of the output then finds every input record's copy exactly once, and the
group's committed offsets are the input's ends.

Run by cluster.sh with BOOTSTRAP set to the three nodes' addresses.
"""
import collections
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
IN, OUT = "copy-in", "copy-out"
PARTITIONS = 3
RECORDS = 600
GROUP = "copy-group"
STARTED = time.time()
DEADLINE = STARTED + 60


def check_deadline(what):
    if time.time() > DEADLINE:
        sys.exit(f"confluent-kafka copy: out of time while {what}")


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics(
    [NewTopic(t, num_partitions=PARTITIONS, replication_factor=3) for t in (IN, OUT)]
).values():
    f.result(30)

source = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})
for i in range(RECORDS):
    source.produce(IN, key=f"k-{i}".encode(), value=f"v-{i}".encode())
assert source.flush(30) == 0, "the input was not all acknowledged"

consumer = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": GROUP,
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "isolation.level": "read_committed",
})
consumer.subscribe([IN])
producer = Producer({
    "bootstrap.servers": BOOTSTRAP,
    "transactional.id": "copy-txn",
    "transaction.timeout.ms": 30000,
})
producer.init_transactions(30)

inputs = [TopicPartition(IN, p) for p in range(PARTITIONS)]
ends = {}
for tp in inputs:
    low, high = consumer.get_watermark_offsets(tp, timeout=10)
    ends[tp.partition] = high
assert sum(ends.values()) == RECORDS, ends


def rewind():
    """Back to the group's committed offsets (the start where none is committed)."""
    for tp in consumer.committed(consumer.assignment(), timeout=10):
        offset = tp.offset if tp.offset >= 0 else 0
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def done():
    committed = consumer.committed(inputs, timeout=10)
    return all(tp.offset == ends[tp.partition] for tp in committed)


transactions = aborted = 0
while not done():
    check_deadline("copying")
    batch = [m for m in consumer.consume(num_messages=50, timeout=0.5) if m is not None]
    errors = [m.error() for m in batch if m.error() is not None]
    assert all(e.code() == KafkaError._PARTITION_EOF for e in errors), errors
    batch = [m for m in batch if m.error() is None]
    if not batch:
        continue
    transactions += 1
    producer.begin_transaction()
    for m in batch:
        producer.produce(OUT, key=m.key(), value=b"copy-" + m.value())
    producer.send_offsets_to_transaction(
        consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 30
    )
    if transactions % 3 == 0:
        producer.flush(30)
        producer.abort_transaction(30)
        aborted += 1
        rewind()
    else:
        producer.commit_transaction(30)
consumer.close()
assert aborted > 0, "no transaction was aborted"

reader = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": "copy-reader",
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
})
outputs = [TopicPartition(OUT, p, 0) for p in range(PARTITIONS)]
reader.assign(outputs)
# The last stable offset of each output partition: read until the position passes it
# (the last records of a log are markers, which are never delivered).
out_ends = {tp.partition: reader.get_watermark_offsets(tp, timeout=10)[1] for tp in outputs}
values = []
while True:
    check_deadline("reading the copies")
    positions = {tp.partition: tp.offset for tp in reader.position(outputs)}
    if all(positions[p] >= out_ends[p] for p in out_ends):
        break
    m = reader.poll(0.2)
    if m is None:
        continue
    if m.error():
        if m.error().code() == KafkaError._PARTITION_EOF:
            continue
        sys.exit(f"confluent-kafka copy: reader error: {m.error()}")
    values.append(m.value().decode())
reader.close()

counts = collections.Counter(values)
expected = {f"copy-v-{i}" for i in range(RECORDS)}
missing = expected - counts.keys()
twice = {v: n for v, n in counts.items() if n != 1}
unknown = counts.keys() - expected
assert not missing and not twice and not unknown, (sorted(missing)[:10], twice, unknown)
print(f"confluent-kafka copy: {RECORDS} records copied exactly once in {transactions} "
      f"transactions ({aborted} aborted), {time.time() - STARTED:.1f} s")
