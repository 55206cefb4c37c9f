"""kafka-python: producer with its default (idempotent) settings, group consumers with commits."""
import os
import sys
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "kafka-python-" + uuid.uuid4().hex[:8]
GROUP = "kafka-python-group-" + uuid.uuid4().hex[:8]
N = 1000

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=1)])
admin.close()

producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
print("idempotence:", producer.config.get("enable_idempotence"))
futures = [producer.send(TOPIC, key=str(i).encode(), value=("v%d" % i).encode()) for i in range(N)]
producer.flush()
for f in futures:
    f.get(timeout=30)
producer.close()


def consume(expected):
    consumer = KafkaConsumer(
        TOPIC,
        bootstrap_servers=BOOTSTRAP,
        group_id=GROUP,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10000,
    )
    seen = []
    for msg in consumer:
        seen.append(msg.value.decode())
        if len(seen) == expected:
            break
    consumer.commit()
    consumer.close()
    return seen


first = consume(N)
if sorted(first) != sorted("v%d" % i for i in range(N)):
    sys.exit("kafka-python: consumed %d records, %d distinct, expected %d" % (len(first), len(set(first)), N))

# The group resumes from its committed offsets: only new records come.
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
for i in range(N, N + 10):
    producer.send(TOPIC, value=("v%d" % i).encode())
producer.flush()
producer.close()
second = consume(10)
if sorted(second) != sorted("v%d" % i for i in range(N, N + 10)):
    sys.exit("kafka-python: after commit, consumed %r" % second)
print("kafka-python: ok")
