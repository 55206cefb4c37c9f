"""kafka-python with incremental fetch sessions (KIP-227, its default): a consumer of many
partitions opens a session with a full fetch, then sends incremental fetches while
records arrive in rounds; every record is read exactly once and the session's epoch
moved past its first incremental fetch."""
import os
import sys
import time
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "kafka-python-sessions-" + uuid.uuid4().hex[:8]
PARTITIONS = 40
ROUNDS = 4
PER_ROUND = 50

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
admin.close()

consumer = KafkaConsumer(
    bootstrap_servers=BOOTSTRAP,
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    fetch_max_wait_ms=100,
)
consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)

seen = []
expected = []
for r in range(ROUNDS):
    # Each round writes to a few partitions only: the others stay idle in the session.
    for i in range(PER_ROUND):
        value = "r%d-%d" % (r, i)
        expected.append(value)
        producer.send(TOPIC, value=value.encode(), partition=(r * 7 + i) % 5 + r)
    producer.flush()
    deadline = time.time() + 30
    while len(seen) < len(expected) and time.time() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            seen.extend(m.value.decode() for m in records)
    if len(seen) < len(expected):
        sys.exit("kafka-python sessions: round %d read %d of %d records" % (r, len(seen), len(expected)))
producer.close()

if sorted(seen) != sorted(expected):
    sys.exit("kafka-python sessions: read %d records, %d distinct, expected %d" % (len(seen), len(set(seen)), len(expected)))
handlers = list(consumer._fetcher._session_handlers.values())
epochs = [(h.next_metadata.session_id, h.next_metadata.epoch) for h in handlers]
consumer.close()
if not any(sid > 0 and epoch > 2 for sid, epoch in epochs):
    sys.exit("kafka-python sessions: no incremental fetch session was used: %r" % epochs)
print("kafka-python fetch sessions: ok", epochs)
