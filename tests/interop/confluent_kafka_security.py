"""confluent-kafka against tidelog's secured listeners (started by security.sh): SASL_SSL
with SCRAM-SHA-512 end to end (idempotent producer, consumer group), a wrong password's
authentication error, ACLs (read-only principal, hidden topics, deny beats allow) and the
ACL and SCRAM admin APIs through AdminClient."""
import os
import sys
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)

SASL_SSL = os.environ["SASL_SSL_BOOTSTRAP"]
CA = os.environ["CA"]


def conf(user, password, mechanism="SCRAM-SHA-512", **extra):
    c = {"bootstrap.servers": SASL_SSL, "security.protocol": "SASL_SSL",
         "sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password,
         "ssl.ca.location": CA}
    c.update(extra)
    return c


def fail(msg):
    sys.exit("confluent-kafka security: " + msg)


def produce(c, topic, values):
    errors = []
    p = Producer(c)
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=lambda err, msg: err and errors.append(err))
        p.poll(0)
    p.flush(30)
    return errors


def consume(c, topic, n, group):
    cons = Consumer(dict(c, **{"group.id": group, "auto.offset.reset": "earliest"}))
    cons.subscribe([topic])
    got = []
    for _ in range(300):
        if len(got) >= n:
            break
        m = cons.poll(0.1)
        if m is None:
            continue
        if m.error():
            fail("consumer error on %s: %s" % (topic, m.error()))
        got.append(m.value().decode())
    cons.close()
    return got


alice = conf("alice", "alice-secret")
admin_conf = conf("admin", "admin-secret")
reader = conf("reader", "reader-secret", mechanism="SCRAM-SHA-256")

# SCRAM-SHA-512, idempotent producer, consumer group; the topic is auto-created (alice
# may Create topics named sec-*).
topic = "sec-py-" + uuid.uuid4().hex[:8]
values = ["v%d" % i for i in range(200)]
errs = produce(dict(alice, **{"enable.idempotence": True, "acks": "all"}), topic, values)
if errs:
    fail("alice's deliveries failed: %r" % errs[:3])
if consume(alice, topic, len(values), "sec-py-group") != values:
    fail("alice did not read back what she wrote")

# A wrong password: librdkafka's authentication error.
seen = []
bad = Producer(conf("alice", "wrong", error_cb=lambda e: seen.append(e)))
try:
    bad.list_topics(timeout=5)
    fail("metadata with a wrong password succeeded")
except KafkaException:
    pass
for _ in range(50):
    bad.poll(0.1)
    if seen:
        break
if not any(e.code() == KafkaError._AUTHENTICATION for e in seen):
    fail("no authentication error reported: %r" % seen)

# Read without Write: consumes, and producing is TOPIC_AUTHORIZATION_FAILED.
if produce(admin_conf, "sec-readonly", ["r0", "r1", "r2"]):
    fail("the super user could not write sec-readonly")
if consume(reader, "sec-readonly", 3, "sec-readers") != ["r0", "r1", "r2"]:
    fail("reader could not consume sec-readonly")
errs = produce(reader, "sec-readonly", ["nope"])
if not errs or any(e.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errs):
    fail("reader's write was not refused with TOPIC_AUTHORIZATION_FAILED: %r" % errs)

# Metadata lists only what a principal may describe; a deny beats alice's prefixed allow.
if produce(admin_conf, "sec-forbidden", ["x"]):
    fail("the super user could not write sec-forbidden")
listed = set(t for t in Producer(reader).list_topics(timeout=10).topics if not t.startswith("__"))
if listed != {"sec-readonly"}:
    fail("reader sees %r" % sorted(listed))
listed = set(Producer(alice).list_topics(timeout=10).topics)
if "sec-forbidden" in listed or topic not in listed:
    fail("alice sees %r" % sorted(listed))

# The ACL and SCRAM admin APIs over the wire.
admin = AdminClient(admin_conf)
everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
before = admin.describe_acls(everything).result(30)
extra = AclBinding(ResourceType.TOPIC, "sec-extra", ResourcePatternType.LITERAL, "User:reader",
                   "*", AclOperation.READ, AclPermissionType.ALLOW)
for f in admin.create_acls([extra]).values():
    f.result(30)
after = admin.describe_acls(everything).result(30)
if len(after) != len(before) + 1 or extra not in after:
    fail("create_acls/describe_acls: %d then %d bindings" % (len(before), len(after)))
for f in admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "sec-extra",
                                             ResourcePatternType.LITERAL, None, None,
                                             AclOperation.ANY, AclPermissionType.ANY)]).values():
    if len(f.result(30)) != 1:
        fail("delete_acls did not remove the one binding")
if hasattr(admin, "describe_user_scram_credentials"):
    described = admin.describe_user_scram_credentials(["alice"])
    if isinstance(described, dict):  # confluent-kafka >= 2.3: a future per user
        alice_description = described["alice"].result(30)
    else:
        alice_description = described.result(30)["alice"]
    mechanisms = sorted(str(i.mechanism) for i in alice_description.scram_credential_infos)
    if len(mechanisms) != 2:
        fail("alice's SCRAM credentials: %r" % mechanisms)
print("confluent-kafka security: ok")
