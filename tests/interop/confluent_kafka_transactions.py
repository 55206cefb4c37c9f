"""confluent-kafka's transactional producer against `tidelog serve`: transactions over
two topics committed, one aborted, a second producer with the same transactional.id
fencing the first, a read_uncommitted consumer that sees data records only (the
COMMIT and ABORT markers take offsets but never surface as messages), and a
read_committed one that sees the committed records and none of the aborted ones. Then
kafka-python's transactional producer: a commit, and fencing by a second instance.
Last, offsets sent to transactions (TxnOffsetCommit): not the group's until the
transaction commits, dropped when it aborts.

Run by run.sh with BOOTSTRAP set to the server's address.
"""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPICS = ["txn-a", "txn-b"]
TXN_ID = "interop-txn"

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(t, num_partitions=1, replication_factor=1) for t in TOPICS]).values():
    f.result(30)


def producer():
    return Producer({
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": TXN_ID,
        "transaction.timeout.ms": 60000,
    })


def send(p, tag, n=3):
    """Produces n records of `tag` to each topic in the open transaction."""
    for t in TOPICS:
        for i in range(n):
            p.produce(t, key=f"{tag}-{i}".encode(), value=f"{tag}-{i}".encode())


first = producer()
first.init_transactions(30)

first.begin_transaction()
send(first, "commit1")
first.commit_transaction(30)

first.begin_transaction()
send(first, "aborted")
first.flush(30)
first.abort_transaction(30)

first.begin_transaction()
send(first, "commit2")
first.commit_transaction(30)

# A second instance with the same transactional.id fences the first.
second = producer()
second.init_transactions(30)
fenced = None
try:
    first.begin_transaction()
    send(first, "zombie", 1)
    first.commit_transaction(10)
except KafkaException as err:
    fenced = err.args[0]
if fenced is None:
    sys.exit("the fenced producer committed a transaction")
assert fenced.fatal() or fenced.code() in (
    KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH,
), fenced

second.begin_transaction()
send(second, "commit3")
second.commit_transaction(30)


def consume(isolation):
    """Every message of both topics, as (topic, value), and the end offsets."""
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": f"txn-reader-{isolation}",
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.assign([TopicPartition(t, 0, 0) for t in TOPICS])
    got = []
    ends = {t: c.get_watermark_offsets(TopicPartition(t, 0), timeout=10)[1] for t in TOPICS}
    seen_to = {t: 0 for t in TOPICS}
    deadline = time.time() + 30
    while any(seen_to[t] < ends[t] for t in TOPICS) and time.time() < deadline:
        m = c.poll(0.2)
        if m is None:
            # Markers at the end of a log are never delivered: stop once the
            # position passes them.
            for tp in c.position([TopicPartition(t, 0) for t in TOPICS]):
                seen_to[tp.topic] = max(seen_to[tp.topic], tp.offset)
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                continue
            sys.exit(f"consumer error: {m.error()}")
        got.append((m.topic(), m.value().decode()))
        seen_to[m.topic()] = max(seen_to[m.topic()], m.offset() + 1)
    c.close()
    return got, ends


records, ends = consume("read_uncommitted")
for t in TOPICS:
    values = [v for topic, v in records if topic == t]
    expected = [f"{tag}-{i}" for tag in ("commit1", "aborted", "commit2", "commit3") for i in range(3)]
    assert values == expected, (t, values)
    # 12 data records and 4 markers (COMMIT, ABORT, COMMIT, COMMIT): the markers
    # take offsets but never surface as messages.
    assert ends[t] == 16, (t, ends[t])

committed, _ = consume("read_committed")
for t in TOPICS:
    values = [v for topic, v in committed if topic == t]
    expected = [f"{tag}-{i}" for tag in ("commit1", "commit2", "commit3") for i in range(3)]
    assert values == expected, (t, values)

# kafka-python's transactional producer against the same coordinator: a commit, and
# fencing by a second instance (PRODUCER_FENCED).
from kafka import KafkaProducer  # noqa: E402
from kafka.errors import KafkaError as KpError  # noqa: E402

kp = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id="interop-txn-kp")
kp.init_transactions()
kp.begin_transaction()
kp.send(TOPICS[0], b"kp-1")
kp.commit_transaction()
kp2 = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id="interop-txn-kp")
kp2.init_transactions()
try:
    kp.begin_transaction()
    kp.send(TOPICS[0], b"kp-zombie")
    kp.commit_transaction()
    sys.exit("kafka-python: the fenced producer committed a transaction")
except KpError as err:
    assert "Fenced" in str(err) or "fenced" in str(err), err
kp2.close()

# Offsets in a transaction (send_offsets_to_transaction: AddOffsetsToTxn, then
# TxnOffsetCommit): pending until the transaction ends (a read_uncommitted fetch of the
# group's offsets does not see them), the group's once it commits, dropped if it aborts.
GROUP = "txn-offsets"
reader = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": GROUP,
    "enable.auto.commit": False,
    "isolation.level": "read_uncommitted",
})
meta = reader.consumer_group_metadata()
# EndTxn answers once the commit or abort is decided, before its markers are written (as
# Kafka); a read_committed consumer asks OffsetFetch with require_stable and is told
# UNSTABLE_OFFSET_COMMIT (and retries) until the group's marker has landed.
stable = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": GROUP,
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
})


def group_offset():
    return reader.committed([TopicPartition(TOPICS[0], 0)], timeout=10)[0].offset


def stable_offset():
    return stable.committed([TopicPartition(TOPICS[0], 0)], timeout=30)[0].offset


second.begin_transaction()
send(second, "offsets-commit", 1)
second.send_offsets_to_transaction([TopicPartition(TOPICS[0], 0, 5)], meta, 30)
assert group_offset() < 0, group_offset()
second.commit_transaction(30)
assert stable_offset() == 5, stable_offset()
second.begin_transaction()
send(second, "offsets-abort", 1)
second.send_offsets_to_transaction([TopicPartition(TOPICS[0], 0, 9)], meta, 30)
second.abort_transaction(30)
assert stable_offset() == 5, stable_offset()
reader.close()
stable.close()

print("confluent-kafka transactions: ok")
