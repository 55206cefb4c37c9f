"""confluent-kafka's AdminClient against `tidelog serve`: list, describe and delete
consumer groups, with a live consumer group and one that only has offsets.

Run by run.sh with BOOTSTRAP set to the server's address.
"""
import os
import sys
import time

from confluent_kafka import Consumer, ConsumerGroupState, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "admin-groups"
LIVE = "admin-live"
IDLE = "admin-idle"

admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)]).values():
    f.result(30)

# A group that only has committed offsets.
idle = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": IDLE, "enable.auto.commit": False})
idle.commit(offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 4)], asynchronous=False)
idle.close()

# A live group of one consumer, polled until it owns both partitions.
live = Consumer({
    "bootstrap.servers": BOOTSTRAP,
    "group.id": LIVE,
    "client.id": "admin-live-client",
    "group.instance.id": "live-1",
    "session.timeout.ms": 10000,
    "auto.offset.reset": "earliest",
})
live.subscribe([TOPIC])
deadline = time.time() + 30
while len(live.assignment()) < 2:
    if time.time() > deadline:
        sys.exit("the live consumer never got its partitions")
    live.poll(0.1)

listed = admin.list_consumer_groups().result(30)
states = {g.group_id: g.state for g in listed.valid}
assert states.get(LIVE) == ConsumerGroupState.STABLE, states
assert states.get(IDLE) == ConsumerGroupState.EMPTY, states
only_stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(30)
assert [g.group_id for g in only_stable.valid] == [LIVE], only_stable.valid

described = admin.describe_consumer_groups([LIVE, IDLE])
d = described[LIVE].result(30)
assert d.state == ConsumerGroupState.STABLE, d.state
assert d.partition_assignor == "range", d.partition_assignor
assert len(d.members) == 1, d.members
m = d.members[0]
assert m.client_id == "admin-live-client", m.client_id
assert m.group_instance_id == "live-1", m.group_instance_id
got = sorted(tp.partition for tp in m.assignment.topic_partitions)
assert got == [0, 1], got
e = described[IDLE].result(30)
assert e.state == ConsumerGroupState.EMPTY and not e.members, (e.state, e.members)

# Deleting: the live group is refused (it has a member), the idle one goes.
futures = admin.delete_consumer_groups([IDLE, LIVE])
futures[IDLE].result(30)
try:
    futures[LIVE].result(30)
    sys.exit("deleting a group with members succeeded")
except Exception as err:  # KafkaException(NON_EMPTY_GROUP)
    assert "NON_EMPTY_GROUP" in str(err) or "not empty" in str(err).lower(), err
names = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
assert IDLE not in names and LIVE in names, names
live.close()
print("confluent-kafka admin groups: ok")
