"""confluent-kafka with the consumer group protocol (KIP-848, `group.protocol=consumer`)
against `tidelog serve`: the broker assigns the partitions. Two consumers join and split
the partitions with no partition owned twice; one leaves and the other gets them all;
committed offsets carry over to a consumer that resumes the group.

Run by run.sh with BOOTSTRAP set to the server's address.
"""
import os
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "kip848-orders"
GROUP = "kip848-group"
PARTITIONS = 4
RECORDS = 40

version = confluent_kafka.libversion()[1]
if version < 0x020600FF:
    sys.exit(f"librdkafka {confluent_kafka.libversion()[0]} predates group.protocol=consumer (2.6)")

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)]).values():
    f.result(30)
producer = Producer({"bootstrap.servers": BOOTSTRAP})
for i in range(RECORDS):
    producer.produce(TOPIC, key=str(i).encode(), value=f"v{i}".encode(), partition=i % PARTITIONS)
assert producer.flush(30) == 0, "records not delivered"


def consumer(name):
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "group.protocol": "consumer",
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([TOPIC])
    return c


def owned(c):
    return {tp.partition for tp in c.assignment()}


def poll_until(consumers, done, what, seconds=60):
    """Polls every consumer until done() holds; fails naming `what` after `seconds`."""
    deadline = time.time() + seconds
    seen = {}
    while not done():
        if time.time() > deadline:
            sys.exit(f"timed out waiting for {what}: {[sorted(owned(c)) for c in consumers]}")
        for c in consumers:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                seen[(msg.partition(), msg.offset())] = msg
            # No partition is ever owned by both at once.
            a, b = (owned(consumers[0]), owned(consumers[1])) if len(consumers) == 2 else (set(), set())
            assert not (a & b), f"partitions {sorted(a & b)} owned twice"
    return seen


a = consumer("kip848-a")
poll_until([a], lambda: len(owned(a)) == PARTITIONS, "the first consumer to own every partition")
b = consumer("kip848-b")
poll_until(
    [a, b],
    lambda: len(owned(a)) == PARTITIONS // 2 and len(owned(b)) == PARTITIONS // 2,
    "the two consumers to split the partitions",
)
assert owned(a) | owned(b) == set(range(PARTITIONS)), (owned(a), owned(b))

# The admin client sees a consumer-protocol group (ConsumerGroupDescribe, ListGroups v5).
described = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
assert described.type == ConsumerGroupType.CONSUMER, described.type
assert described.partition_assignor == "uniform", described.partition_assignor
assert len(described.members) == 2, described.members
split = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in described.members)
assert sorted(p for ps in split for p in ps) == list(range(PARTITIONS)), split
listed = {g.group_id: g for g in admin.list_consumer_groups().result(30).valid}
assert listed[GROUP].type == ConsumerGroupType.CONSUMER, listed[GROUP]

# b reads and commits its partitions up to their end, then leaves.
b_parts = sorted(owned(b))
consumed = {}
deadline = time.time() + 60
while sum(consumed.values()) < RECORDS // PARTITIONS * len(b_parts):
    if time.time() > deadline:
        sys.exit(f"b read only {consumed} of its partitions {b_parts}")
    msg = b.poll(0.1)
    a.poll(0)
    if msg is not None and msg.error() is None:
        consumed[msg.partition()] = consumed.get(msg.partition(), 0) + 1
        b.commit(message=msg, asynchronous=False)
b.close()

poll_until([a], lambda: len(owned(a)) == PARTITIONS, "the remaining consumer to get every partition")
a.close()

# A new consumer of the group resumes b's partitions after what b committed.
c = consumer("kip848-c")
poll_until([c], lambda: len(owned(c)) == PARTITIONS, "the resuming consumer to own every partition")
committed = c.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
for tp in committed:
    if tp.partition in b_parts:
        assert tp.offset == RECORDS // PARTITIONS, (tp.partition, tp.offset)
read = {}
deadline = time.time() + 60
expected = RECORDS - RECORDS // PARTITIONS * len(b_parts)
while sum(read.values()) < expected:
    if time.time() > deadline:
        sys.exit(f"the resumed consumer read {read}, expected {expected} records")
    msg = c.poll(0.1)
    if msg is not None and msg.error() is None:
        assert msg.partition() not in b_parts, f"re-read committed partition {msg.partition()}"
        read[msg.partition()] = read.get(msg.partition(), 0) + 1
c.close()
print("confluent-kafka consumer protocol: ok")
