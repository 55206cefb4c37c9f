"""confluent-kafka's ShareConsumer (share groups, KIP-932) on a three-node cluster through
a SIGKILL of the partition's leader: two share consumers of one partition (replication
factor 3) accept what they get (explicit acknowledgement, committed with commit_sync);
once a third of the records are accepted, one consumer takes records and holds them
while cluster.sh kills the partition's leader (SIGKILL), then accepts them; the node is
started again once every record is accepted.

Checked: every record produced is accepted (or its commit failed and it never came
again: the node took the acceptance and its answer was lost); none is delivered again
once its acceptance was committed (the share-partition's state moved with the leadership, through
__share_group_state); a record delivered again was delivered before without a
committed acceptance, and comes with a higher delivery count.

The script asks cluster.sh for each kill and start on stdout ("@fault kill N",
"@fault start N") and reads "ok" on stdin. Run by cluster.sh with BOOTSTRAP set to the
three nodes' addresses.
"""
import faulthandler
import os
import sys
import time

import confluent_kafka
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "share-failover"
GROUP = "share-failover-workers"
RECORDS = 300
DEADLINE = time.time() + 240

faulthandler.dump_traceback_later(300, exit=True)
if not hasattr(confluent_kafka, "ShareConsumer"):
    sys.exit(f"confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer")


def check_deadline(what):
    if time.time() > DEADLINE:
        sys.exit(f"share failover: timed out {what}")


def fault(command, node):
    """Has cluster.sh kill (SIGKILL) or start node `node`; returns once it is done."""
    print(f"@fault {command} {node}", flush=True)
    reply = sys.stdin.readline().strip()
    if reply != "ok":
        sys.exit(f"share failover: cluster.sh answered {reply!r} to {command} {node}")


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
topic = NewTopic(TOPIC, num_partitions=1, replication_factor=3,
                 config={"min.insync.replicas": "2"})
for f in admin.create_topics([topic]).values():
    f.result(30)


def leader():
    """The node leading the partition, as the cluster's metadata says."""
    while True:
        check_deadline("waiting for a leader")
        p = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.get(0)
        if p is not None and p.leader > 0:
            return p.leader
        time.sleep(0.2)


def share_consumer(name):
    c = confluent_kafka.ShareConsumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "client.id": name,
        "share.acknowledgement.mode": "explicit",
        "max.poll.records": 10,
    })
    c.subscribe([TOPIC])
    return c


accepted = set()           # values whose acceptance was committed
unsure = set()             # values whose commit failed: the node may have taken it
delivered = {}             # value -> the delivery counts it came with


def take(c, who):
    """Polls once; the records that came, each checked and noted as delivered."""
    try:
        messages = c.poll(0.5)
    except KafkaException as e:
        print(f"{who}: poll: {e}", flush=True)
        return []
    got = []
    for m in messages:
        if m.error() is not None:
            print(f"{who}: {m.error()}", flush=True)
            continue
        v = m.value().decode()
        assert v not in accepted, f"{v} delivered to {who} again after its acceptance was committed"
        counts = delivered.setdefault(v, [])
        assert not counts or m.delivery_count() > counts[-1], \
            f"{v} delivered again with delivery count {m.delivery_count()} after {counts}"
        counts.append(m.delivery_count())
        got.append(m)
    return got


def accept(c, who, messages):
    """Accepts `messages` and commits; a failed commit leaves them unsure (the node may
    have taken it, else they come again)."""
    if not messages:
        return
    for m in messages:
        c.acknowledge(m)
    got = [m.value().decode() for m in messages]
    try:
        results = c.commit_sync(30)
    except KafkaException as e:
        print(f"{who}: commit_sync: {e}", flush=True)
        unsure.update(got)
        return
    if all(e is None for e in results.values()):
        accepted.update(got)
    else:
        print(f"{who}: commit_sync: {results}", flush=True)
        unsure.update(got)


def work(c, who):
    accept(c, who, take(c, who))


consumers = {name: share_consumer(name) for name in ("a", "b")}
# Join and make the share-partition (it starts at the log's end, Kafka's default
# share.auto.offset.reset) before producing.
warm_until = time.time() + 5
while time.time() < warm_until:
    for name, c in consumers.items():
        work(c, name)
assert not delivered, f"delivered before anything was produced: {delivered}"

producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
values = [f"q{i}" for i in range(RECORDS)]
for v in values:
    producer.produce(TOPIC, value=v.encode(), partition=0)
assert producer.flush(30) == 0, "records not delivered"

killed = None
while len(accepted | unsure) < RECORDS:
    check_deadline(f"with {len(accepted)} of {RECORDS} records accepted")
    for name, c in consumers.items():
        work(c, name)
    if killed is None and len(accepted) >= RECORDS // 3:
        # "a" holds records it acquired from the leader (not acknowledged) when it dies.
        held = []
        while not held:
            check_deadline("for records to hold")
            held = take(consumers["a"], "a")
        killed = leader()
        print(f"share failover: {len(accepted)} accepted, {len(held)} held; "
              f"kill -9 node {killed}, the leader", flush=True)
        fault("kill", killed)
        accept(consumers["a"], "a", held)
# A record whose commit failed comes again unless the node took the acceptance before
# its answer was lost: wait past the record lock duration (30 s) for those.
settle = time.time() + 40
while unsure - accepted and time.time() < settle:
    for name, c in consumers.items():
        work(c, name)

assert killed is not None, "the leader was never killed"
assert accepted | unsure == set(values), \
    f"missing {set(values) - accepted - unsure}, extra {(accepted | unsure) - set(values)}"
again = {v: c for v, c in delivered.items() if len(c) > 1}
fault("start", killed)
for c in consumers.values():
    try:
        c.close()
    except KafkaException as e:
        print(f"close: {e}", flush=True)
print(f"share failover: every record accepted through the leader's kill, none delivered "
      f"after its acceptance; {len(again)} delivered again before it, "
      f"{len(unsure - accepted)} taken by a node whose answer was lost", flush=True)
