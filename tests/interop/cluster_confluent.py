"""confluent-kafka against a three-node cluster: a topic with replication factor 3, an
idempotent acks=all producer, a consumer group reading every record once."""
import os
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "replicated-" + uuid.uuid4().hex[:8]
GROUP = "replicated-group-" + uuid.uuid4().hex[:8]
N = 3000

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, num_partitions=6, replication_factor=3)]).values():
    f.result(30)
md = admin.list_topics(TOPIC, timeout=10)
parts = md.topics[TOPIC].partitions
if len(parts) != 6 or any(len(p.replicas) != 3 or len(p.isrs) != 3 for p in parts.values()):
    sys.exit("confluent-kafka cluster: %s is not 6 partitions x 3 in-sync replicas: %r"
             % (TOPIC, {i: (p.replicas, p.isrs) for i, p in parts.items()}))
if len(md.brokers) != 3:
    sys.exit("confluent-kafka cluster: %d brokers" % len(md.brokers))

errors = []
producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})
for i in range(N):
    producer.produce(TOPIC, key=str(i), value="v%d" % i,
                     on_delivery=lambda err, msg: err and errors.append(err))
    producer.poll(0)
if producer.flush(60) != 0 or errors:
    sys.exit("confluent-kafka cluster: delivery failed: %r" % errors[:5])

consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP,
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
consumer.subscribe([TOPIC])
seen = set()
deadline = time.time() + 60
while len(seen) < N and time.time() < deadline:
    msg = consumer.poll(0.5)
    if msg is None:
        continue
    if msg.error():
        sys.exit("confluent-kafka cluster: %s" % msg.error())
    value = msg.value().decode()
    if value in seen:
        sys.exit("confluent-kafka cluster: %s read twice" % value)
    seen.add(value)
consumer.commit(asynchronous=False)
consumer.close()
if len(seen) != N:
    sys.exit("confluent-kafka cluster: read %d of %d" % (len(seen), N))
print("confluent-kafka cluster: ok (%d records, 6 partitions x 3 replicas, group %s)" % (N, GROUP))
