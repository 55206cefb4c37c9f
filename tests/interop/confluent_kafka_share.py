"""confluent-kafka's ShareConsumer (share groups, KIP-932) against `tidelog serve`:
three share consumers of one partition (explicit acknowledgement, committed with
commit_sync) get disjoint records that together are every
record produced; a consumer closed without acknowledging its records has them
redelivered to another consumer (delivery count 2).

Run by run.sh with BOOTSTRAP set to the server's address.
"""
import os
import sys
import time

import confluent_kafka
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "share-work"
GROUP = "share-workers"
RECORDS = 60

if not hasattr(confluent_kafka, "ShareConsumer"):
    sys.exit(f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer")

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, num_partitions=1, replication_factor=1)]).values():
    f.result(30)
producer = Producer({"bootstrap.servers": BOOTSTRAP})


def produce(values):
    for v in values:
        producer.produce(TOPIC, value=v.encode(), partition=0)
    assert producer.flush(30) == 0, "records not delivered"


def share_consumer(name, mode="implicit"):
    c = confluent_kafka.ShareConsumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "client.id": name,
        "share.acknowledgement.mode": mode,
        # Small fetches, so that the records are spread over the consumers.
        "max.poll.records": 10,
    })
    c.subscribe([TOPIC])
    return c


def values(messages, who):
    out = []
    for m in messages:
        if m.error() is not None:
            raise SystemExit(f"{who}: {m.error()}")
        out.append((m.value().decode(), m.delivery_count()))
    return out


def work(c, who, timeout=0.5):
    """Polls once and accepts what came (explicit acknowledgement, committed)."""
    messages = c.poll(timeout)
    got = values(messages, who)
    for m in messages:
        c.acknowledge(m)
    if got:
        c.commit_sync()
    return got


consumers = {name: share_consumer(name, mode="explicit") for name in ("a", "b", "c")}
# Join and make the share-partition (it starts at the log's end, Kafka's default
# share.auto.offset.reset) before producing.
warm_until = time.time() + 5
while time.time() < warm_until:
    for name, c in consumers.items():
        work(c, name)
first = [f"r{i}" for i in range(RECORDS)]
produce(first)

got = {name: [] for name in consumers}
deadline = time.time() + 60
while sum(len(v) for v in got.values()) < RECORDS and time.time() < deadline:
    for name, c in consumers.items():
        got[name].extend(v for v, _ in work(c, name))
seen = [v for vs in got.values() for v in vs]
assert len(seen) == len(set(seen)), f"a record went to two consumers: {got}"
assert sorted(seen) == sorted(first), f"missing {set(first) - set(seen)}, extra {set(seen) - set(first)}"
assert sum(1 for v in got.values() if v) >= 2, f"one consumer took everything: {got}"
for c in consumers.values():
    c.close()
print("share consumers:", {n: len(v) for n, v in got.items()})

# A consumer that closes without acknowledging: its records go to another.
holder = share_consumer("holder", mode="explicit")
warm_until = time.time() + 5
while time.time() < warm_until:
    holder.poll(0.5)
second = [f"s{i}" for i in range(10)]
produce(second)
held = []
deadline = time.time() + 30
while not held and time.time() < deadline:
    held = values(holder.poll(0.5), "holder")
assert held, "the holder got nothing"
assert all(count == 1 for _, count in held), held
holder.close()

taker = share_consumer("taker", mode="explicit")
again = []
deadline = time.time() + 60
while len(again) < len(second) and time.time() < deadline:
    again.extend(work(taker, "taker"))
taker.close()
counts = dict(again)
assert sorted(counts) == sorted(second), f"taker got {again}"
for v, _ in held:
    assert counts[v] == 2, f"{v} redelivered with delivery count {counts[v]}: {again}"
print(f"redelivered {len(held)} records after close")
