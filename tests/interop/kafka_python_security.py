"""kafka-python against tidelog's SASL_SSL listener (started by security.sh): SCRAM-SHA-256
and PLAIN, produce and consume, and a wrong password's authentication error."""
import os
import sys
import uuid

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

SASL_SSL = os.environ["SASL_SSL_BOOTSTRAP"]
CA = os.environ["CA"]


def sec(mechanism, password="alice-secret"):
    return dict(bootstrap_servers=SASL_SSL, security_protocol="SASL_SSL",
                sasl_mechanism=mechanism, sasl_plain_username="alice",
                sasl_plain_password=password, ssl_cafile=CA)


for mechanism in ["SCRAM-SHA-256", "PLAIN"]:
    topic = "sec-kp-" + uuid.uuid4().hex[:8]
    producer = KafkaProducer(**sec(mechanism))
    for i in range(20):
        producer.send(topic, b"kp %d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, group_id="sec-kp-group", auto_offset_reset="earliest",
                             consumer_timeout_ms=10000, **sec(mechanism))
    got = [m.value for m in consumer]
    consumer.close()
    if got != [b"kp %d" % i for i in range(20)]:
        sys.exit("kafka-python %s: read back %r" % (mechanism, got[:3]))

try:
    KafkaProducer(**sec("SCRAM-SHA-512", password="wrong"), max_block_ms=5000)
    sys.exit("kafka-python: a wrong password connected")
except KafkaError as e:
    print("kafka-python: wrong password refused: %s" % type(e).__name__)
print("kafka-python security: ok")
