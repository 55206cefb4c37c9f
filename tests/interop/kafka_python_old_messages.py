"""Old message formats, as clients of Kafka 0.9 and 0.10 send and read them: a
kafka-python producer pinned to api_version (0, 9) sends Produce v1 with messages of
magic 0, one pinned to (0, 10) sends Produce v2 with magic 1 (timestamps); the broker
converts both to record batches. A consumer pinned to (0, 10) reads them back (Fetch
v2-3, down-converted to magic 1), with their keys, values and the magic 1 timestamps."""
import os
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

bootstrap = os.environ["BOOTSTRAP"]
topic = "old-messages-" + uuid.uuid4().hex[:8]

admin = KafkaAdminClient(bootstrap_servers=bootstrap)
admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
admin.close()

sent = []
for version, n in [((0, 9), 3), ((0, 10), 3)]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=version, acks=1)
    for i in range(n):
        key = f"{version[1]}-k{i}".encode()
        value = f"{version[1]}-v{i}".encode()
        ts = 1_700_000_000_000 + i if version >= (0, 10) else None
        meta = producer.send(topic, key=key, value=value, partition=0, timestamp_ms=ts).get(timeout=30)
        sent.append((meta.offset, key, value, ts))
    producer.close()
assert [o for o, *_ in sent] == list(range(6)), sent

consumer = KafkaConsumer(
    bootstrap_servers=bootstrap,
    api_version=(0, 10),
    auto_offset_reset="earliest",
    enable_auto_commit=False,
    consumer_timeout_ms=10_000,
)
from kafka import TopicPartition

consumer.assign([TopicPartition(topic, 0)])
got = []
for record in consumer:
    got.append((record.offset, record.key, record.value, record.timestamp))
    if len(got) == len(sent):
        break
consumer.close()
assert [g[:3] for g in got] == [s[:3] for s in sent], (got, sent)
for (_, _, _, ts), (_, _, _, want) in zip(got, sent):
    if want is not None:
        assert ts == want, (ts, want)
print(f"old message formats: {len(got)} records through Produce v1-2 and Fetch v2-3")
