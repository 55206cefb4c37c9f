"""Kafka's own admin clients against a three-node cluster: kafka-python describes the
metadata quorum through each node (describe_metadata_quorum: a node that is not the
controller forwards it there), moves a partition (alter_partition_reassignments,
list_partition_reassignments until the move completed), describes every node's log
directory (describe_log_dirs: the moved partition on its new replicas, not on the removed
one) and elects the preferred leader (elect_leaders); confluent-kafka's elect_leaders
answers ELECTION_NOT_NEEDED once the first replica leads."""
import os
import sys
import time
import uuid

from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka import ElectionType, KafkaError
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

BOOTSTRAP = os.environ["BOOTSTRAP"]
TOPIC = "moves-" + uuid.uuid4().hex[:8]


def fail(why):
    sys.exit("cluster partitions: " + why)


def until(what, check, seconds=60):
    deadline = time.time() + seconds
    while True:
        got = check()
        if got:
            return got
        if time.time() > deadline:
            fail("timed out waiting for " + what)
        time.sleep(0.3)


def admin_of_three():
    """An admin client whose metadata lists the three brokers, else None. kafka-python
    keeps the brokers of its first Metadata answer (for metadata.max.age.ms, 5 minutes)
    and sends describe_log_dirs to those alone: a node started again just before, not
    yet unfenced then, would be left out of every answer."""
    client = KafkaAdminClient(bootstrap_servers=BOOTSTRAP.split(","), request_timeout_ms=30000)
    try:
        if (len(client.describe_cluster()["brokers"]) == 3
                and sorted(b["broker"] for b in client.describe_log_dirs()) == [1, 2, 3]):
            return client
    except Exception as e:  # noqa: BLE001 - a node still starting: ask again
        print("admin client not ready: %r" % (e,), file=sys.stderr)
    client.close()
    return None


admin = until("three brokers in an admin client's metadata", admin_of_three)


answers = {}


def quorum_through(address):
    """The controller, as kafka-python's describe_metadata_quorum names it with only
    `address` to ask; None (the answer kept in `answers`) while it is not a full one."""
    one = KafkaAdminClient(bootstrap_servers=[address], request_timeout_ms=30000)
    try:
        partition = one.describe_metadata_quorum()["topics"][0]["partitions"][0]
    finally:
        one.close()
    answers[address] = partition
    voters = sorted(v["replica_id"] for v in partition["current_voters"])
    if partition["error"] or voters != [1, 2, 3] or partition["leader_id"] not in voters:
        return None
    return partition["leader_id"]


# Each node answers, whether it is the controller or not (kafka-python sends the request
# to the node it knows best, here the only one it was given). A controller election
# still under way is waited out; a node that keeps refusing fails with its answer.
try:
    leaders = {until("describe_metadata_quorum through " + address,
                     lambda: quorum_through(address), 30)
               for address in BOOTSTRAP.split(",")}
except SystemExit:
    print("last answers: %r" % (answers,), file=sys.stderr)
    raise
if len(leaders) != 1:
    fail("the nodes name different controllers: %r" % (leaders,))
print("metadata quorum: controller %d, voters [1, 2, 3], through every node" % leaders.pop())
admin.create_topics([NewTopic(TOPIC, num_partitions=-1, replication_factor=-1,
                              replica_assignments={0: [1, 2]})])


def replicas():
    t = admin.describe_topics([TOPIC])[0]
    p = [p for p in t["partitions"] if p["partition_index"] == 0]
    return (p[0]["replica_nodes"], p[0]["leader_id"]) if p and t["error_code"] == 0 else None


until("the topic", replicas)
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP.split(","), acks="all")
for i in range(100):
    producer.send(TOPIC, value=b"v%d" % i, partition=0)
producer.flush(30)
producer.close()

# Move the replica of node 2 to node 3, which becomes the first (preferred) replica.
tp = TopicPartition(TOPIC, 0)
answer = admin.alter_partition_reassignments({tp: [3, 1]})
if answer.get(tp) is not None:
    fail("alter_partition_reassignments: %r" % (answer,))
until("the move to complete",
      lambda: not admin.list_partition_reassignments() and replicas()[0] == [3, 1])


def holders():
    """The nodes whose log directory holds the partition, with its size."""
    out = {}
    for broker in admin.describe_log_dirs():
        for d in broker.get("log_dirs", []):
            for t in d.get("topics", []):
                for p in t.get("partitions", []):
                    if t.get("name") == TOPIC and p.get("partition_index") == 0:
                        out[broker["broker"]] = p.get("partition_size")
    return out


def moved():
    h = holders()
    return h if sorted(h) == [1, 3] and all(size > 0 for size in h.values()) else None


print("log dirs holding %s-0: %r" % (TOPIC, until("node 2's copy deleted", moved)))

# A preferred election makes node 3 lead; then it is not needed any more.
admin.elect_leaders(0, {TOPIC: [0]}, raise_errors=False)
until("node 3 to lead", lambda: replicas()[1] == 3)
ck = AdminClient({"bootstrap.servers": BOOTSTRAP})
result = ck.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition(TOPIC, 0)]).result(30)


def code(e):
    return (e if isinstance(e, KafkaError) else e.args[0]).code()


if len(result) != 1 or any(e is None or code(e) != KafkaError.ELECTION_NOT_NEEDED
                           for e in result.values()):
    fail("confluent-kafka elect_leaders: %r" % (result,))
print("cluster partitions: %s-0 moved to [3, 1], node 3 leads" % TOPIC)
