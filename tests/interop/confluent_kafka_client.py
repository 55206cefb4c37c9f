"""confluent-kafka (librdkafka): idempotent producer and a consumer group of two members."""
import os
import sys
import threading
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "confluent-" + uuid.uuid4().hex[:8]
GROUP = "confluent-group-" + uuid.uuid4().hex[:8]
N = 2000

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, num_partitions=4, replication_factor=1)]).values():
    f.result(30)

errors = []
producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})
for i in range(N):
    producer.produce(TOPIC, key=str(i), value="v%d" % i,
                     on_delivery=lambda err, msg: err and errors.append(err))
    producer.poll(0)
if producer.flush(30) != 0 or errors:
    sys.exit("confluent-kafka: delivery failed: %r" % errors[:5])

seen = []
lock = threading.Lock()
stop = threading.Event()


def member():
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    })
    c.subscribe([TOPIC])
    while not stop.is_set():
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            errors.append(msg.error())
            continue
        with lock:
            seen.append(msg.value().decode())
            if len(seen) >= N:
                stop.set()
        c.commit(message=msg, asynchronous=False)
    c.close()


threads = [threading.Thread(target=member) for _ in range(2)]
for t in threads:
    t.start()
stop.wait(60)
stop.set()
for t in threads:
    t.join(30)
if len(set(seen)) != N:
    sys.exit("confluent-kafka: consumed %d distinct of %d (errors: %r)" % (len(set(seen)), N, errors[:5]))
print("confluent-kafka: ok (%d records, %d deliveries incl. redeliveries after rebalance)" % (N, len(seen)))
